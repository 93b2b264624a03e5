--- uci: the UCI regression benchmark of Hernandez-Lobato and Adams (2015),
-- as used since by Gal and Ghahramani (2016) and Lakshminarayanan et al.
-- (2017): random 90/10 train/test splits, one hidden layer of 50 units,
-- inputs and target standardised on the training part, test RMSE and test
-- log-likelihood with their standard errors over the splits, printed beside
-- the published numbers. Rows: Bayes by Backprop with each estimator
-- (weight, local, flipout), MC dropout and a plain MLP (both with a learned
-- noise level). Early stopping looks at --val of each training part; with
-- --refit (the default) the model is then trained again on the whole
-- training part for the epochs that were best.
--   nice -n 10 build/bbblua scripts/uci.lua --out doc/results/uci
local recipe = require "bbb.app.recipe"
local uci = require "bbb.app.experiments.uci"

recipe.main("uci.lua", function() uci.report(uci.run(uci.parse(arg))) end)

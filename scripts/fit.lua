--- fit: a Bayesian MLP on a table of your own, with its uncertainty scored.
-- Reads a CSV (or an R data set, FOLDER:NAME), standardises inputs and (for
-- regression) the target on the training rows, splits train / validation /
-- test (or takes --test FILE), trains by Bayes by Backprop (or the plain and
-- MC-dropout baselines) with early stopping on the validation
-- log-likelihood, and prints test RMSE or accuracy, test log-likelihood and
-- calibration (50/90/95% interval coverage, or ECE). --save writes one
-- checkpoint holding the model and its preprocessing for scripts/predict.lua.
--   build/bbblua scripts/fit.lua --data table.csv --target price --save out/price.ckpt
local recipe = require "bbb.app.recipe"
local fit = require "bbb.app.experiments.fit"

recipe.main("fit.lua", function() fit.run(fit.parse(arg)) end)

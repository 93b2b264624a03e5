--- 1-d regression with uncertainty bands: a Bayes-by-Backprop net against a
-- deterministic MLP, on the toy points of the PyTorch tutorial (seed 001), the
-- curve of Blundell et al. (2015, fig. 5), or a noisy sine (seed 004's sweep
-- over the KL weight beta).
-- bbblua scripts/regression.lua --help
local recipe = require "bbb.app.recipe"
local regression = require "bbb.app.experiments.regression"

recipe.main("regression.lua", function()
  regression.plot(regression.report(regression.run(regression.parse(arg))))
end)

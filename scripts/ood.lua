--- Uncertainty that earns its keep: a Bayes-by-Backprop MLP against a plain
-- MLP and an MC-dropout MLP of the same size, on the in-distribution test
-- set, the other data set (dataset shift), N(0, 1) noise and uniform noise:
-- entropies, mutual information, AUROC of in against out, calibration.
-- bbblua scripts/ood.lua --help
local recipe = require "bbb.app.recipe"
local ood = require "bbb.app.experiments.ood"

recipe.main("ood.lua", function()
  local result = ood.run(ood.parse(arg))
  ood.report(result)
  ood.plot(result)
end)

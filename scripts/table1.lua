--- The rows of Table 1 of Blundell et al. (2015) that a budget allows: MNIST
-- test error of two-hidden-layer networks trained by SGD without and with
-- dropout and by Bayes by Backprop with a Gaussian or a scale-mixture
-- prior. Under --protocol recipe each row is a run of the MNIST experiment
-- (bbb.app.experiments.mnist, called as a function) with the adam-N preset;
-- under --protocol paper, a search of the paper's grid on the validation split.
-- bbblua scripts/table1.lua --help
local recipe = require "bbb.app.recipe"
local table1 = require "bbb.app.experiments.table1"

recipe.main("table1.lua", function()
  local result = table1.run(table1.parse(arg))
  table1.report(result)
  -- each failed row was said as it failed; the status says the table is not whole
  if result.failed then os.exit(1) end
end)

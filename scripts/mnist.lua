--- MNIST (or Fashion-MNIST) classification with Bayes by Backprop, or with
-- the plain and dropout MLP baselines, through the shared training loop.
-- The experiment itself is bbb.app.experiments.mnist; this is its command line.
-- bbblua scripts/mnist.lua --help
local recipe = require "bbb.app.recipe"
local mnist = require "bbb.app.experiments.mnist"

recipe.main("mnist.lua", function()
  local result = mnist.run(mnist.parse(arg))
  mnist.report(result)
  mnist.plot(result)
  if result.status == "interrupted" and result.lead then
    recipe.interrupted("mnist.lua", result, result.nranks > 1 and " --distributed" or "",
      result.nranks > 1 and ("mpirun -np %d "):format(result.nranks) or "")
  elseif result.status == "interrupted" then
    os.exit(128 + (result.signal or 2))
  end
end)

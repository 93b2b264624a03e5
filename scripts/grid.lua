--- Hyperparameter grid search on a validation split (Blundell et al. 2015,
-- section 5.1; seed 002's grid by default): every configuration is a run of
-- scripts/mnist.lua (the shared training loop) in its own process with one
-- thread. Each finished configuration is appended to the results file as
-- one JSON line at once; rerunning the same command skips those, so a killed
-- grid resumes where it stopped. Under mpirun the configurations are spread
-- over the ranks: rank 0 hands them out one at a time (a rank that finishes
-- takes the next) and alone writes the results file.
--   mpirun -np 8 bbblua scripts/grid.lua
-- bbblua scripts/grid.lua --help
local recipe = require "bbb.app.recipe"
local grid = require "bbb.app.experiments.grid"

recipe.main("grid.lua", function()
  local result = grid.report(grid.run(grid.parse(arg)))
  if result.args.final then grid.final(result) end
end)

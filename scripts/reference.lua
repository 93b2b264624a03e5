--- reference: how far is my posterior from the true one? A Hamiltonian
-- Monte Carlo reference posterior of a small net on a table of your own,
-- and each method fit.lua fits (Bayes by Backprop, MC dropout, a deep
-- ensemble, a plain net) scored against it on the same test rows: the
-- 1-Wasserstein distance of its predictive (regression), its agreement and
-- total variation (classification), and every test log-likelihood.
-- Resumable: the chains and fits an earlier run finished in --out are kept.
--   build/bbblua scripts/reference.lua --data data/r/MASS:Boston --target medv --out out/boston-ref
--   build/bbblua scripts/reference.lua --help
local recipe = require "bbb.app.recipe"
local reference = require "bbb.app.experiments.reference"

recipe.main("reference.lua", function()
  reference.report(reference.run(reference.parse(arg)))
end)

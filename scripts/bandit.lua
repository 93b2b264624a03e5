--- The Mushroom contextual bandit of Blundell et al. (2015, section 5.3,
-- figure 6): Bayes by Backprop with Thompson sampling against epsilon-greedy
-- MLPs (5%, 1%, 0%), a uniform agent, linear Thompson sampling, MC-dropout
-- Thompson sampling and NeuralLinear. The network agents' settings are the
-- ablation's (doc/notebook/bandit.md, bbb.app.experiments.bandit_agent.DEFAULTS); --paper-agent
-- gives the previous ones.
-- Every agent meets the same mushrooms and poison coins (common random
-- numbers); agents run in parallel worker processes, one thread each.
-- bbblua scripts/bandit.lua --help
local recipe = require "bbb.app.recipe"
local bandit = require "bbb.app.experiments.bandit"

recipe.main("bandit.lua", function()
  local args = bandit.parse(arg)
  if args.worker then return bandit.work(args) end   -- one run, started by the coordinator below
  local result = bandit.run(args)
  bandit.report(result)
  if not args.no_plot then bandit.plot(result) end
end)

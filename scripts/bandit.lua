--- The Mushroom contextual bandit of Blundell et al. (2015, section 5.3,
-- figure 6): Bayes by Backprop with Thompson sampling against epsilon-greedy
-- MLPs (5%, 1%, 0%), a uniform agent, linear Thompson sampling, MC-dropout
-- Thompson sampling and NeuralLinear. The network agents' settings are the
-- ablation's (doc/bandit.md, bbb.app.experiments.bandit_agent.DEFAULTS); --paper-agent
-- gives the previous ones.
-- Every agent meets the same mushrooms and poison coins (common random
-- numbers); agents run in parallel worker processes, one thread each.
-- bbblua scripts/bandit.lua --help
local recipe = require "bbb.app.recipe"
local bandit = require "bbb.app.experiments.bandit"

recipe.main("bandit.lua", function() bandit.run(bandit.parse(arg)) end)

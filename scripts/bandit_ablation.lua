--- The ablation of the Mushroom bandit's Bayes by Backprop agent:
-- one row per change of the agent's settings, each played over several
-- seeds through bbb.app.experiments.bandit_agent (the same runs as scripts/bandit.lua's
-- workers: same mushrooms, coins and agent seeds), with the posterior
-- diagnosed at probe steps. Every finished (row, seed) is appended to a JSONL
-- file at once, so a stopped ablation resumes where it stopped.
-- bbblua scripts/bandit_ablation.lua --help
local recipe = require "bbb.app.recipe"
local ablation = require "bbb.app.experiments.bandit_ablation"

recipe.main("bandit_ablation.lua", function() ablation.report(ablation.run(ablation.parse(arg))) end)

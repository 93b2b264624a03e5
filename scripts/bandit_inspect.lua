--- bandit_inspect: why a bandit agent still pays regret. For each checkpoint
-- of scripts/bandit.lua (<out>/ckpt/NAME_rRUN.safetensors; BBB and the
-- epsilon-greedy agents), over all 8,124 mushrooms: the poisonous ones its
-- posterior mean would eat and the edible ones it would pass, the regret per
-- step those mistakes cost under its weight draws, and, for every poisonous
-- mushroom the mean eats, what the replay buffer holds of it: only lucky
-- meals (the coin gave +5 every time), at least one -35, or none (the
-- network generalised from other mushrooms).
--   build/bbblua scripts/bandit_inspect.lua out/bandit/ckpt/bbb_r0.safetensors
local recipe = require "bbb.app.recipe"
local inspect = require "bbb.app.experiments.bandit_inspect"

recipe.main("bandit_inspect.lua", function() inspect.report(inspect.run(inspect.parse(arg))) end)

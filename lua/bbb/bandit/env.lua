--- The Mushroom bandit (Blundell et al. 2015, section 5.3): each step draws
-- one of the 8,124 mushrooms uniformly at random (with replacement); the
-- agent sees its 117 one-hot features and eats or passes.
--
-- Rewards: pass 0; eat an edible one +5; eat a poisonous one +5 or -35 with
-- probability 1/2 each. The oracle eats exactly the edible ones (reward 5
-- when edible, 0 otherwise). Two regrets are kept, both cumulative:
--   realised  oracle reward - the reward received (it can be -5 at a step:
--             a poisonous mushroom eaten with luck);
--   expected  oracle reward - the expected reward of the action taken
--             (0, 5 for passing an edible one, 15 for eating a poisonous
--             one): the coin's noise removed, so curves compare cleanly.
--
-- Common random numbers: the mushroom sequence and the poison coin flips
-- come from the environment's own generator, so every agent built with the
-- same seed meets the same mushrooms and the same coins.
local bbb = require "bbb"

local env = {}

env.PASS, env.EAT = 1, 2
env.ACTIONS = { "pass", "eat" }

local function check_action(a, what)
  if a ~= env.PASS and a ~= env.EAT then
    error(("%s: action must be 1 (pass) or 2 (eat), got %s"):format(what, tostring(a)), 3)
  end
end

--- reward(edible, action, lucky) -> the reward; lucky: the coin that makes
-- a poisonous mushroom harmless (+5 instead of -35).
function env.reward(edible, action, lucky)
  check_action(action, "reward")
  if action == env.PASS then return 0 end
  if edible or lucky then return 5 end
  return -35
end

--- expected_reward(edible, action): the reward averaged over the coin.
function env.expected_reward(edible, action)
  check_action(action, "expected_reward")
  if action == env.PASS then return 0 end
  return edible and 5 or -15
end

--- oracle_reward(edible): the oracle eats exactly the edible ones.
function env.oracle_reward(edible) return edible and 5 or 0 end

local Mushroom = {}
Mushroom.__index = Mushroom

--- Mushroom{data = bbb.data.load_mushroom{} (loaded if nil), seed = 1 | generator = g}
function env.Mushroom(opts)
  opts = opts or {}
  local data = opts.data or bbb.data.load_mushroom{ path = opts.path }
  if type(data) ~= "table" or not bbb.is_tensor(data.x) or type(data.edible) ~= "table" then
    error("Mushroom: data must be a table from bbb.data.load_mushroom", 2)
  end
  local seed = opts.seed or 1
  if math.type(seed) ~= "integer" then
    error(("Mushroom: seed must be an integer, got %s"):format(tostring(seed)), 2)
  end
  local self = setmetatable({
    x = data.x, edible = data.edible, n = data.n, dim = data.x:size(2),
    generator = opts.generator or bbb.Generator(seed),
    t = 0, reward = 0, oracle = 0, regret_expected = 0, regret_realised = 0,
  }, Mushroom)
  return self
end

--- next() -> context (1, 117), row index: draws the step's mushroom and coin.
function Mushroom:next()
  local u = bbb.rand({ 2 }, 0, 1, self.generator):totable()
  return self:present(math.min(self.n, 1 + math.floor(u[1] * self.n)), u[2] < 0.5)
end

--- present(i, lucky) -> context, i: puts mushroom i and the given coin
-- before the agent instead of a random draw (replays, hand-made sequences).
function Mushroom:present(i, lucky)
  if math.type(i) ~= "integer" or i < 1 or i > self.n then
    error(("Mushroom:present: i must be an integer in 1..%d, got %s"):format(self.n, tostring(i)), 2)
  end
  self.i, self.lucky = i, lucky and true or false
  return self.x:narrow(1, i, 1), i
end

--- act(action) -> reward: scores the action on the mushroom of the last next().
function Mushroom:act(action)
  check_action(action, "Mushroom:act")
  if not self.i then error("Mushroom:act: call next() first", 2) end
  local edible = self.edible[self.i]
  local r = env.reward(edible, action, self.lucky)
  local best = env.oracle_reward(edible)
  self.t = self.t + 1
  self.reward = self.reward + r
  self.oracle = self.oracle + best
  self.regret_realised = self.regret_realised + (best - r)
  self.regret_expected = self.regret_expected + (best - env.expected_reward(edible, action))
  self.i = nil
  return r
end

--- The bookkeeping, for checkpoints (the generator's state is saved apart).
function Mushroom:state()
  return { t = self.t, reward = self.reward, oracle = self.oracle,
           regret_expected = self.regret_expected, regret_realised = self.regret_realised }
end

function Mushroom:set_state(st)
  for _, k in ipairs { "t", "reward", "oracle", "regret_expected", "regret_realised" } do
    if type(st[k]) ~= "number" then error(("Mushroom:set_state: %s is missing"):format(k), 2) end
    self[k] = st[k]
  end
  self.t = math.tointeger(self.t) or error("Mushroom:set_state: t must be an integer", 2)
end

return env

--- A bandit agent driven by hand: the Mushroom bandit of Blundell et al.
-- (2015, section 5.3) step by step. Each step the environment shows a
-- mushroom, the agent eats it or passes, the reward comes back, and the
-- agent learns from it. Bayes by Backprop decides by Thompson sampling (one
-- draw of its weights per decision); the greedy agent trusts its one net.
-- bbblua examples/bandit_by_hand.lua
local bbb = require "bbb"
local bandit = bbb.bandit

local data = bbb.data.load_mushroom{}
local function play(agent, steps)
  local env = bandit.Mushroom{ data = data, seed = 7 }   -- the same mushrooms for every agent
  for t = 1, steps do
    local context = env:next()
    local action = agent:decide(context)   -- 1: eat, 2: pass
    local reward = env:act(action)
    agent:update(context, action, reward)
  end
  return env
end

local common = { seed = 3, updates = 8, batch = 32, buffer = 4096, hidden = { 50, 50 }, context_dim = data.x:size(2) }
local agents = {
  { "Bayes by Backprop", bandit.BBB(setmetatable({ prior = bbb.prior.Gaussian{ sigma = 0.1 } }, { __index = common })) },
  { "greedy", bandit.EpsilonGreedy(setmetatable({ epsilon = 0 }, { __index = common })) },
}
for _, a in ipairs(agents) do
  local env = play(a[2], 300)
  print(("%-18s after 300 mushrooms: expected regret %.0f (the oracle eats exactly the edible ones)")
    :format(a[1], env.regret_expected))
end

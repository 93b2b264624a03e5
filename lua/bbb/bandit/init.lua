--- bbb.bandit: contextual bandits with Thompson sampling (Blundell et al.
-- 2015, section 5.3): the Mushroom environment, agents sharing
-- decide(context) / update(context, action, reward), a replay buffer, and
-- run() that plays an agent against an environment.
local env = require "bbb.bandit.env"
local agents = require "bbb.bandit.agents"

local bandit = {
  Mushroom = env.Mushroom, reward = env.reward, expected_reward = env.expected_reward,
  oracle_reward = env.oracle_reward, PASS = env.PASS, EAT = env.EAT, ACTIONS = env.ACTIONS,
  ReplayBuffer = require "bbb.bandit.buffer",
  BBB = agents.BBB, EpsilonGreedy = agents.EpsilonGreedy, Uniform = agents.Uniform,
  LinearTS = agents.LinearTS, fit_buffer = agents.fit_buffer,
  MCDropout = require "bbb.bandit.dropout", NeuralLinear = require "bbb.bandit.neural_linear",
}

--- run(env, agent, steps [, on_step]) -> env: plays `steps` steps;
-- on_step(t, env, action, reward) after each one.
-- @usage
--   local env = bbb.bandit.Mushroom{ seed = 1 }
--   bbb.bandit.run(env, bbb.bandit.Uniform{ seed = 1 }, 100)
--   print(env.t, env.regret_expected)   -- 100 steps, the regret so far
function bandit.run(environment, agent, steps, on_step)
  if math.type(steps) ~= "integer" or steps < 0 then
    error(("bandit.run: steps must be a non-negative integer, got %s"):format(tostring(steps)), 2)
  end
  for _ = 1, steps do
    local context = environment:next()
    local action = agent:decide(context)
    local r = environment:act(action)
    agent:update(context, action, r)
    if on_step then on_step(environment.t, environment, action, r) end
  end
  return environment
end

return bandit

--- NeuralLinear{refit = 100, lambda = 0.25, a0 = 6, b0 = 6, ...the network
-- agents' options}: Riquelme et al. (2018)'s NeuralLinear. An MLP of the
-- greedy agents' shape is trained on the rewards as they are; its last
-- hidden layer z(context, action) feeds a conjugate Bayesian linear
-- regression per action (bbb.bandit.linear's normal-inverse-gamma model),
-- and each decision is a Thompson draw from that regression. Each new
-- transition updates the regression with its features; every `refit` steps
-- the regression is recomputed from the whole buffer with the network's
-- current features (X'X by one GEMM, then a Cholesky factorisation).
local bbb = require "bbb"
local agents = require "bbb.bandit.agents"
local LinearTS = require "bbb.bandit.linear"

local NL = setmetatable({}, { __index = agents.Neural })
NL.__index = NL

-- The last hidden layer's output for the rows of x: (n, hidden).
function NL:features(x)
  return bbb.no_grad(function()
    local layers = self.net.layers
    for i = 1, #layers - 1 do x = layers[i]:forward(x) end
    return x
  end)
end

-- Recomputes both actions' regressions from the buffer.
function NL:refit_posterior()
  local n, ctx = self.buffer:size(), self.context_dim
  local x, y = self.buffer.x:narrow(1, 1, n), self.buffer.y:narrow(1, 1, n)
  local z = bbb.cat({ self:features(x), bbb.ones{ n, 1 } }, 2)
  local d = z:size(2)
  for a = 1, 2 do
    local m = x:narrow(2, ctx + a, 1)                -- 1 on the rows where action a was taken
    local za = z * m
    local G = bbb.matmul(za, za, true, false):reshape(-1):totable()
    local xy = bbb.matmul(za, y, true, false):reshape(-1):totable()
    local yy = (y:square() * m):sum():item()
    local count = math.floor(m:sum():item() + 0.5)
    assert(#G == d * d)
    self.blr:set_posterior(a, G, xy, yy, count)
  end
end

function NL:decide(context)
  agents.check_context(self, context)
  local x = bbb.cat({ bbb.cat({ context, context }, 1), self.both_actions }, 2)
  local z = self:features(x):totable()
  local best, best_v
  for a = 1, 2 do
    local beta, v = self.blr:sample_beta(a), 0
    local za = z[a]
    for i = 1, #za do v = v + za[i] * beta[i] end
    v = v + beta[#za + 1]   -- the intercept
    if not best_v or v > best_v then best, best_v = a, v end
  end
  return best
end

function NL:update(context, action, reward)
  agents.Neural.update(self, context, action, reward)
  if self.buffer.count % self.refit == 0 then
    self:refit_posterior()
  else
    local x = bbb.cat({ context, self.action_rows[action] }, 2)
    self.blr:update(self:features(x), action, reward)
  end
end

function NL:state()
  local st, tensors = agents.Neural.state(self)
  st.blr = self.blr:state()
  return st, tensors
end

function NL:set_state(st, tensors)
  agents.Neural.set_state(self, st, tensors)
  self.blr:set_state(st.blr)
end

return function(o)
  o = o or {}
  if o.reward_values ~= nil then
    -- its regression is on the rewards the buffer holds
    error("NeuralLinear: reward_values does not apply (its last layer is a regression on the rewards)", 2)
  end
  local self
  self, o = agents.neural(NL, "NeuralLinear", o)
  self.refit = agents.positive_int(o.refit or 100, "NeuralLinear", "refit")
  self.net = bbb.nn.mlp(self.sizes, { generator = self.generator })
  local hidden = self.sizes[#self.sizes - 1]
  local ok, blr = pcall(LinearTS, { context_dim = hidden, lambda = o.lambda, a0 = o.a0, b0 = o.b0,
    generator = self.generator })
  if not ok then error((tostring(blr):gsub("^[^:]*:%d+: ", ""):gsub("^LinearTS", "NeuralLinear")), 2) end
  self.blr = blr
  self:finish_init()
  return self
end

--- A prior written in Lua: any table with log_prob(w) built from tensor ops.
-- The tape differentiates it; the fused C pass still samples the weights.
-- bbblua examples/custom_prior.lua
local bbb = require "bbb"

-- Student-t with nu degrees of freedom and scale s (up to a constant).
local function student_t(nu, s)
  return {
    log_prob = function(_, w)
      return ((w / s):square():div(nu):log1p() * (-(nu + 1) / 2)):sum()
    end,
  }
end

-- A horseshoe-like prior: log(1 + 2 / (w/tau)^2), the usual closed-form bound.
local function horseshoe(tau)
  return {
    log_prob = function(_, w)
      return ((w / tau):square():add(1e-12):pow(-1):mul(2):log1p()):sum()
    end,
  }
end

bbb.manual_seed(0)
local gen = bbb.Generator(0)
local x = bbb.randn({ 256, 5 }, 0, 1, gen)
local true_w = bbb.tensor{ { 2, 0, 0, -1, 0 } }
local y = bbb.matmul(x, true_w, false, true) + bbb.randn({ 256, 1 }, 0, 0.1, gen)

for name, prior in pairs{ student_t = student_t(3, 1), horseshoe = horseshoe(0.5) } do
  local layer = bbb.nn.BayesLinear(5, 1, { prior = prior, bias = false, generator = gen })
  local elbo = bbb.elbo.ELBO{ n_data = 256, n_batches = 1, likelihood = "gaussian", sigma = 0.1 }
  local opt = bbb.optim.Adam(layer, { lr = 0.05 })
  for step = 1, 500 do
    opt:zero_grad()
    local loss = elbo:loss(layer, x, y, { step = step })
    loss:backward()
    opt:step()
  end
  local mu = layer.weight_mu:totable()[1]
  local sd = layer.weight_rho:softplus():totable()[1]
  local parts = {}
  for i = 1, 5 do parts[i] = ("%.3f +- %.3f"):format(mu[i], sd[i]) end
  print(("%-9s w = %s"):format(name, table.concat(parts, ", ")))
end

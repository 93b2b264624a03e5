--- A training loop written by hand: the free energy of Blundell et al.
-- (2015) on a small regression, step by step, without bbb.train.fit.
-- bbblua examples/training_loop.lua
local bbb = require "bbb"

bbb.manual_seed(1)
local gen = bbb.Generator(1)

-- 64 points of y = 2x^3 - x + noise 0.1 on [-1, 1]
local function f(v) return 2 * v ^ 3 - v end
local x = bbb.rand({ 64, 1 }, -1, 1, gen)
local y = x:pow(3) * 2 - x + bbb.randn({ 64, 1 }, 0, 0.1, gen)

local net = bbb.nn.bayes_mlp({ 1, 32, 1 }, { prior = bbb.prior.Gaussian{ sigma = 1 },
  activation = bbb.nn.Tanh, rho_init = -4, generator = gen })
-- all 64 points are one minibatch: the whole complexity term each step
local elbo = bbb.elbo.ELBO{ n_data = 64, n_batches = 1, likelihood = "gaussian", sigma = 0.1 }
local opt = bbb.optim.Adam(net, { lr = 0.01 })

for step = 1, 1500 do
  opt:zero_grad()
  -- sample the weights, forward, and -ELBO = complexity - log-likelihood
  local loss, terms = elbo:loss(net, x, y, { step = step })
  loss:backward()
  opt:step()
  if step % 500 == 0 then
    print(("step %4d  -elbo/point %8.4f  nll/point %7.4f  complexity %8.1f")
      :format(step, terms.elbo_per_example, terms.nll, terms.complexity))
  end
end

-- The predictive mean and spread over 200 weight samples, inside and outside the data.
local at = { -0.5, 0, 0.5, 3 }
local xs = bbb.tensor{ { at[1] }, { at[2] }, { at[3] }, { at[4] } }
local mean, spread = net:predict(xs, { samples = 200, likelihood = "gaussian" })
mean, spread = mean:totable(), spread:totable()
for i, v in ipairs(at) do
  print(("x = %4.1f  prediction %6.3f +- %.3f  (truth %6.3f)%s"):format(v, mean[i][1], spread[i][1], f(v),
    v > 1 and ": outside the data, the spread grows" or ""))
end

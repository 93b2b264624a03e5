--- The ELBO of one weight, term by term: the worked example of the PyTorch
-- tutorial on Bayes by Backprop (mu 0.5, rho 2, prior N(0, 1), x 2, y 3,
-- Gaussian noise 0.5, eps fixed to 1.9070).
-- bbblua examples/single_weight.lua
local bbb = require "bbb"

local mu = bbb.tensor{ { 0.5 } }:requires_grad(true)
local rho = bbb.tensor{ { 2 } }:requires_grad(true)
local eps = bbb.tensor{ { 1.9070 } }

-- w = mu + softplus(rho) * eps, and log q(w | mu, rho) at that sample
local w, log_q = bbb.core.bayes_sample(mu, rho, nil, nil, eps)
local log_p = bbb.prior.Gaussian{ sigma = 1 }:log_prob(w)
local log_lik = bbb.gaussian_loglik(w * 2, bbb.tensor{ { 3 } }, 0.5)
local loss = log_q - log_p - log_lik
loss:backward()

print(("w        %.6f"):format(w:item()))
print(("log q    %.6f"):format(log_q:item()))
print(("log p    %.6f"):format(log_p:item()))
print(("log lik  %.6f"):format(log_lik:item()))
print(("loss     %.6f"):format(loss:item()))
print(("dL/dmu   %.5f"):format(mu.grad:item()))
print(("dL/drho  %.5f"):format(rho.grad:item()))

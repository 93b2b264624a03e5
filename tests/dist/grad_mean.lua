-- Run by tests/dist_spec.lua under mpirun -np 2: with the local
-- reparameterization each rank draws its own noise; the gradient averaged
-- over many steps must agree with one process's (z-scores of the means).
local d = bbb.dist
local r, n = d.rank(), d.size()
local K = tonumber(arg[1]) or 300
local g0 = bbb.Generator(3)
local x = bbb.randn({ 32, 6 }, 0, 1, g0)
local y = (x:narrow(2, 1, 1):reshape(32):gt(0) + 1)
local net = bbb.nn.bayes_mlp({ 6, 5, 2 }, { estimator = "local", generator = g0, rho_init = -1 })
local elbo = bbb.elbo.ELBO{ n_data = 32, n_batches = 1 }
local p = net.layers[1].bias_mu
local function grads(xs, ys, opts, gen)
  net:apply(function(l) if l.generator then l.generator = gen end end)
  local sum, sq = bbb.zeros{ 5 }, bbb.zeros{ 5 }
  for _ = 1, K do
    net:zero_grad()
    elbo:loss(net, xs, ys, opts):backward()
    local gr = p.grad
    if opts.examples then
      d.allreduce(gr)
    end
    sum = sum + gr
    sq = sq + gr:square()
  end
  local mean = sum / K
  return mean, (sq / K - mean:square()):clamp(0)
end
local half = 16
local md, vd = grads(x:narrow(1, r * half + 1, half), y:narrow(1, r * half + 1, half),
  { batch = 1, examples = 32, kl_share = 1 / n }, bbb.Generator(100 + r))
if r == 0 then
  local ms, vs = grads(x, y, { batch = 1 }, bbb.Generator(7))
  local z = ((md - ms):abs() / ((vd + vs) / K + 1e-20):sqrt()):max():item()
  print(require("bbb.json").encode{ max_z = z, draws = K })   -- read by the spec
end
d.finalize()

--- bbb.nn.fused: a training step without the graph for the networks that
-- fit it. plan(net, elbo) returns a plan when net is a stack of dense layers
-- with ReLU between them (bbb.nn.mlp, with or without dropout, or
-- bbb.nn.bayes_mlp with the weight estimator and a C prior; whatever draws
-- noise drawing from one generator) and elbo a Gaussian likelihood with a
-- fixed noise and one sample; else nil and the reason. Then
--
--   local terms = elbo:fused_step(plan, x, y)
--
-- does what `opt:zero_grad(); elbo:loss(net, x, y):backward()` does, with
-- the same bits (tests/unit/fused_spec.lua), in one C call: the small networks of
-- the bandit spend more time building and walking the graph than in its
-- arithmetic.
local core = require "bbb.core"
local layers = require "bbb.nn.layers"
local BayesLinear = require "bbb.nn.bayes_linear"
local prior_mod = require "bbb.prior"

local fused = {}

local Plan = {}
Plan.__index = Plan

-- The layer's entry for core.mlp_new, or nil and why not.
local function entry(l, i)
  local mt = getmetatable(l)
  if mt == layers.Linear then
    return { w = l.weight, b = l.bias }
  end
  if mt ~= BayesLinear then return nil, ("layer %d is a %s"):format(i, l.__name or "module") end
  if l.estimator ~= "weight" then return nil, ("layer %d uses the %s estimator"):format(i, l.estimator) end
  if l.kl_mode ~= "mc" then return nil, ("layer %d has an analytic KL"):format(i) end
  if l.mode == "mean" and not l.training then return nil, ("layer %d predicts with its means"):format(i) end
  if not prior_mod.is_fused(l.prior) then return nil, ("layer %d has a prior written in Lua"):format(i) end
  if l.weight_mask or l.noise then return nil, ("layer %d is pruned or has fixed noise"):format(i) end
  return { wmu = l.weight_mu, wrho = l.weight_rho, bmu = l.bias_mu, brho = l.bias_rho, prior = l.prior }
end

-- A Dropout layer's rate where it drops (training, or sampling), else 0.
local function drop_rate(l)
  if (not l.training and l.mode ~= "sample") or l.p == 0 then return 0 end
  return l.p
end

--- plan(net, elbo) -> plan | nil, reason
-- @param net a Sequential of dense layers with ReLU between them, whose
--   Bayesian and dropout layers all draw from one generator: build it with
--   {generator = g} (bbb.nn.bayes_mlp(sizes, {generator = g}) or
--   bbb.nn.mlp(sizes, {dropout = p, generator = g})); without one the
--   reason is "the Bayesian layers do not share one generator"
-- @param elbo a bbb.elbo.ELBO with likelihood = "gaussian", a fixed sigma
--   and one sample
-- @return a plan for elbo:fused_step(plan, x, y), or nil and why not
-- @usage
--   local g = bbb.Generator(1)
--   local net = bbb.nn.bayes_mlp({ 8, 16, 1 }, { generator = g })
--   local elbo = bbb.elbo.ELBO{ n_data = 64, batch_size = 64, likelihood = "gaussian", sigma = 0.5 }
--   local opt = bbb.optim.Adam(net, { lr = 1e-3 })
--   local plan = assert(bbb.nn.fused.plan(net, elbo))
--   opt:zero_grad()
--   local terms = elbo:fused_step(plan, bbb.randn(64, 8), bbb.randn(64, 1))
--   opt:step()
--   print(plan:current(), terms.nll > 0)
function fused.plan(net, elbo)
  if getmetatable(net) ~= layers.Sequential then return nil, "the network is not a Sequential" end
  if elbo.likelihood ~= "gaussian" or elbo.noise_rho then return nil, "the likelihood is not a fixed Gaussian" end
  if elbo.samples ~= 1 or elbo.reduction ~= "mean" then return nil, "the ELBO averages samples or sums" end
  if elbo.kl and elbo.kl ~= "mc" then return nil, "the ELBO asks for an analytic KL" end
  local list, held, gen = {}, {}, nil
  local function use(g)   -- every layer that draws, from one generator
    if not g or (gen and g ~= gen) then return false end
    gen = g
    return true
  end
  local ls, i = net.layers, 1
  while i <= #ls do
    local e, why = entry(ls[i], i)
    if not e then return nil, why end
    if e.wmu and not use(ls[i].generator) then return nil, "the Bayesian layers do not share one generator" end
    list[#list + 1] = e
    held[#held + 1] = { ls[i], e }
    if i < #ls then
      if getmetatable(ls[i + 1]) ~= layers.ReLU or i + 1 == #ls then
        return nil, ("layer %d is not a ReLU between two dense layers"):format(i + 1)
      end
      i = i + 2
      if getmetatable(ls[i]) == layers.Dropout then
        local d = ls[i]
        e.dropout = drop_rate(d)
        if e.dropout > 0 and not use(d.generator) then return nil, "the dropout layers do not share one generator" end
        held[#held + 1] = { d, e }
        i = i + 1
      end
    else
      i = i + 1
    end
  end
  local ok, m = pcall(core.mlp_new, list, gen)
  if not ok then return nil, tostring(m) end
  return setmetatable({ m = m, held = held, net = net }, Plan)
end

local KEYS = { "w", "b", "wmu", "wrho", "bmu", "brho", "prior" }

--- current() -> boolean: whether the plan still stands for the network: the same tensors, priors
-- and modes (a parameter replaced by another tensor, a prior swapped, or a
-- layer switched between training and evaluation needs a new plan).
function Plan:current()
  for _, h in ipairs(self.held) do
    local l, e = h[1], h[2]
    if getmetatable(l) == layers.Dropout then
      if drop_rate(l) ~= (e.dropout or 0) then return false end
    else
      local now = entry(l, 0)
      if not now then return false end
      for _, k in ipairs(KEYS) do
        if not rawequal(now[k], e[k]) then return false end
      end
    end
  end
  return true
end

--- nll, kl, loss = plan:grad(x, y, sigma, kl_weight): see bbb.core.mlp_grad.
function Plan:grad(x, y, sigma, kl_weight)
  return core.mlp_grad(self.m, x, y, sigma, kl_weight)
end

return fused

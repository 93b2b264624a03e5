-- The graph-free training step (bbb.nn.fused, src/bayes/mlp.c) against the
-- graph it stands for: the same loss, terms and gradients, bit for bit,
-- over several Adam steps; the networks it refuses, and bad input.
local bbb = require "bbb"
local fused = require "bbb.nn.fused"
local errors_with = require("helpers").errors_with

local SIZES, B = { 19, 12, 9, 1 }, 16

local function prior_of(kind)
  if kind == "mixture" then return bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) } end
  if kind == "laplace" then return bbb.prior.Laplace{ b = 0.1 } end
  return bbb.prior.Gaussian{ sigma = 0.1 }
end

-- A network, its optimizer and ELBO; two calls give two identical copies.
local function make(kind, o)
  o = o or {}
  local gen = bbb.Generator(7)
  local net
  if kind == "plain" then net = bbb.nn.mlp(o.sizes or SIZES, { generator = gen })
  elseif kind == "dropout" then net = bbb.nn.mlp(o.sizes or SIZES, { generator = gen, dropout = 0.3 })
  else net = bbb.nn.bayes_mlp(o.sizes or SIZES, { prior = prior_of(kind), generator = gen, rho_init = -3 }) end
  if o.rho_spread then   -- rho of both signs: sigma from 0.02 to 3, and chunks on either path of the sample
    local g = bbb.Generator(11)
    for _, p in ipairs(net:named_parameters()) do
      if p[1]:find("rho") then p[2]:copy(bbb.rand(p[2].shape, -4, 3, g)) end
    end
  end
  local elbo = bbb.elbo.ELBO{ n_data = 200, batch_size = B, likelihood = "gaussian", sigma = o.sigma or 0.7,
    kl_weight = B / 200 }
  return net, bbb.optim.Adam(net, { lr = 1e-2 }), elbo
end

-- Rows of mostly zeros with a few ones, like one-hot codes, and targets.
local function data(n, width, seed)
  local g = bbb.Generator(seed or 3)
  return bbb.rand({ n, width }, 0, 1, g):gt(0.8), bbb.randn({ n, 1 }, 0, 5, g)
end

-- Runs `steps` steps on both copies, the graph's and the plan's; returns
-- the largest difference of any gradient, term or parameter seen.
local function compare(kind, steps, o)
  local n1, o1, e1 = make(kind, o)
  local n2, o2, e2 = make(kind, o)
  local plan = assert(fused.plan(n2, e2))
  local X, Y = data(steps * B, (o and o.sizes or SIZES)[1])
  local worst = 0
  for u = 1, steps do
    local x, y = X:narrow(1, (u - 1) * B + 1, B), Y:narrow(1, (u - 1) * B + 1, B)
    o1:zero_grad()
    local loss, t1 = e1:loss(n1, x, y)
    loss:backward()
    local t2 = e2:fused_step(plan, x, y)
    for _, k in ipairs { "loss", "nll", "complexity", "nll_sum", "weighted_complexity" } do
      worst = math.max(worst, math.abs(t1[k] - t2[k]))
    end
    for i, p in ipairs(o1.params) do
      worst = math.max(worst, (p.t.grad - o2.params[i].t.grad):abs():max():item())
    end
    o1:step()
    o2:step()
  end
  for i, p in ipairs(o1.params) do worst = math.max(worst, (p.t - o2.params[i].t):abs():max():item()) end
  assert.are.equal(e1.steps, e2.steps)
  return worst
end

describe("the fused step", function()
  for _, kind in ipairs { "plain", "dropout", "gaussian", "mixture", "laplace" } do
    it("gives the graph's loss, terms, gradients and parameters, bit for bit: " .. kind, function()
      assert.are.equal(0, compare(kind, 6))
    end)
  end

  it("does so with rho of both signs, where the sample takes its other path", function()
    for _, kind in ipairs { "gaussian", "mixture" } do
      assert.are.equal(0, compare(kind, 4, { rho_spread = true }))
    end
  end)

  it("does so on two threads", function()
    local was = bbb.get_num_threads()
    bbb.set_num_threads(2)
    local ok, err = pcall(function()
      assert.are.equal(0, compare("gaussian", 4, { sizes = { 19, 40, 1 } }))
    end)
    bbb.set_num_threads(was)
    assert(ok, err)
  end)

  it("tells a change it would not give: another noise level makes other gradients", function()
    local n1, o1, e1 = make("gaussian")
    local n2, _, e2 = make("gaussian", { sigma = 0.71 })
    local x, y = data(B, SIZES[1])
    o1:zero_grad()
    e1:loss(n1, x, y):backward()
    e2:fused_step(assert(fused.plan(n2, e2)), x, y)
    assert.is_true((n1.layers[5].weight_mu.grad - n2.layers[5].weight_mu.grad):abs():max():item() > 0)
  end)

  it("refuses the networks and likelihoods it does not cover, saying why", function()
    local net, _, elbo = make("gaussian")
    local cat = bbb.elbo.ELBO{ n_data = 10, batch_size = 2, likelihood = "categorical" }
    local function refused(n, e, why)
      local p, reason = fused.plan(n, e)
      assert.is_nil(p)
      assert.truthy(reason:find(why, 1, true), reason)
    end
    refused(net, cat, "not a fixed Gaussian")
    refused(net, bbb.elbo.ELBO{ n_data = 10, batch_size = 2, likelihood = "gaussian", learn_sigma = true },
      "not a fixed Gaussian")
    refused(net, bbb.elbo.ELBO{ n_data = 10, batch_size = 2, likelihood = "gaussian", samples = 2 }, "samples")
    refused(bbb.nn.bayes_mlp(SIZES, { estimator = "local", prior = prior_of(), generator = bbb.Generator(1) }),
      elbo, "local estimator")
    local lua_prior = { log_prob = function(_, w) return (w * w):sum() * -1 end }
    refused(bbb.nn.bayes_mlp(SIZES, { prior = lua_prior, generator = bbb.Generator(1) }), elbo, "written in Lua")
    refused(bbb.nn.mlp(SIZES, { activation = bbb.nn.Tanh }), elbo, "not a ReLU")
    refused(bbb.nn.Sequential{ bbb.nn.Linear(3, 2), bbb.nn.ReLU() }, elbo, "not a ReLU between")
    refused(bbb.nn.Linear(3, 2), elbo, "not a Sequential")
    refused(bbb.nn.bayes_mlp(SIZES, { prior = prior_of() }), elbo, "one generator")
  end)

  it("knows when the network's tensors or modes changed under it", function()
    local net, _, elbo = make("dropout")
    local plan = assert(fused.plan(net, elbo))
    assert.is_true(plan:current())
    net.layers[3]:evaluate()
    assert.is_false(plan:current())
    net.layers[3]:train()
    assert.is_true(plan:current())
    net.layers[1].weight = net.layers[1].weight:detach():clone():requires_grad(true)
    assert.is_false(plan:current())
    local bnet, _, belbo = make("gaussian")
    local bplan = assert(fused.plan(bnet, belbo))
    bnet.layers[3].prior = bbb.prior.Gaussian{ sigma = 0.5 }
    assert.is_false(bplan:current())
  end)

  it("names bad input before it computes anything", function()
    local net, _, elbo = make("gaussian")
    local plan = assert(fused.plan(net, elbo))
    local x, y = data(B, SIZES[1])
    errors_with(function() plan:grad(bbb.zeros{ B, 5 }, y, 1, 0.1) end, "does not match the first layer's 19 inputs")
    errors_with(function() plan:grad(x, bbb.zeros{ B + 1 }, 1, 0.1) end, "17 targets for 16 outputs")
    errors_with(function() plan:grad(x, y, 0, 0.1) end, "sigma")
    errors_with(function() plan:grad(x, y, 1, 0 / 0) end, "kl_weight")
    errors_with(function() bbb.core.mlp_new({ { w = bbb.zeros{ 3, 2 }:requires_grad(true) },
      { w = bbb.zeros{ 1, 4 }:requires_grad(true) } }) end, "layer 2 takes 4 inputs, the layer before gives 3")
    errors_with(function() bbb.core.mlp_new({ { w = bbb.zeros{ 3, 2 } } }) end, "does not require grad")
    errors_with(function() bbb.core.mlp_new({ { w = bbb.zeros{ 3, 2 }:requires_grad(true), dropout = 0.5 } }) end,
      "must be in [0, 1) and follow a hidden layer")
    errors_with(function() bbb.core.mlp_new({}) end, "expected 1 to 16 layers")
  end)
end)

describe("the bandit agents' updates", function()
  it("are the same with and without the fused step", function()
    local bandit = require "bbb.bandit"
    for _, make_agent in ipairs {
      function(f) return bandit.BBB{ seed = 2, updates = 4, fused = f } end,
      function(f) return bandit.EpsilonGreedy{ epsilon = 0.05, seed = 2, updates = 4, fused = f } end,
      function(f) return bandit.MCDropout{ seed = 2, updates = 4, fused = f } end,
    } do
      local a, b = make_agent(nil), make_agent(false)
      local ea = bandit.run(bandit.Mushroom{ seed = 1 }, a, 30)
      local eb = bandit.run(bandit.Mushroom{ seed = 1 }, b, 30)
      assert.is_truthy(a.fused_plan)
      assert.is_nil(b.fused_plan)
      assert.are.equal(eb.regret_expected, ea.regret_expected)
      assert.are.equal(eb.regret_realised, ea.regret_realised)
      local sa, sb = a.net:state_dict(), b.net:state_dict()
      for k, v in pairs(sa) do assert.are.equal(0, (v - sb[k]):abs():max():item(), k) end
    end
    errors_with(function() bandit.BBB{ fused = "no" } end, "BBB: fused must be true or false, got no")
  end)
end)

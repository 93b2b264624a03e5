-- Bayes by Backprop: known values from the single-weight example, gradient
-- checks of priors and of BayesLinear (all estimators, fixed noise), an MC
-- gradient against a closed form, the ELBO's weights, and bad input.
local bbb = require "bbb"
local gradcheck = bbb.testing.gradcheck

local function rel_close(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-4) * math.abs(b)
end

local function check(fn, inputs, opts)
  local ok, report = gradcheck(fn, inputs, opts)
  assert(ok, report)
end

describe("the single-weight example (mu 0.5, rho 2, N(0,1), x 2, y 3, sigma 0.5, eps 1.9070)", function()
  local expect = { w = 4.556052, logq = -3.491941, logp = -11.297742, loglik = -74.941406,
                   loss = 82.747208, dmu = 53.45288, drho = 89.36962 }

  local function setup()
    local mu = bbb.tensor{ { 0.5 } }:requires_grad(true)
    local rho = bbb.tensor{ { 2 } }:requires_grad(true)
    return mu, rho, bbb.tensor{ { 1.9070 } }, bbb.prior.Gaussian{ sigma = 1 }
  end

  it("gives each ELBO piece, term by term", function()
    local mu, rho, eps, p = setup()
    local w, logq = bbb.core.bayes_sample(mu, rho, nil, nil, eps)
    local logp = p:log_prob(w)
    local ll = bbb.gaussian_loglik(w * 2, bbb.tensor{ { 3 } }, 0.5)
    local loss = logq - logp - ll
    assert(rel_close(w:item(), expect.w), w:item())
    assert(rel_close(logq:item(), expect.logq), logq:item())
    assert(rel_close(logp:item(), expect.logp), logp:item())
    assert(rel_close(ll:item(), expect.loglik), ll:item())
    assert(rel_close(loss:item(), expect.loss), loss:item())
    loss:backward()
    assert(rel_close(mu.grad:item(), expect.dmu), mu.grad:item())
    assert(rel_close(rho.grad:item(), expect.drho), rho.grad:item())
  end)

  it("gives the same through the fused complexity term", function()
    local mu, rho, eps, p = setup()
    local w, kl = bbb.core.bayes_sample(mu, rho, p, nil, eps)
    assert(rel_close(kl:item(), expect.logq - expect.logp))
    local loss = kl - bbb.gaussian_loglik(w * 2, bbb.tensor{ { 3 } }, 0.5)
    loss:backward()
    assert(rel_close(loss:item(), expect.loss), loss:item())
    assert(rel_close(mu.grad:item(), expect.dmu), mu.grad:item())
    assert(rel_close(rho.grad:item(), expect.drho), rho.grad:item())
  end)

  it("gives the same through BayesLinear and the ELBO", function()
    local layer = bbb.nn.BayesLinear(1, 1, { prior = bbb.prior.Gaussian{ sigma = 1 }, bias = false })
    layer.weight_mu:fill(0.5)
    layer.weight_rho:fill(2)
    layer.noise = { w = bbb.tensor{ { 1.9070 } } }
    local e = bbb.elbo.ELBO{ n_data = 1, n_batches = 1, likelihood = "gaussian", sigma = 0.5 }
    local loss, terms = e:loss(layer, bbb.tensor{ { 2 } }, bbb.tensor{ { 3 } })
    assert(rel_close(loss:item(), expect.loss), loss:item())
    assert(rel_close(terms.complexity, expect.logq - expect.logp))
    assert(rel_close(terms.nll, -expect.loglik))
    loss:backward()
    assert(rel_close(layer.weight_mu.grad:item(), expect.dmu))
    assert(rel_close(layer.weight_rho.grad:item(), expect.drho))
  end)
end)

describe("priors", function()
  local gen = bbb.Generator(11)
  it("log_prob matches the closed forms", function()
    local w = bbb.tensor{ -1.5, 0, 0.3 }
    local function normal_logpdf(x, s) return -0.5 * math.log(2 * math.pi) - math.log(s) - x * x / (2 * s * s) end
    local g = 0
    for _, x in ipairs{ -1.5, 0, 0.3 } do g = g + normal_logpdf(x, 2) end
    assert(rel_close(bbb.prior.Gaussian{ sigma = 2 }:log_prob(w):item(), g, 1e-5))
    local m = 0
    for _, x in ipairs{ -1.5, 0, 0.3 } do
      m = m + math.log(0.25 * math.exp(normal_logpdf(x, 1)) + 0.75 * math.exp(normal_logpdf(x, 0.1)))
    end
    assert(rel_close(bbb.prior.ScaleMixture{ pi = 0.25, sigma1 = 1, sigma2 = 0.1 }:log_prob(w):item(), m, 1e-5))
    assert(rel_close(bbb.prior.Laplace{ b = 0.5 }:log_prob(w):item(), 3 * math.log(1 / (2 * 0.5)) - (1.5 + 0.3) / 0.5, 1e-5))
  end)
  it("the scale mixture stays finite for sigma2 = e^-8 and weights far from 0", function()
    local p = bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-8) }
    local lp = p:log_prob(bbb.tensor{ 50, -20, 3, 0 }):item()
    local expect = 0
    for _, x in ipairs{ 50, -20, 3 } do expect = expect + math.log(0.5) - 0.5 * math.log(2 * math.pi) - x * x / 2 end
    expect = expect + math.log(0.5 / math.sqrt(2 * math.pi) * (1 + math.exp(8)))
    assert(lp == lp and lp > -math.huge, tostring(lp))
    assert(rel_close(lp, expect, 1e-5), lp .. " vs " .. expect)
  end)
  for name, p in pairs{
    gaussian = bbb.prior.Gaussian{ sigma = 0.7 },
    mixture = bbb.prior.ScaleMixture{ pi = 0.3, sigma1 = 1, sigma2 = math.exp(-1) },
    laplace = bbb.prior.Laplace{ b = 0.5 },
  } do
    it("gradcheck of " .. name .. " log_prob", function()
      check(function(w) return p:log_prob(w) end, { bbb.rand({ 7 }, -2, 2, gen):requires_grad(true) })
    end)
  end
  it("a Lua prior (Student-t) trains through the tape", function()
    local nu = 3
    local student = { log_prob = function(_, w) return ((w:square() / nu):log1p() * (-(nu + 1) / 2)):sum() end }
    check(function(w) return student:log_prob(w) end, { bbb.rand({ 5 }, -2, 2, gen):requires_grad(true) })
    local layer = bbb.nn.BayesLinear(3, 2, { prior = student, generator = gen, rho_init = -1 })
    local eps_w, eps_b = bbb.randn({ 2, 3 }, 0, 1, gen), bbb.randn({ 2 }, 0, 1, gen)
    layer.noise = { w = eps_w, b = eps_b }
    local x = bbb.randn({ 4, 3 }, 0, 1, gen)
    local loss = layer:forward(x):sum() + layer:kl()
    loss:backward()
    -- The same loss written out on copies of the parameters, with the
    -- Student-t term explicit: the layer's gradients must match it, and they
    -- would not if the prior were ignored (its gradient is checked non-zero).
    local function leaf(t) return t:detach():clone():requires_grad(true) end
    local mu, rho, bmu, brho = leaf(layer.weight_mu), leaf(layer.weight_rho), leaf(layer.bias_mu), leaf(layer.bias_rho)
    local function sample(m, r, e)
      local s = r:softplus()
      local w = m + s * e
      local logq = (s:log():neg() - e:square() * 0.5):sum() - e:numel() * 0.5 * math.log(2 * math.pi)
      return w, logq - student:log_prob(w)
    end
    local w, klw = sample(mu, rho, eps_w)
    local b, klb = sample(bmu, brho, eps_b)
    local ref = bbb.linear(x, w, b):sum() + klw + klb
    assert.is_true(math.abs(ref:item() - loss:item()) < 1e-4 * math.max(1, math.abs(ref:item())))
    ref:backward()
    for _, pair in ipairs{ { layer.weight_mu, mu }, { layer.weight_rho, rho }, { layer.bias_rho, brho } } do
      local got, want = pair[1].grad:totable(), pair[2].grad
      local err = (pair[1].grad - want):abs():max():item()
      assert.is_true(err < 1e-4 * math.max(1, want:abs():max():item()),
        ("gradient off by %g: %s vs %s"):format(err, tostring(pair[1].grad), tostring(want)))
      assert.is_table(got)
    end
    -- the prior's own share of the gradient is not negligible
    local wp = leaf(layer.weight_mu)
    student:log_prob(wp):backward()
    assert.is_true(wp.grad:abs():max():item() > 1e-3)
  end)
  it("a Lua prior written log_prob = function(w), without self, is refused at build", function()
    local bad = { log_prob = function(w) return w:sum() end }
    assert.has_error(function() bbb.nn.BayesLinear(3, 2, { prior = bad }) end,
      "BayesLinear: the prior's log_prob takes one parameter, but it is called as p:log_prob(w) "
      .. "with the prior first: write log_prob = function(self, w) (or function(_, w))")
  end)
  it("a Lua prior prints its name, or where its log_prob was written", function()
    local named = { name = "StudentT(3)", log_prob = function(_, w) return w:sum() end }
    assert.are.equal("BayesLinear(3 -> 2, prior=StudentT(3), estimator=weight)",
      tostring(bbb.nn.BayesLinear(3, 2, { prior = named })))
    local anon = { log_prob = function(_, w) return w:sum() end }
    local line = debug.getinfo(anon.log_prob, "S").linedefined
    assert.are.equal(("LuaPrior(%s:%d)"):format(debug.getinfo(1, "S").short_src, line),
      bbb.prior.describe(anon))
  end)
  it("rejects bad parameters with messages naming them", function()
    assert.has_error(function() bbb.prior.Gaussian{ sigma = 0 } end,
      "Gaussian prior: sigma must be positive and finite, got 0")
    assert.has_error(function() bbb.prior.ScaleMixture{ pi = 1.5 } end,
      "ScaleMixture prior: pi must be in (0, 1), got 1.5")
    assert.has_error(function() bbb.prior.ScaleMixture{ sigma2 = -1 } end,
      "ScaleMixture prior: sigma2 must be positive and finite, got -1")
    assert.has_error(function() bbb.prior.Laplace{ b = -2 } end,
      "Laplace prior: b must be positive and finite, got -2")
  end)
end)

describe("BayesLinear", function()
  local gen = bbb.Generator(5)
  local function fixed_noise(layer, B)
    return { w = bbb.randn({ layer.n_out, layer.n_in }, 0, 1, gen), b = bbb.randn({ layer.n_out }, 0, 1, gen),
             out = bbb.randn({ B, layer.n_out }, 0, 1, gen),
             s_in = bbb.tensor{ { 1, -1, 1 }, { -1, -1, 1 } }, s_out = bbb.tensor{ { -1, 1 }, { 1, 1 } } }
  end
  for _, est in ipairs{ "weight", "local", "flipout" } do
    for _, kl in ipairs{ "mc", "analytic" } do
      it("gradcheck, estimator " .. est .. ", kl " .. kl, function()
        local p = kl == "analytic" and bbb.prior.Gaussian{ sigma = 0.5 }
          or bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-1) }
        local layer = bbb.nn.BayesLinear(3, 2, { prior = p, estimator = est, kl = kl, rho_init = -1, generator = gen })
        layer.noise = fixed_noise(layer, 2)
        local x = bbb.randn({ 2, 3 }, 0, 1, gen):requires_grad(true)
        local proj = bbb.rand({ 2, 2 }, 0.5, 1.5, gen)
        check(function() return (layer:forward(x) * proj):sum() + layer:kl() * 0.1 end,
          { x, layer.weight_mu, layer.weight_rho, layer.bias_mu, layer.bias_rho }, { atol = 2e-3, rtol = 2e-2 })
      end)
    end
  end
  it("mode = mean uses the posterior means in evaluation", function()
    local layer = bbb.nn.BayesLinear(3, 2, { mode = "mean", generator = gen }):evaluate()
    local x = bbb.randn({ 4, 3 }, 0, 1, gen)
    local y = layer:forward(x)
    local ref = bbb.linear(x, layer.weight_mu, layer.bias_mu)
    assert.are.equal(0, (y - ref):abs():max():item())
  end)
  it("rejects bad input", function()
    local layer = bbb.nn.BayesLinear(3, 2)
    assert.has_error(function() layer:forward(bbb.zeros(4, 5)) end,
      "BayesLinear: input of size 4x5 does not match the layer's 3 inputs (expected batch x 3)")
    assert.has_error(function() bbb.nn.BayesLinear(3, 2, { estimator = "magic" }) end,
      'BayesLinear: estimator must be one of "flipout", "local", "weight", got magic')
    assert.has_error(function() bbb.nn.BayesLinear(3, 2, { kl = "analytic" }) end,
      'BayesLinear: kl = "analytic" needs a Gaussian prior, got ScaleMixture{pi=0.5, sigma1=1, sigma2=0.00247875}')
    assert.has_error(function() bbb.nn.BayesLinear(3, 2, { prior = 5 }) end,
      "BayesLinear: a prior is a table with a log_prob(w) function, got number")
    local bad = bbb.nn.BayesLinear(3, 2, { prior = { log_prob = function(_, w) return w end } })
    assert.has_error(function() bad:forward(bbb.zeros(1, 3)) end,
      "BayesLinear: the Lua prior's log_prob must return a one-element tensor, got a tensor of size 2x3")
    local bad2 = bbb.nn.BayesLinear(3, 2, { prior = { log_prob = function() return 1 end } })
    assert.has_error(function() bad2:forward(bbb.zeros(1, 3)) end,
      "BayesLinear: the Lua prior's log_prob must return a one-element tensor, got number")
  end)
end)

describe("the Monte Carlo gradient", function()
  it("averages to the gradient of the expected loss", function()
    -- f(w) = (w - a)^2 + log q(w) - log p(w), p = N(0, sp^2): E f = (mu - a)^2 + sigma^2 + KL,
    -- so dE/dmu = 2 (mu - a) + mu / sp^2 and
    -- dE/drho = (2 sigma - 1 / sigma + sigma / sp^2) * sigmoid(rho).
    local N, a, sp, m0, r0 = 200000, 1.0, 0.8, 0.3, -0.5
    local mu = bbb.full({ N }, m0):requires_grad(true)
    local rho = bbb.full({ N }, r0):requires_grad(true)
    local w, kl = bbb.core.bayes_sample(mu, rho, bbb.prior.Gaussian{ sigma = sp }, bbb.Generator(99))
    local loss = (w - a):square():sum() + kl
    loss:backward()
    local sigma = math.log(1 + math.exp(r0))
    local sg = 1 / (1 + math.exp(-r0))
    local dmu = 2 * (m0 - a) + m0 / (sp * sp)
    local drho = (2 * sigma - 1 / sigma + sigma / (sp * sp)) * sg
    local gmu, grho = mu.grad:mean():item(), rho.grad:mean():item()
    -- standard errors: 2 sigma / sqrt(N) for mu; a few times that for rho
    assert(math.abs(gmu - dmu) < 5 * 2.5 * sigma / math.sqrt(N), ("mu: %g vs %g"):format(gmu, dmu))
    assert(math.abs(grho - drho) < 5 * 4 * sigma / math.sqrt(N), ("rho: %g vs %g"):format(grho, drho))
  end)
end)

describe("ELBO", function()
  it("weights the complexity term uniformly, by Blundell's schedule, or by a number", function()
    local u = bbb.elbo.ELBO{ n_data = 100, n_batches = 4 }
    assert.are.equal(0.25, u:weight(3))
    local b = bbb.elbo.ELBO{ n_data = 100, n_batches = 4, kl_weight = "blundell" }
    local sum = 0
    for i = 1, 4 do
      assert(rel_close(b:weight(i), 2 ^ (4 - i) / (2 ^ 4 - 1), 1e-12))
      sum = sum + b:weight(i)
    end
    assert(rel_close(sum, 1, 1e-12))
    local big = bbb.elbo.ELBO{ n_data = 1000000, batch_size = 10, kl_weight = "blundell" }
    assert(big:weight(1) > 0 and big:weight(2000) >= 0)
    assert.are.equal(0.1, bbb.elbo.ELBO{ n_data = 10, n_batches = 2, kl_weight = 0.1 }:weight(1))
  end)
  it("averages samples and reports terms per example", function()
    local net = bbb.nn.bayes_mlp({ 4, 5, 3 }, { generator = bbb.Generator(3) })
    local e = bbb.elbo.ELBO{ n_data = 80, batch_size = 8, samples = 3 }
    local x, y = bbb.randn({ 8, 4 }, 0, 1, bbb.Generator(4)), bbb.tensor{ 1, 2, 3, 1, 2, 3, 1, 2 }
    local loss, t = e:loss(net, x, y, { batch = 1 })
    assert(rel_close(t.loss, t.nll + t.complexity_per_example, 1e-5))
    assert(rel_close(t.complexity_per_example, t.complexity / 10 / 8, 1e-9))
    assert.are.equal(loss:item(), t.loss)
  end)
  it("learns the noise of a Gaussian likelihood", function()
    local e = bbb.elbo.ELBO{ n_data = 10, n_batches = 1, likelihood = "gaussian", sigma = 0.5, learn_sigma = true }
    assert(rel_close(e:sigma(), 0.5, 1e-5))
    assert.are.equal(1, #e:parameters())
  end)
  it("fits the noise of each row with the heteroscedastic likelihood", function()
    -- out (B, 2): the mean and the raw noise; sigma = floor + softplus(raw),
    -- or floor + (max - floor) * sigmoid(raw) with sigma_max; checked in
    -- double precision at raw values where softplus and sigmoid saturate
    local raws = { -40, -6, 0, 3, 30 }
    local mus, ys = { 1.5, -2, 0.25, 7, -35 }, { 5, -35, 0, 5, 5 }
    local rows = {}
    for i = 1, 5 do rows[i] = { mus[i], raws[i] } end
    local out, y = bbb.tensor(rows), bbb.tensor(ys)
    for _, o in ipairs{ { sigma = 0.05 }, { sigma = 0.05, sigma_max = 20 } } do
      local e = bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "heteroscedastic", sigma = o.sigma,
        sigma_max = o.sigma_max }
      local expect = 0
      for i = 1, 5 do
        local r = raws[i]
        local s = o.sigma_max and o.sigma + (o.sigma_max - o.sigma) / (1 + math.exp(-r))
          or o.sigma + (r > 30 and r or math.log(1 + math.exp(r)))
        expect = expect + 0.5 * ((ys[i] - mus[i]) / s) ^ 2 + math.log(s) + 0.5 * math.log(2 * math.pi)
      end
      assert(rel_close(e:nll_sum(out, y):item(), expect, 1e-5), e:nll_sum(out, y):item() .. " vs " .. expect)
      local y3 = bbb.tensor{ 0.5, -1, 0 }   -- small sums: the float32 differences stay accurate
      check(function(t) return e:nll_sum(t, y3) end,
        { bbb.tensor{ { 0.3, -1 }, { -0.2, 0.5 }, { 1, 2 } }:requires_grad(true) }, { eps = 1e-3 })
    end
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "heteroscedastic",
      learn_sigma = true } end,
      "ELBO: learn_sigma does not apply to the heteroscedastic likelihood (the network gives its noise)")
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "gaussian", sigma_max = 2 } end,
      "ELBO: sigma_max needs the heteroscedastic likelihood and a finite number > sigma, got 2")
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "heteroscedastic",
      sigma = 1, sigma_max = 0.5 } end,
      "ELBO: sigma_max needs the heteroscedastic likelihood and a finite number > sigma, got 0.5")
    local e = bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "heteroscedastic" }
    local ok, err = pcall(e.nll_sum, e, bbb.zeros(3, 1), bbb.zeros(3))
    assert(not ok and err:find("ELBO: the heteroscedastic likelihood needs outputs (B, 2) and B targets, got outputs 3x1 and 3 targets", 1, true), err)
  end)
  it("scores heavy-tailed noise with the student-t likelihood", function()
    -- -log t(y; mu, sigma, df), checked in double precision far in the tails
    -- (y 35 from the mean) and at one degree of freedom (the Cauchy)
    local mus, ys = { 1.5, -2, 0.25, 7 }, { 5, -35, 0, 5 }
    for _, c in ipairs { { df = 1, sigma = 0.5 }, { df = 4, sigma = 2 }, { df = 30, sigma = 0.05 } } do
      local e = bbb.elbo.ELBO{ n_data = 4, n_batches = 1, likelihood = "student-t", df = c.df, sigma = c.sigma }
      local lognorm = bbb.metrics.student_t_lognorm(c.df)
      local expect = 0
      for i = 1, 4 do
        local r = (ys[i] - mus[i]) / c.sigma
        expect = expect + (c.df + 1) / 2 * math.log(1 + r * r / c.df) + math.log(c.sigma) - lognorm
      end
      local got = e:nll_sum(bbb.tensor(mus), bbb.tensor(ys)):item()
      assert(rel_close(got, expect, 1e-5), got .. " vs " .. expect)
      assert.are.equal(c.sigma, e:sigma())
    end
    -- the gradient with respect to the outputs and to the learned scale
    local e = bbb.elbo.ELBO{ n_data = 3, n_batches = 1, likelihood = "student-t", df = 3, sigma = 0.7, learn_sigma = true }
    local y3 = bbb.tensor{ { 0.5 }, { -1 }, { 2.5 } }
    check(function(out, rho) e.noise_rho:copy(rho); return e:nll_sum(out, y3) end,
      { bbb.tensor{ { 0.3 }, { -0.2 }, { 1 } }:requires_grad(true), bbb.tensor{ 0.2 } }, { eps = 1e-3 })
    check(function(rho) return e:nll_sum(bbb.tensor{ { 0.3 }, { -0.2 }, { 1 } }, y3) end,
      { e.noise_rho }, { eps = 1e-3 })
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "student-t" } end,
      "ELBO: the student-t likelihood needs df, a positive integer, got nil")
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "student-t", df = 2.5 } end,
      "ELBO: the student-t likelihood needs df, a positive integer, got 2.5")
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 5, n_batches = 1, likelihood = "gaussian", df = 3 } end,
      "ELBO: df applies to the student-t likelihood only, not gaussian")
  end)
  it("gives each layer of bayes_mlp its own prior with priors", function()
    local gen = bbb.Generator(9)
    local wide, narrow = bbb.prior.Gaussian{ sigma = 0.3 }, bbb.prior.Gaussian{ sigma = 0.1 }
    local net = bbb.nn.bayes_mlp({ 3, 4, 4, 2 }, { prior = narrow, priors = { wide }, generator = gen })
    assert.are.equal(wide, net.layers[1].prior)
    assert.are.equal(narrow, net.layers[3].prior)
    assert.are.equal(narrow, net.layers[5].prior)
    -- the complexity term is each layer's under its own prior
    local x, y = bbb.randn({ 6, 3 }, 0, 1, gen), bbb.tensor{ 1, 2, 1, 2, 1, 2 }
    local _, t = bbb.elbo.ELBO{ n_data = 6, n_batches = 1, kl = "analytic" }:loss(net, x, y)
    local expect, first = 0, nil
    for i, l in ipairs{ net.layers[1], net.layers[3], net.layers[5] } do
      for _, pr in ipairs{ { l.weight_mu, l.weight_rho }, { l.bias_mu, l.bias_rho } } do
        local kl = bbb.prior.gaussian_kl(i == 1 and wide or narrow, pr[1], pr[2]:softplus()):item()
        expect = expect + kl
        if i == 1 then first = (first or 0) + kl end
      end
    end
    assert(rel_close(t.complexity, expect, 1e-5), t.complexity .. " vs " .. expect)
    local same = 0
    for _, pr in ipairs{ { net.layers[1].weight_mu, net.layers[1].weight_rho }, { net.layers[1].bias_mu, net.layers[1].bias_rho } } do
      same = same + bbb.prior.gaussian_kl(narrow, pr[1], pr[2]:softplus()):item()
    end
    assert(math.abs(first - same) > 1, "the input layer's KL must change with its prior")
    assert.has_error(function() bbb.nn.bayes_mlp({ 3, 2 }, { priors = { wide, wide } }) end,
      "nn.bayes_mlp: priors must list at most one prior per layer (1), got 2")
    assert.has_error(function() bbb.nn.bayes_mlp({ 3, 2 }, { priors = 0.3 }) end,
      "nn.bayes_mlp: priors must list at most one prior per layer (1), got 0.3")
  end)
  it("switches the layers to the analytic KL, for Gaussian priors only", function()
    local gen = bbb.Generator(8)
    local net = bbb.nn.bayes_mlp({ 3, 4, 2 }, { prior = bbb.prior.Gaussian{ sigma = 0.5 }, generator = gen })
    local x, y = bbb.randn({ 6, 3 }, 0, 1, gen), bbb.tensor{ 1, 2, 1, 2, 1, 2 }
    local _, t = bbb.elbo.ELBO{ n_data = 6, n_batches = 1, kl = "analytic" }:loss(net, x, y)
    -- the analytic KL of each layer, from its means and sigmas
    local expect = 0
    for _, l in ipairs{ net.layers[1], net.layers[3] } do
      for _, pr in ipairs{ { l.weight_mu, l.weight_rho }, { l.bias_mu, l.bias_rho } } do
        expect = expect + bbb.prior.gaussian_kl(l.prior, pr[1], pr[2]:softplus()):item()
      end
    end
    assert(rel_close(t.complexity, expect, 1e-5), t.complexity .. " vs " .. expect)
    local mix = bbb.nn.bayes_mlp({ 3, 4, 2 }, { generator = gen })
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 6, n_batches = 1, kl = "analytic" }:loss(mix, x, y) end,
      'ELBO: kl = "analytic" needs a Gaussian prior; layer 1 has ScaleMixture{pi=0.5, sigma1=1, sigma2=0.00247875}')
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 6, n_batches = 1, kl = "exact" } end,
      'ELBO: kl must be "mc" or "analytic", got exact')
  end)
  it("rejects bad settings and non-finite terms", function()
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 10, n_batches = 2, samples = 0 } end,
      "ELBO: samples must be a positive integer, got 0")
    assert.has_error(function() bbb.elbo.ELBO{ n_data = 10, n_batches = 2, kl_weight = "half" } end,
      'ELBO: kl_weight must be "uniform", "blundell" or a finite number >= 0, got half')
    assert.has_error(function() bbb.elbo.ELBO{ n_batches = 2 } end,
      "ELBO: n_data must be a positive integer, got nil")
    local net = bbb.nn.Sequential{ bbb.nn.BayesLinear(2, 2) }
    local e = bbb.elbo.ELBO{ n_data = 4, n_batches = 1 }
    assert.has_error(function() e:loss(net, bbb.tensor{ { 0 / 0, 1 } }, bbb.tensor{ 1 }, { step = 7 }) end,
      "ELBO: step 7: the likelihood term (nll) is not finite (nan)")
    assert.has_error(function() e:loss(net, bbb.zeros(1, 2), bbb.tensor{ 3 }) end,
      "bbb.nll: label 3 at row 1 is not a class in 1..2")
  end)
end)

describe("optimizers", function()
  it("Adam's first step moves each weight by lr against its gradient's sign", function()
    local w = bbb.tensor{ 1, -2 }:requires_grad(true)
    local opt = bbb.optim.Adam({ w }, { lr = 0.1 })
    local loss = (w * bbb.tensor{ 3, -0.5 }):sum()
    loss:backward()
    opt:step()
    assert(rel_close(w[1], 0.9, 1e-5) and rel_close(w[2], -1.9, 1e-5), w[1] .. " " .. w[2])
  end)
  it("SGD with momentum and Nesterov, RMSprop, weight decay", function()
    local w = bbb.tensor{ 1 }:requires_grad(true)
    local opt = bbb.optim.SGD({ w }, { lr = 0.1, momentum = 0.9 })
    for _ = 1, 2 do
      opt:zero_grad()
      local loss = (w * 2):sum()
      loss:backward()
      opt:step()
    end
    -- v1 = 2, w = 0.8; v2 = 0.9 * 2 + 2 = 3.8, w = 0.42
    assert(rel_close(w[1], 0.42, 1e-5), w[1])
    local n = bbb.tensor{ 1 }:requires_grad(true)
    local nes = bbb.optim.SGD({ n }, { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.5 })
    local ln = (n * 2):sum()
    ln:backward()
    nes:step()
    -- d = 2 + 0.5 = 2.5, v = 2.5, step = d + 0.9 v = 4.75
    assert(rel_close(n[1], 1 - 0.475, 1e-5), n[1])
    local r = bbb.tensor{ 1 }:requires_grad(true)
    local rms = bbb.optim.RMSprop({ r }, { lr = 0.01, alpha = 0.9 })
    local lr_ = (r * 2):sum()
    lr_:backward()
    rms:step()
    assert(rel_close(r[1], 1 - 0.01 * 2 / (math.sqrt(0.1 * 4) + 1e-8), 1e-5), r[1])
  end)
  it("clips by global norm", function()
    local a, b = bbb.tensor{ 0 }:requires_grad(true), bbb.tensor{ 0 }:requires_grad(true)
    local opt = bbb.optim.SGD({ a, b }, { lr = 1, clip_norm = 1 })
    local loss = (a * 3 + b * 4):sum()
    loss:backward()
    assert(rel_close(opt:step(), 5, 1e-6))
    assert(rel_close(a[1], -0.6, 1e-5) and rel_close(b[1], -0.8, 1e-5))
  end)
  it("stops on a non-finite gradient, naming step and parameter, leaving weights as they were", function()
    local net = bbb.nn.Sequential{ bbb.nn.Linear(2, 1) }
    local opt = bbb.optim.Adam(net, { lr = 0.1 })
    local before = net.layers[1].weight:clone()
    local loss = net:forward(bbb.tensor{ { 1, 1 } }):sum()
    loss:backward()
    opt:step()
    local after1 = net.layers[1].weight:clone()
    assert.is_true((after1 - before):abs():max():item() > 0)
    opt:zero_grad()
    local bad = net:forward(bbb.tensor{ { 1 / 0, 1 } }):sum() * 0
    bad:backward()
    assert.has_error(function() opt:step() end, "Adam: step 2: the gradient of 1.weight is not finite")
    assert.are.equal(0, (net.layers[1].weight - after1):abs():max():item())
  end)
  it("schedules the learning rate", function()
    local w = bbb.tensor{ 1 }:requires_grad(true)
    local opt = bbb.optim.SGD({ w }, { lr = 1 })
    local s = bbb.optim.schedule.exponential(opt, 0.5)
    s:step(); s:step()
    assert.are.equal(0.25, opt.lr)
    local opt2 = bbb.optim.SGD({ w }, { lr = 1 })
    local c = bbb.optim.schedule.cosine(opt2, 10)
    for _ = 1, 5 do c:step() end
    assert(rel_close(opt2.lr, 0.5, 1e-12))
    local opt3 = bbb.optim.SGD({ w }, { lr = 1 })
    local st = bbb.optim.schedule.step(opt3, 2, 0.1)
    st:step(); assert.are.equal(1, opt3.lr); st:step(); assert(rel_close(opt3.lr, 0.1, 1e-12))
  end)
  it("rejects bad settings", function()
    assert.has_error(function() bbb.optim.Adam({ bbb.zeros(2) }) end,
      "Adam: parameter param 1 does not require grad")
    assert.has_error(function() bbb.optim.SGD({ bbb.zeros(2):requires_grad(true) }, { lr = -1 }) end,
      "SGD: lr must be a finite number >= 0, got -1")
    assert.has_error(function() bbb.optim.SGD({}) end, "SGD: no parameters to optimize")
  end)
end)

describe("predict", function()
  local gen = bbb.Generator(21)
  local net = bbb.nn.bayes_mlp({ 3, 8, 4 }, { rho_init = -1, generator = gen })
  local x = bbb.randn({ 5, 3 }, 0, 1, gen)
  it("averages class probabilities over samples", function()
    local p, outs = net:predict(x, { samples = 7, keep_samples = true })
    assert.are.same({ 5, 4 }, p:size())
    assert.are.equal(7, #outs)
    local sum = outs[1]
    for i = 2, 7 do sum = sum + outs[i] end
    assert(((sum / 7) - p):abs():max():item() < 1e-6)
    assert(math.abs(p:sum(2):mean():item() - 1) < 1e-5)
    assert.is_true(net.training)
  end)
  it("mode = mean is deterministic and uses the posterior means", function()
    local a, b = net:predict(x, { mode = "mean" }), net:predict(x, { mode = "mean" })
    assert.are.equal(0, (a - b):abs():max():item())
    assert.are.equal("sample", net.layers[1].mode)
  end)
  it("gives mean and standard deviation for regression", function()
    local reg = bbb.nn.bayes_mlp({ 1, 8, 1 }, { rho_init = -1, generator = gen })
    local m, s = reg:predict(bbb.tensor{ { 0.5 }, { 2 } }, { samples = 50, likelihood = "gaussian", noise_sigma = 0.1 })
    assert.are.same({ 2, 1 }, m:size())
    assert((s - 0.1):max():item() > 0 and s:totable()[1][1] >= 0.1)
  end)
  it("rejects samples = 0", function()
    assert.has_error(function() net:predict(x, { samples = 0 }) end,
      "predict: samples must be a positive integer, got 0")
  end)
end)

describe("Dropout", function()
  it("zeroes about p of the inputs in training, scales the rest, and passes through in evaluation", function()
    local d = bbb.nn.Dropout(0.25, { generator = bbb.Generator(4) })
    local y = d:forward(bbb.ones(100, 100))
    local kept = y:gt(0):sum():item()
    assert(math.abs(kept / 10000 - 0.75) < 0.02, kept)
    assert(math.abs(y:max():item() - 1 / 0.75) < 1e-6)
    d:evaluate()
    assert.are.equal(10000, d:forward(bbb.ones(100, 100)):sum():item())
    assert.has_error(function() bbb.nn.Dropout(1) end, "Dropout: p must be in [0, 1), got 1")
  end)
end)

describe("the gradient norm the backward pass keeps", function()
  local core = bbb.core
  local function sample_grads(n, seed)
    local gen = bbb.Generator(seed)
    local mu = bbb.randn({ n }, 0, 0.1, gen):requires_grad(true)
    local rho = bbb.rand({ n }, -7, 1, gen):requires_grad(true)
    local gout = bbb.randn({ n }, 0, 1, gen)
    local prior = bbb.prior.ScaleMixture{ pi = 0.25, sigma1 = 1, sigma2 = math.exp(-7) }
    local function step()
      local w, kl = core.bayes_sample(mu, rho, prior, gen)
      local loss = (w * gout):sum() + kl * 1e-3
      loss:backward()
    end
    return mu, rho, step
  end

  it("is the sum sqnorm reads, bit for bit, for any length", function()
    for _, n in ipairs { 1, 17, 16384, 16385, 100003 } do
      local mu, rho, step = sample_grads(n, n)
      step()
      for _, g in ipairs { mu.grad, rho.grad } do
        assert.is_true(core.sqnorm_known(g), "no sum kept for n = " .. n)
        local copy = g:clone()
        assert.is_false(core.sqnorm_known(copy))
        assert.are.equal(core.sqnorm(copy), core.sqnorm(g))
        assert.is_true(core.sqnorm(g) > 0)
      end
    end
  end)

  it("goes stale with any later write to the gradient", function()
    local mu, rho, step = sample_grads(40000, 3)
    step()
    local g = mu.grad
    local before = core.sqnorm(g)
    g[7] = 1e3                                   -- an in-place write
    assert.is_false(core.sqnorm_known(g))
    assert.are.equal(core.sqnorm(g:clone()), core.sqnorm(g))
    assert.is_true(core.sqnorm(g) > before)
    -- a second backward adds to the gradients it left: read again
    step()
    assert.is_false(core.sqnorm_known(rho.grad))
    assert.are.equal(core.sqnorm(rho.grad:clone()), core.sqnorm(rho.grad))
    -- a view of part of a gradient is summed over the view
    mu:set_grad(nil); rho:set_grad(nil)
    step()
    local part = rho.grad:narrow(1, 1, 100)
    local s = 0
    for _, v in ipairs(part:totable()) do s = s + v * v end
    assert.is_true(math.abs(core.sqnorm(part) - s) <= 1e-12 * s)
  end)

  it("lets the optimizer clip by the same norm as a fresh read", function()
    local norms = {}
    for k, keep in ipairs { true, false } do
      local mu, rho, step = sample_grads(50000, 11)
      local opt = bbb.optim.Adam({ { "mu", mu }, { "rho", rho } }, { lr = 1e-2, clip_norm = 1e-3 })
      opt:zero_grad()
      step()
      if not keep then mu.grad[1] = mu.grad[1] end   -- same values, sum no longer kept
      assert.are.equal(keep, core.sqnorm_known(mu.grad))
      norms[k] = opt:step()
    end
    assert.are.equal(norms[1], norms[2])
  end)
end)

describe("the fused passes and the optimizer on 1 and 2 threads", function()
  -- Sampling (noise, weights, complexity), its backward and two Adam steps
  -- over 300,000 weights (many fixed chunks, split between threads), with
  -- rho <= 0 in some chunks and > 0 in others: bit for bit the same.
  local function run(threads)
    local old = bbb.get_num_threads()
    bbb.set_num_threads(threads)
    local ok, res = pcall(function()
      local n = 300000
      local gen = bbb.Generator(5)
      local mu = (bbb.randn({ n }, 0, 0.1, gen)):requires_grad(true)
      local rho = bbb.rand({ n }, -7, 0, gen)
      for i = 250001, 250100 do rho[i] = 0.5 end   -- one chunk takes the general path
      rho:requires_grad(true)
      local gout = bbb.randn({ n }, 0, 1, gen)
      local prior = bbb.prior.ScaleMixture{ pi = 0.25, sigma1 = 1, sigma2 = math.exp(-7) }
      local opt = bbb.optim.Adam({ { "mu", mu }, { "rho", rho } }, { lr = 1e-2 })
      local kls = {}
      for step = 1, 2 do
        opt:zero_grad()
        local w, kl = bbb.core.bayes_sample(mu, rho, prior, gen)
        kls[step] = kl:item()
        local loss = (w * gout):sum() + kl * 1e-3
        loss:backward()
        opt:step()
      end
      return { mu = mu:totable(), rho = rho:totable(), kls = kls }
    end)
    bbb.set_num_threads(old)
    assert(ok, res)
    return res
  end
  it("give identical weights, complexity terms and updates", function()
    local a, b = run(1), run(2)
    assert.are.same(a.kls, b.kls)
    local diff = 0
    for i = 1, #a.mu do
      if a.mu[i] ~= b.mu[i] or a.rho[i] ~= b.rho[i] then diff = diff + 1 end
    end
    assert.are.equal(0, diff)
  end)
end)

describe("the fused complexity term's value", function()
  -- log q - log p summed in float64 over the weights the pass drew, from the
  -- same mu, rho, eps: softplus and the mixture's log-sum-exp in log space.
  local function reference(mu, rho, eps, w, pi, s1, s2)
    local HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
    local lq, lp = 0, 0
    for i = 1, #mu do
      local r = rho[i]
      local sigma = r > 0 and r + math.log(1 + math.exp(-r)) or math.log(1 + math.exp(r))
      local logs = r < -30 and r or math.log(sigma)   -- log1p(e^r) = e^r to double precision there
      lq = lq - logs - 0.5 * eps[i] * eps[i] - HALF_LOG_2PI
      local x = w[i]
      local a1 = math.log(pi) - math.log(s1) - x * x / (2 * s1 * s1)
      local a2 = math.log(1 - pi) - math.log(s2) - x * x / (2 * s2 * s2)
      local m = math.max(a1, a2)
      lp = lp + m + math.log(1 + math.exp(-math.abs(a1 - a2))) - HALF_LOG_2PI
    end
    return lq - lp, lq, lp
  end

  local function case(rho_lo, rho_hi, sigma2, mu_sd, general)
    local n = 2 * 16384 + 777   -- two whole chunks and a part, blocks cut short
    local gen = bbb.Generator(17)
    local mu = bbb.randn({ n }, 0, mu_sd, gen)
    local rho = bbb.rand({ n }, rho_lo, rho_hi, gen)
    if general then for i = 1, 100 do rho[i] = 0.5 end end   -- the first chunk: rho > 0 somewhere
    local eps = bbb.randn({ n }, 0, 1, gen)
    local pi, s1 = 0.25, 1
    local w, kl = bbb.core.bayes_sample(mu, rho, bbb.prior.ScaleMixture{ pi = pi, sigma1 = s1, sigma2 = sigma2 },
      nil, eps)
    local ref = reference(mu:totable(), rho:totable(), eps:totable(), w:totable(), pi, s1, sigma2)
    return kl:item(), ref
  end

  for _, c in ipairs{
    { "friendly: rho in [-6, -2], sigma2 = e^-6", -6, -2, math.exp(-6), 0.1 },
    { "sigma near softplus's cut: rho in [-1, 0]", -1, 0, math.exp(-6), 0.1 },
    { "tiny sigma: rho in [-100, -60]", -100, -60, math.exp(-6), 0.1 },
    { "weights far out: mu sd 20, sigma2 = e^-8", -6, -1, math.exp(-8), 20 },
    { "some rho > 0: the general path", -3, 0, math.exp(-6), 0.1, true },
  } do
    it("matches a float64 sum, " .. c[1], function()
      local kl, ref = case(c[2], c[3], c[4], c[5], c[6])
      assert(math.abs(kl - ref) <= 1e-6 * math.abs(ref) + 1e-3,
        ("kl %.9g, float64 %.9g, relative error %.3g"):format(kl, ref, math.abs(kl - ref) / math.abs(ref)))
    end)
  end

  it("is NaN when a rho is", function()
    local n = 1000
    local rho = bbb.full({ n }, -3)
    rho[500] = 0 / 0
    local _, kl = bbb.core.bayes_sample(bbb.zeros{ n }, rho,
      bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) }, nil, bbb.randn({ n }, 0, 1, bbb.Generator(3)))
    assert.is_true(kl:item() ~= kl:item())
  end)
end)

describe("the fused pass's other outputs: sigma^2 (local) and sigma eps (flipout)", function()
  local PRIORS = {
    { "none", nil },
    { "Gaussian", bbb.prior.Gaussian{ sigma = 0.7 } },
    { "scale mixture", bbb.prior.ScaleMixture{ pi = 0.25, sigma1 = 1, sigma2 = math.exp(-2) } },
    { "Laplace", bbb.prior.Laplace{ b = 0.5 } },
  }
  for _, out in ipairs { "var", "delta" } do
    for _, pc in ipairs(PRIORS) do
      it(("gradcheck, out %s, prior %s"):format(out, pc[1]), function()
        local gen = bbb.Generator(23)
        local mu = bbb.randn({ 3, 4 }, 0, 0.5, gen):requires_grad(true)
        local rho = bbb.rand({ 3, 4 }, -2, 1, gen):requires_grad(true)   -- both of the pass's paths
        local eps = bbb.randn({ 3, 4 }, 0, 1, gen)
        local proj = bbb.rand({ 3, 4 }, 0.5, 1.5, gen)
        check(function()
          local o, kl = bbb.core.bayes_sample(mu, rho, pc[2], nil, eps, out)
          return (o * proj):sum() + kl * 0.3
        end, { mu, rho }, { atol = 2e-3, rtol = 2e-2 })
      end)
    end
  end

  -- softplus in float64 (log1p by its series where 1 + e^r would round)
  local function softplus64(r)
    if r > 0 then return r + math.log(1 + math.exp(-r)) end
    local t = math.exp(r)
    if t < 1e-5 then return t * (1 - t / 2 + t * t / 3) end
    return math.log(1 + t)
  end

  -- Two whole chunks and a part, rho > 0 in the first chunk if general:
  -- "var" against sigma^2 formed op by op (rho:softplus():square()); "delta"
  -- against sigma eps in float64, and its gradients against the "w"
  -- output's (grad rho is the same expression; grad mu lacks grad w alone).
  local function compare(out, rho_lo, rho_hi, general)
    local n = 2 * 16384 + 777
    local gen = bbb.Generator(31)
    local mu0 = bbb.randn({ n }, 0, 0.1, gen)
    local rho0 = bbb.rand({ n }, rho_lo, rho_hi, gen)
    if general then for i = 1, 100 do rho0[i] = 0.5 end end
    local eps = bbb.randn({ n }, 0, 1, gen)
    local gout = bbb.randn({ n }, 0, 1, gen)
    local prior = bbb.prior.ScaleMixture{ pi = 0.25, sigma1 = 1, sigma2 = math.exp(-7) }
    local function run(as, composed)
      local mu, rho = mu0:clone():requires_grad(true), rho0:clone():requires_grad(true)
      local o, kl = bbb.core.bayes_sample(mu, rho, prior, nil, eps, as)
      if composed then o = rho:softplus():square() end
      ((o * gout):sum() + kl * 1e-3):backward()
      return o:totable(), kl:item(), mu.grad:totable(), rho.grad:totable()
    end
    local o1, kl1, gm1, gr1 = run(out)
    local o2, kl2, gm2, gr2 = run(out == "var" and "w" or "w", out == "var")
    assert.are.equal(kl2, kl1)   -- the same weights: the same complexity term, bit for bit
    local worst = { o = 0, mu = 0, rho = 0 }
    local e, g, r = eps:totable(), gout:totable(), rho0:totable()
    for i = 1, n do
      local ref = out == "var" and o2[i] or softplus64(r[i]) * e[i]
      -- below float's smallest normal number (sigma ~ e^-100) a float is 0 or subnormal
      worst.o = math.max(worst.o, math.max(0, math.abs(o1[i] - ref) - 1.2e-38) / (math.abs(ref) + 1e-300))
      local mref = out == "var" and gm2[i] or gm2[i] - g[i]
      local scale = out == "var" and math.abs(gm2[i]) or math.abs(gm2[i]) + math.abs(g[i])
      worst.mu = math.max(worst.mu, math.abs(gm1[i] - mref) / (scale + 1e-6))
      -- grad rho against the size of its terms ((grad w - kl slope) eps sigmoid
      -- and the complexity term's sigmoid / sigma), which can cancel
      local sg = 1 / (1 + math.exp(-r[i]))
      local rscale = (math.abs(g[i]) + math.abs(gm2[i])) * math.abs(e[i]) * sg + 1e-3 * sg / softplus64(r[i])
      worst.rho = math.max(worst.rho, math.abs(gr1[i] - gr2[i]) / rscale)
    end
    return worst
  end
  for _, c in ipairs {
    { "var", -6, -1 }, { "var", -100, -60 }, { "var", -3, 0, true },
    { "delta", -6, -1 }, { "delta", -100, -60 }, { "delta", -3, 0, true },
  } do
    it(("out %s, rho in [%g, %g]%s: values and gradients against references"):format(c[1], c[2], c[3],
      c[4] and " and > 0 in a chunk" or ""), function()
      local worst = compare(c[1], c[2], c[3], c[4])
      assert(worst.o <= 1e-5, ("output: worst relative error %.3g"):format(worst.o))
      -- each pass forms w = mu + sigma eps again, and where w nearly cancels
      -- its last bits move the prior's slope by ~1e-5 relative (measured
      -- against float64: both outputs' gradients err by that much there)
      assert(worst.mu <= 1e-4, ("grad mu: worst relative error %.3g"):format(worst.mu))
      assert(worst.rho <= 1e-4, ("grad rho: worst relative error %.3g"):format(worst.rho))
    end)
  end

  it("sigma^2 matches a float64 softplus at the extremes", function()
    local rhos = { -100, -87, -30, -20.5, -5, -1e-3, 0, 1e-3, 0.5, 3, 20, 40, 88 }
    local rho = bbb.tensor(rhos)
    local var = bbb.core.bayes_sample(bbb.zeros{ #rhos }, rho, nil, nil, bbb.zeros{ #rhos }, "var")
    for i, r in ipairs(rhos) do
      local ref = softplus64(r) ^ 2
      local got = var[i]
      assert(math.abs(got - ref) <= 2e-6 * ref or (ref < 1e-38 and got < 1e-37),
        ("rho %g: sigma^2 %.9g, float64 %.9g"):format(r, got, ref))
    end
  end)

  it("refuses an output it does not know", function()
    assert.has_error(function() bbb.core.bayes_sample(bbb.zeros(2), bbb.zeros(2), nil, nil, nil, "sigma") end,
      'bbb.core.bayes_sample: argument 6 (out): expected one of "w", "var", "delta", got "sigma"')
  end)
end)

-- bbb.mcmc where the answer is known: R-hat, ESS and the KS test against
-- hand-computable cases; HMC and NUTS on 2-d densities whose marginals are
-- known and on Bayesian linear regression, whose posterior is in closed
-- form; and planted bugs, to see that the same checks catch a sampler that
-- is wrong.
local bbb = require "bbb"
local H = require "helpers"
local mcmc = bbb.mcmc
local kernel = require "bbb.mcmc.kernel"

local function normals(n, mean, sd, g) return bbb.randn({ n }, mean, sd, g):totable() end

-- An AR(1) chain x_t = rho x_{t-1} + e_t started in its stationary law.
local function ar1(n, rho, g)
  local e, x, out = normals(n, 0, 1, g), 0, {}
  x = e[1] / math.sqrt(1 - rho * rho)
  for i = 1, n do
    if i > 1 then x = rho * x + e[i] end
    out[i] = x
  end
  return out
end

describe("bbb.core.vec, the sampler's vector of doubles", function()
  local vec = bbb.core.vec
  it("is made from a count, a list or a tensor, and reads like a list", function()
    local a, b, c = vec(3), vec { 1.5, -2, 4 }, vec(bbb.tensor { { 1, 2 }, { 3, 4 } })
    assert.same({ 3, 3, 4 }, { #a, #b, #c })
    assert.same({ 0, 0, 0 }, a:totable())
    assert.same({ 1.5, -2, 4, nil }, { b[1], b[2], b[3], b[4] })
    assert.same({ 1, 2, 3, 4 }, c:totable())
    assert.truthy(bbb.core.is_vec(b) and not bbb.core.is_vec({ 1 }))
  end)
  it("adds, multiplies and takes dot products in place, on all numbers or the first n", function()
    local v = vec { 1, 2, 3 }
    assert.equal(v, v:axpy(2, vec { 1, 1, 1 }))
    assert.same({ 3, 4, 5 }, v:totable())
    v:axpy(-1, vec { 1, 1, 1, 1 }, 2)
    assert.same({ 2, 3, 5 }, v:totable())
    assert.same({ 4, -3, 0 }, vec { 2, 3, 5 }:mul(vec { 2, -1, 0 }):totable())
    assert.equal(2 * 4 + 3 * 5, vec { 2, 3, 5 }:dot(vec { 4, 5, 6 }, 2))
    local w = vec { 7 }
    local c = w:clone():axpy(1, vec { 1 })
    assert.same({ 7, 8 }, { w[1], c[1] })
  end)
  it("keeps double precision where float32 would round it away", function()
    local v = vec { 1 }:axpy(1e-12, vec { 1 })
    assert.equal(1 + 1e-12, v[1])
    assert.equal(1e-24, vec { 1e-12 }:dot(vec { 1e-12 }))
    assert.equal(1, v:tensor():item())   -- the float32 copy rounds, as it must
  end)
  it("reports the largest magnitude, and NaN when any number is NaN", function()
    assert.equal(3, vec { -3, 2 }:max_abs())
    local m = vec { 1, 0 / 0, 5 }:max_abs()
    assert.truthy(m ~= m)
    assert.equal(0, vec(0):max_abs())
  end)
  it("refuses mismatched lengths, bad indices and entries that are not numbers", function()
    local v = vec { 1, 2 }
    H.errors_with(function() v:axpy(1, vec { 1, 2, 3 }) end, "argument 3 (x): has 3 numbers where v has 2")
    H.errors_with(function() v:dot(vec { 1 }) end, "argument 2 (x): has 1 numbers where v has 2")
    H.errors_with(function() v:axpy(1, vec { 1 }, 2) end, "argument 4 (n)")
    H.errors_with(function() v[3] = 1 end, "argument 2 (i)")
    H.errors_with(function() vec { 1, "2" } end, "[2] is not a number")
    H.errors_with(function() vec(-1) end, "argument 1 (n)")
    H.errors_with(function() vec(true) end, "argument 1 (x)")
  end)
end)

describe("rhat and ess", function()
  local g = bbb.Generator(7)
  it("iid normal chains: R-hat near 1, ESS near their number", function()
    local chains = {}
    for c = 1, 4 do chains[c] = normals(1000, 0, 1, g) end
    local r, n = mcmc.rhat(chains), mcmc.ess(chains)
    assert.truthy(r < 1.01, r)
    assert.truthy(n > 3400 and n < 4600, n)
    assert.truthy(math.abs(mcmc.ess(chains, { rank = false }) - 4000) < 600)
  end)
  it("a chain off by one sd: R-hat well above 1.01", function()
    local chains = {}
    for c = 1, 4 do chains[c] = normals(1000, c == 1 and 1 or 0, 1, g) end
    assert.truthy(mcmc.rhat(chains) > 1.05)
  end)
  it("chains that agree on the mean but not the spread: the folded R-hat sees it", function()
    local chains = {}
    for c = 1, 4 do chains[c] = normals(1000, 0, c == 1 and 3 or 1, g) end
    assert.truthy(mcmc.rhat(chains) > 1.05)
  end)
  it("AR(1) with rho: ESS near N (1 - rho) / (1 + rho)", function()
    for _, rho in ipairs { 0.5, 0.9, -0.5 } do
      local chains = {}
      for c = 1, 4 do chains[c] = ar1(5000, rho, g) end
      local want = 20000 * (1 - rho) / (1 + rho)
      local n = mcmc.ess(chains)
      assert.truthy(math.abs(n / want - 1) < 0.15, ("rho %g: ess %.0f, want %.0f"):format(rho, n, want))
    end
  end)
  it("summary: mean, sd and the Monte Carlo error of the mean", function()
    local s = mcmc.summary { normals(2000, 3, 2, g), normals(2000, 3, 2, g) }
    assert.truthy(math.abs(s.mean - 3) < 4 * s.mcse)
    assert.near(2, s.sd, 0.1)
    assert.near(2 / math.sqrt(s.ess_mean), s.mcse, 1e-3)
  end)
  it("refuses what is not a set of chains", function()
    H.errors_with(function() mcmc.rhat(5) end, "rhat: chains must be a list of chains")
    H.errors_with(function() mcmc.ess({ { 1, 2, 3, 4 }, { 1, 2, 3 } }) end,
      "ess: chain 2 has 3 draws, chain 1 has 4: give chains of one length")
    H.errors_with(function() mcmc.rhat({ { 1, 2, 0 / 0, 4 } }) end, "rhat: chain 1 draw 3 is")
    H.errors_with(function() mcmc.ess({ { 1, 2 } }) end, "ess: chains need at least 4 draws each, got 2")
  end)
end)

-- The Kolmogorov tail by its series, summed far: what ks_test's two
-- approximations must agree with.
local function kolmogorov_tail(lambda)
  local s = 0
  for k = 1, 200 do s = s + 2 * (-1) ^ (k - 1) * math.exp(-2 * k * k * lambda * lambda) end
  return s
end

describe("ks_test and the normal distribution", function()
  local uniform = function(v) return math.max(0, math.min(1, v)) end
  it("D by hand", function()
    local d = mcmc.ks_test({ 0.6, 0.1 }, uniform)   -- max(1/2 - 0.1, 1 - 0.6)
    assert.near(0.4, d, 1e-12)
  end)
  it("p-values of the Kolmogorov distribution on both sides of lambda = 1.18", function()
    -- draws at (i - 1/2) / n + c have D = 1 / (2n) + c
    local n = 10000
    local scale = math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)
    for _, lambda in ipairs { 0.8, 1.0, 1.358, 1.8 } do
      local c, xs = lambda / scale - 0.5 / n, {}
      for i = 1, n do xs[i] = (i - 0.5) / n + c end
      local d, p = mcmc.ks_test(xs, uniform)
      assert.near(lambda / scale, d, 1e-9)
      assert.near(kolmogorov_tail(lambda), p, 1e-5)
    end
  end)
  it("tells normal draws from uniform ones", function()
    local g = bbb.Generator(4)
    local _, p = mcmc.ks_test(normals(1000, 0, 1, g), mcmc.normal_cdf)
    assert.truthy(p > 0.01, p)
    local _, q = mcmc.ks_test(bbb.rand({ 1000 }, -2, 2, g):totable(), mcmc.normal_cdf)
    assert.truthy(q < 1e-6, q)
  end)
  it("normal_cdf and normal_quantile at known points", function()
    assert.near(0.975, mcmc.normal_cdf(1.959963984540054), 1e-7)
    assert.near(0.0013498980316301, mcmc.normal_cdf(-3), 1e-9)
    assert.near(0.3085375387259869, mcmc.normal_cdf(4, 5, 2), 1e-7)
    assert.near(1.959963984540054, mcmc.normal_quantile(0.975), 1e-8)
    assert.near(-3.090232306167814, mcmc.normal_quantile(0.001), 1e-8)
    H.errors_with(function() mcmc.normal_quantile(1) end, "normal_quantile: p must be in (0, 1), got 1")
  end)
end)

-- Two 2-d densities with known marginals: a Gaussian with correlation 0.9
-- and sds 1 and 3, and a banana: x1 ~ N(0, 2^2), x2 | x1 ~ N((x1^2 - 4) / 2, 1).
local function correlated(x)
  local x1, x2 = x:narrow(1, 1, 1), x:narrow(1, 2, 1) / 3
  return ((x1:square() - x1 * x2 * 1.8 + x2:square()) * (-0.5 / 0.19)):sum()
end
local CORRELATED = { { 1, 1 }, { 2, 3 } }   -- coordinate, marginal sd
local function banana(x)
  local x1, x2 = x:narrow(1, 1, 1), x:narrow(1, 2, 1)
  return (x1:square() * -0.125 - (x2 - (x1:square() - 4) * 0.5):square() * 0.5):sum()
end
local BANANA = { { 1, 2 } }

local function run(density, o)
  o = o or {}
  local nuts = o.kernel == "nuts"
  return mcmc.sample { log_density = density, warmup = o.warmup or 500, samples = o.samples or 2000, chains = 4,
    seed = o.seed or 3, kernel = o.kernel, leapfrog = not nuts and (o.leapfrog or 8) or nil, max_depth = o.max_depth,
    step_size = o.step_size, metric = o.metric, target_accept = o.target_accept, init = function(_, g) return normals(2, 0, 1, g) end }
end

-- Every chain thinned to about one draw per effective sample, pooled.
local function thinned(chains)
  local thin = math.max(1, math.ceil(#chains * #chains[1] / mcmc.ess(chains)))
  local out = {}
  for _, c in ipairs(chains) do for i = 1, #c, thin do out[#out + 1] = c[i] end end
  return out
end

-- The check: the chains mixed (R-hat below 1.01, every coordinate worth 400
-- draws), and each marginal N(0, sd^2) fits: a KS p-value above 0.01 on
-- thinned draws, the mean and the second moment within 4 Monte Carlo
-- standard errors. -> ok, the checks that failed, the figures.
local function check(post, marginals)
  local failed, fig = {}, { rhat = post.rhat_max, ess = post.ess_min }
  if not (post.rhat_max < 1.01) then failed[#failed + 1] = "rhat" end
  if not (post.ess_min >= 400) then failed[#failed + 1] = "ess" end
  for _, m in ipairs(marginals) do
    local j, sd = m[1], m[2]
    local chains = mcmc.draws(post, j)
    local _, p = mcmc.ks_test(thinned(chains), function(v) return mcmc.normal_cdf(v, 0, sd) end)
    local s = mcmc.summary(chains)
    local sq = {}
    for c, ch in ipairs(chains) do sq[c] = {} for i, v in ipairs(ch) do sq[c][i] = v * v end end
    local s2 = mcmc.summary(sq)
    local f = { ks_p = p, z_mean = s.mean / s.mcse, z_var = (s2.mean - sd * sd) / s2.mcse }
    fig["x" .. j] = f
    if not (p > 0.01) then failed[#failed + 1] = "ks x" .. j end
    if not (math.abs(f.z_mean) < 4) then failed[#failed + 1] = "mean x" .. j end
    if not (math.abs(f.z_var) < 4) then failed[#failed + 1] = "variance x" .. j end
  end
  return #failed == 0, failed, fig
end

local function show(failed, fig) return require("bbb.json").encode { failed = failed, figures = fig } end

-- The value of log_density kept, its gradient multiplied by k.
local function gradient_times(density, k)
  return function(x)
    local lp = density(x)
    return lp * k - (lp * (k - 1)):detach()
  end
end

describe("sample on 2-d densities with known marginals", function()
  it("draws the correlated Gaussian", function()
    local post = run(correlated, { samples = 1000 })
    local ok, failed, fig = check(post, CORRELATED)
    assert.truthy(ok, show(failed, fig))
    assert.truthy(post.accept_rate > 0.6 and post.divergences == 0)
  end)
  it("draws the banana", function()
    local ok, failed, fig = check(run(banana), BANANA)
    assert.truthy(ok, show(failed, fig))
  end)
  it("gives the same chains run together or one by one", function()
    local o = { log_density = banana, init = { 0.5, 0.5 }, warmup = 50, samples = 20, seed = 9, diagnose = false }
    local together = mcmc.sample(setmetatable({ chains = 2 }, { __index = o }))
    local second = mcmc.sample(setmetatable({ chain_ids = { 2 } }, { __index = o }))
    assert.are.same(together.samples[2]:totable(), second.samples[1]:totable())
  end)
  it("refuses bad options before any work", function()
    H.errors_with(function() mcmc.sample { init = { 0 } } end, "sample: log_density must be a function, got nil")
    H.errors_with(function() mcmc.sample { log_density = banana } end, "sample: init must be a list of numbers")
    H.errors_with(function() mcmc.sample { log_density = banana, init = { 0, 0 }, samples = 0 } end,
      "sample: samples must be an integer >= 1, got 0")
    H.errors_with(function() mcmc.sample { log_density = banana, init = { 0, 0 }, target_accept = 1 } end,
      "sample: target_accept must be in (0, 1), got 1")
    H.errors_with(function() mcmc.sample { log_density = function() return 1 end, init = { 0 }, warmup = 10 } end,
      "sample: log_density must return a tensor of one element, got number")
  end)
end)

describe('sample with kernel = "nuts"', function()
  it("draws the correlated Gaussian, and reports each chain's trees", function()
    local post = run(correlated, { kernel = "nuts", samples = 1000 })
    local ok, failed, fig = check(post, CORRELATED)
    assert.truthy(ok, show(failed, fig))
    assert.truthy(post.accept_rate > 0.6 and post.divergences == 0)
    assert.are.equal("nuts", post.kernel)
    local grads = 0
    for k, c in ipairs(post.per_chain) do
      assert.are.equal(k, c.chain)
      assert.truthy(c.tree_depth >= 1 and c.tree_depth <= 10, c.tree_depth)
      -- depth d keeps 2^d - 1 steps, and a last subtree thrown away adds fewer than 2^d more
      assert.truthy(c.steps >= 1 and c.steps < 2 ^ 10, c.steps)
      assert.are.equal(0, c.max_depth_hits)
      grads = grads + c.gradients
    end
    assert.are.equal(post.gradients, grads)
  end)
  it("draws the banana, with a step size small enough for its narrow tails", function()
    local ok, failed, fig = check(run(banana, { kernel = "nuts", target_accept = 0.95 }), BANANA)
    assert.truthy(ok, show(failed, fig))
  end)
  it("with a dense metric, draws the correlated Gaussian in fewer steps than with a diagonal one", function()
    local dense = run(correlated, { kernel = "nuts", samples = 1000, metric = "dense" })
    local ok, failed, fig = check(dense, CORRELATED)
    assert.truthy(ok, show(failed, fig))
    assert.are.equal("dense", dense.metric)
    local diag = run(correlated, { kernel = "nuts", samples = 1000 })
    for k, c in ipairs(dense.per_chain) do
      -- the metric whitens the 0.9 correlation: a larger step, and fewer
      -- leapfrog steps a draw (about 4 against 7-8)
      local d = diag.per_chain[k]
      assert.truthy(c.steps < 0.75 * d.steps and c.step_size > 2 * d.step_size, c.steps .. " vs " .. d.steps)
    end
    -- the warm-up's estimate of the covariance: variances 1 and 9
    assert.near(1, dense.inv_mass[1][1], 0.3)
    assert.near(9, dense.inv_mass[1][2], 2.5)
  end)
  it("keeps every tree within max_depth", function()
    local post = run(correlated, { kernel = "nuts", max_depth = 1, warmup = 50, samples = 50 })
    for _, c in ipairs(post.per_chain) do
      assert.truthy(c.tree_depth <= 1 and c.steps <= 1, c.tree_depth .. " " .. c.steps)
      assert.truthy(c.max_depth_hits > 0)
    end
  end)
  it("gives the same chains run together or one by one", function()
    local o = { log_density = banana, init = { 0.5, 0.5 }, kernel = "nuts", warmup = 50, samples = 20, seed = 9,
                diagnose = false }
    local together = mcmc.sample(setmetatable({ chains = 2 }, { __index = o }))
    local second = mcmc.sample(setmetatable({ chain_ids = { 2 } }, { __index = o }))
    assert.are.same(together.samples[2]:totable(), second.samples[1]:totable())
  end)
  it("refuses a bad kernel, or the other kernel's setting, before any work", function()
    local base = { log_density = banana, init = { 0, 0 } }
    local function with(o) return setmetatable(o, { __index = base }) end
    H.errors_with(function() mcmc.sample(with { kernel = "mala" }) end,
      'sample: kernel must be "nuts" or "hmc", got mala')
    H.errors_with(function() mcmc.sample(with { kernel = "nuts", leapfrog = 8 }) end,
      'sample: leapfrog is for kernel = "hmc"')
    H.errors_with(function() mcmc.sample(with { max_depth = 5 }) end, 'sample: max_depth is for kernel = "nuts"')
    H.errors_with(function() mcmc.sample(with { kernel = "nuts", max_depth = 0 }) end,
      "sample: max_depth must be an integer >= 1, got 0")
    H.errors_with(function() mcmc.sample(with { kernel = "nuts", max_depth = 2.5 }) end,
      "sample: max_depth must be an integer >= 1, got 2.5")
    H.errors_with(function() mcmc.sample(with { metric = "full" }) end,
      'sample: metric must be "diag" or "dense", got full')
  end)
end)

describe("planted bugs", function()
  it("a gradient of the wrong sign: the chains cannot move, and the check fails", function()
    local ok, failed, fig = check(run(gradient_times(correlated, -1), { samples = 500 }), CORRELATED)
    assert.falsy(ok, show(failed, fig))
    assert.truthy(#failed > 0)
  end)
  it("NUTS with a gradient of the wrong sign: the check fails", function()
    -- trajectories pushed away from the mode never turn back: max_depth
    -- keeps each one short, and the chains crawl as HMC's do
    local post = run(gradient_times(correlated, -1), { kernel = "nuts", max_depth = 4, samples = 500 })
    local ok, failed, fig = check(post, CORRELATED)
    assert.falsy(ok, show(failed, fig))
    assert.truthy(post.per_chain[1].max_depth_hits > 0)
  end)
  it("a gradient 1.1 times too large costs acceptance, not correctness: the Metropolis test absorbs it", function()
    -- leapfrog steps under any force field keep volume and reverse under a
    -- momentum flip, so accepting on the true energy still targets the
    -- density; only the proposals get worse
    local ok, failed, fig = check(run(gradient_times(banana, 1.1)), BANANA)
    assert.truthy(ok, show(failed, fig))
    local fixed = { warmup = 0, samples = 400, step_size = 0.9 }
    local right, off = run(banana, fixed), run(gradient_times(banana, 1.1), fixed)
    assert.truthy(off.accept_rate < right.accept_rate - 0.03, off.accept_rate .. " vs " .. right.accept_rate)
  end)
  it("an energy that leaves out the mass matrix: the check fails", function()
    local kinetic = kernel.kinetic
    kernel.kinetic = function(p) return 0.5 * p:dot(p) end
    local okr, post = pcall(run, banana)
    kernel.kinetic = kinetic
    assert(okr, post)
    local ok, failed, fig = check(post, BANANA)
    assert.falsy(ok, show(failed, fig))
  end)
  it("a dense metric whose momenta are drawn from M^-1 instead of M: the check fails", function()
    local momentum = kernel.momentum
    kernel.momentum = function(m, gen)
      if not m.cov then return momentum(m, gen) end
      local z, L, p = bbb.randn({ #m.cov }, 0, 1, gen):totable(), m.chol, {}
      for i = 1, #z do
        p[i] = 0
        for k = 1, i do p[i] = p[i] + L[i][k] * z[k] end
      end
      return bbb.core.vec(p)
    end
    local okr, post = pcall(run, correlated, { kernel = "nuts", metric = "dense", samples = 1000 })
    kernel.momentum = momentum
    assert(okr, post)
    local ok, failed, fig = check(post, CORRELATED)
    assert.falsy(ok, show(failed, fig))
  end)
  -- The leapfrog with its last half step on the old gradient: no longer
  -- reversible nor volume-preserving, so no accept rule can correct it.
  local function stale_leapfrog(target, q, p, grad, eps, L, metric, h0)
    q, p = q:clone(), p:clone():axpy(0.5 * eps, grad)
    local lp, old
    for l = 1, L do
      q:axpy(eps, kernel.velocity(p, metric))
      old = grad
      lp, grad = target.eval(q)
      p:axpy(l < L and eps or 0.5 * eps, l < L and grad or old)
      if h0 and not (-lp + kernel.kinetic(p, metric) - h0 < kernel.DIVERGENCE) then return nil end
    end
    return q, p, lp, grad, kernel.velocity(p, metric)
  end
  for _, k in ipairs { "hmc", "nuts" } do
    it(k .. " with a leapfrog whose last half step uses the old gradient: the check fails", function()
      local leapfrog = kernel.leapfrog
      kernel.leapfrog = stale_leapfrog
      local okr, post = pcall(run, banana, { kernel = k })
      kernel.leapfrog = leapfrog
      assert(okr, post)
      local ok, failed, fig = check(post, BANANA)
      assert.falsy(ok, show(failed, fig))
    end)
  end
end)

-- 60 rows, 2 features: y = 1.5 x1 - 2 x2 + 0.5 + noise of sd 0.5.
local function linear_data(seed)
  local g = bbb.Generator(seed)
  local x = bbb.randn({ 60, 2 }, 0, 1, g)
  local y = x:matmul(bbb.tensor { { 1.5 }, { -2 } }) + 0.5 + bbb.randn({ 60, 1 }, 0, 0.5, g)
  return x, y
end

-- Every coordinate's mean and every covariance entry against the closed
-- form, as z-scores in Monte Carlo standard errors (each from its own ESS).
local function posterior_z(post, mean, cov)
  local D, chains, worst = #mean, {}, { mean = 0, cov = 0 }
  for j = 1, D do chains[j] = mcmc.draws(post, j) end
  for i = 1, D do
    local s = mcmc.summary(chains[i])
    worst.mean = math.max(worst.mean, math.abs((s.mean - mean[i]) / s.mcse))
    for j = i, D do
      local prod = {}
      for c = 1, #chains[i] do
        prod[c] = {}
        for t, v in ipairs(chains[i][c]) do prod[c][t] = (v - mean[i]) * (chains[j][c][t] - mean[j]) end
      end
      local sp = mcmc.summary(prod)
      worst.cov = math.max(worst.cov, math.abs((sp.mean - cov[i][j]) / sp.mcse))
    end
  end
  return worst
end

describe("hmc on Bayesian linear regression", function()
  local x, y = linear_data(11)
  local mean, cov = mcmc.linear_posterior(x, y, { noise_sigma = 0.5, prior_sigma = 1 })
  local function fit(o)
    local net = bbb.nn.mlp({ 2, 1 })
    local opts = { net = net, x = x, y = y, likelihood = "gaussian", noise_sigma = 0.5, warmup = 300, samples = 1000,
                   chains = 4, seed = 5, leapfrog = o.kernel ~= "nuts" and 8 or nil }
    for k, v in pairs(o) do opts[k] = v end
    return mcmc.hmc(opts), net
  end

  for _, k in ipairs { "hmc", "nuts", "nuts dense" } do
    it(k .. " matches the closed-form posterior mean and covariance", function()
      local post = fit { prior_sigma = 1, kernel = k:match "%a+", metric = k:match " (%a+)" }
      local z = posterior_z(post, mean, cov)
      assert.truthy(z.mean < 4 and z.cov < 4, ("worst z: mean %.2f, covariance %.2f"):format(z.mean, z.cov))
      assert.truthy(post.rhat_max < 1.01 and post.ess_min > 1000, post.rhat_max .. " " .. post.ess_min)
    end)
  end
  it("takes the prior as a C prior, a prior written in Lua or a function, to the same posterior", function()
    local lua_prior = { log_prob = function(_, w) return w:square():sum() * -0.5 end }
    for _, o in ipairs { { prior = bbb.prior.Gaussian { sigma = 1 }, samples = 500 },
                         { prior = lua_prior, init = "current", samples = 500 },
                         { prior = function(w) return w:square():sum() * -0.5 end, init = "current", samples = 500 } } do
      local z = posterior_z(fit(o), mean, cov)
      assert.truthy(z.mean < 4 and z.cov < 4, ("worst z: mean %.2f, covariance %.2f"):format(z.mean, z.cov))
    end
  end)
  it("infers the noise sd when asked: about the residual sd of the least-squares fit", function()
    local post = fit { noise_sigma = "infer", samples = 500 }
    local s = mcmc.summary(post.noise_sigma)
    local ls = mcmc.linear_posterior(x, y, { noise_sigma = 1, prior_sigma = 1e4 })
    local rows, ys, rss = x:totable(), y:reshape(-1):totable(), 0
    for i, r in ipairs(rows) do rss = rss + (ys[i] - ls[1] * r[1] - ls[2] * r[2] - ls[3]) ^ 2 end
    local want = math.sqrt(rss / (#rows - 3))
    assert.truthy(math.abs(s.mean - want) < 0.03, ("sigma %.4f, residual sd %.4f"):format(s.mean, want))
    assert.are.equal(3, post.samples[1]:size(2))
  end)
  it("predicts with the draws: the mean of x w + b, the spread with the noise", function()
    local post, net = fit { prior_sigma = 1, samples = 200 }
    local xq = bbb.tensor { { 1, 0 }, { 0, 1 }, { 0, 0 } }
    local m, sd, draws = mcmc.predict(net, post, xq)
    assert.are.same({ 800, 3, 1 }, draws:size())
    local w = {}
    for j = 1, 3 do w[j] = mcmc.summary(mcmc.draws(post, j)).mean end
    assert.near(w[1] + w[3], m:get(1, 1), 1e-4)
    assert.near(w[3], m:get(3, 1), 1e-4)
    local f1 = draws:narrow(2, 1, 1):reshape(-1):totable()
    local var = 0
    for _, v in ipairs(f1) do var = var + (v - m:get(1, 1)) ^ 2 / #f1 end
    assert.near(math.sqrt(var + 0.25), sd:get(1, 1), 1e-4)
  end)
  it("refuses what it cannot sample, before any work", function()
    H.errors_with(function() mcmc.hmc { net = bbb.nn.bayes_mlp({ 2, 1 }), x = x, y = y, noise_sigma = 1 } end,
      "hmc: net holds a Bayesian layer (BayesLinear)")
    H.errors_with(function() mcmc.hmc { net = bbb.nn.mlp({ 2, 1 }), x = x, y = y } end,
      'hmc: the gaussian likelihood needs noise_sigma, a positive number or "infer", got nil')
    H.errors_with(function() mcmc.hmc { net = bbb.nn.mlp({ 2, 1 }), x = x, y = y, noise_sigma = 1, prior_sigma = 1,
      prior = bbb.prior.Gaussian {} } end, "hmc: give prior or prior_sigma, not both")
    H.errors_with(function() mcmc.hmc { net = bbb.nn.mlp({ 2, 1 }), x = x, y = y, noise_sigma = 1,
      prior = { log_prob = function(_, w) return w:sum() end } } end, 'hmc: init = "prior" needs a C prior')
    H.errors_with(function() mcmc.hmc { net = bbb.nn.mlp({ 2, 2 }), x = x, y = y * 0 + 3, likelihood = "categorical" } end,
      "hmc: y[1] is 3.0, not a class in 1..2 (the net's outputs)")
    H.errors_with(function()
      mcmc.hmc { net = bbb.nn.mlp({ 2, 1 }), x = x, y = y, noise_sigma = 1, kernel = "NUTS" }
    end, 'hmc: kernel must be "nuts" or "hmc", got NUTS')
    H.errors_with(function() mcmc.hmc { net = bbb.nn.mlp({ 2, 1 }), x = x, y = y, noise_sigma = 1, kernel = "nuts",
      leapfrog = 16 } end, 'hmc: leapfrog is for kernel = "hmc"')
  end)
end)

describe("hmc with a categorical likelihood", function()
  -- Two classes, logits x w1 and x w2 (no bias): only v = (w1 - w2) / sqrt 2
  -- meets the data, so u = (w1 + w2) / sqrt 2 keeps its N(0, 1) prior and
  -- v's posterior is one-dimensional, known by quadrature.
  it("matches the posterior of the one direction the data see, and the prior of the other", function()
    local g = bbb.Generator(21)
    local xs = normals(40, 0, 1, g)
    local ys, u = {}, bbb.rand({ 40 }, 0, 1, g):totable()
    for i, v in ipairs(xs) do ys[i] = u[i] < 1 / (1 + math.exp(-1.5 * v)) and 1 or 2 end
    local function log_post(v)   -- logit of class 1 = sqrt 2 v x
      local s = -0.5 * v * v
      for i, xv in ipairs(xs) do
        local z = math.sqrt(2) * v * xv * (ys[i] == 1 and 1 or -1)
        s = s - math.log(1 + math.exp(-z))
      end
      return s
    end
    local m0, m1, m2 = 0, 0, 0
    for k = -4000, 4000 do
      local v = k / 1000
      local w = math.exp(log_post(v))
      m0, m1, m2 = m0 + w, m1 + w * v, m2 + w * v * v
    end
    local v_mean, v_var = m1 / m0, m2 / m0 - (m1 / m0) ^ 2
    local net = bbb.nn.Sequential { bbb.nn.Linear(1, 2, { bias = false }) }
    local post = mcmc.hmc { net = net, x = bbb.tensor(xs):reshape(40, 1), y = bbb.tensor(ys), likelihood = "categorical",
      prior_sigma = 1, warmup = 300, samples = 1000, chains = 4, seed = 3, leapfrog = 8 }
    local w1, w2 = mcmc.draws(post, 1), mcmc.draws(post, 2)
    local uc, vc, vsq = {}, {}, {}
    for c = 1, 4 do
      uc[c], vc[c], vsq[c] = {}, {}, {}
      for i = 1, #w1[c] do
        uc[c][i] = (w1[c][i] + w2[c][i]) / math.sqrt(2)
        vc[c][i] = (w1[c][i] - w2[c][i]) / math.sqrt(2)
        vsq[c][i] = (vc[c][i] - v_mean) ^ 2
      end
    end
    local sv, sq = mcmc.summary(vc), mcmc.summary(vsq)
    assert.truthy(math.abs(sv.mean - v_mean) < 4 * sv.mcse, ("v mean %.4f, want %.4f"):format(sv.mean, v_mean))
    assert.truthy(math.abs(sq.mean - v_var) < 4 * sq.mcse, ("v var %.4f, want %.4f"):format(sq.mean, v_var))
    local _, p = mcmc.ks_test(thinned(uc), mcmc.normal_cdf)
    assert.truthy(p > 0.01, p)
    local probs, draws = mcmc.predict(net, post, bbb.tensor { { 1 } })
    assert.are.same({ 4000, 1, 2 }, draws:size())
    assert.near(1, probs:sum():item(), 1e-5)
  end)
end)

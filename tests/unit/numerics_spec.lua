-- Numerics against float64 references computed here in Lua doubles: the
-- scale-mixture prior's gradient across the band where the narrow component's
-- responsibility vanishes, and the Gaussian predictive spread at large means.
local bbb = require "bbb"

-- d log p / d w of pi N(0, s1^2) + (1 - pi) N(0, s2^2), in doubles, each
-- responsibility from its own logistic (no 1 - r).
local function mixture_dlogp(w, pi, s1, s2)
  local a1 = math.log(pi) - math.log(s1) - w * w / (2 * s1 * s1)
  local a2 = math.log(1 - pi) - math.log(s2) - w * w / (2 * s2 * s2)
  local x = a1 - a2
  local r1, r2 = 1 / (1 + math.exp(-x)), 1 / (1 + math.exp(x))
  return -w * (r1 / (s1 * s1) + r2 / (s2 * s2))
end

-- Weights spread geometrically over 1e-6..10, both signs, as float32 values.
local function weight_grid()
  local ws = {}
  for k = 0, 1400 do
    local v = 10 ^ (-6 + 7 * k / 1400)
    ws[#ws + 1] = v
    ws[#ws + 1] = -v
  end
  local t = bbb.tensor(ws)
  return t, t:totable()   -- the rounded float32 values, exactly, as doubles
end

-- Largest relative error of got (a tensor) against the reference.
local function worst(got, ws, ref)
  local g = got:totable()
  local err, at = 0, nil
  for i, w in ipairs(ws) do
    local r = ref(w)
    local e = math.abs(g[i] - r) / math.abs(r)
    if e > err then err, at = e, w end
  end
  return err, at
end

local TOL = 2e-5   -- float32 arithmetic on w^2 / (2 sigma2^2) up to ~30

describe("scale-mixture prior gradient against float64", function()
  local t, ws = weight_grid()
  for _, pi in ipairs { 0.25, 0.5, 0.75 } do
    for _, l1 in ipairs { 0, 1, 2 } do
      for _, l2 in ipairs { 6, 7, 8 } do
        local s1, s2 = math.exp(-l1), math.exp(-l2)
        local name = ("pi %.2f, sigma1 e^-%d, sigma2 e^-%d"):format(pi, l1, l2)
        local function ref(w) return mixture_dlogp(w, pi, s1, s2) end
        local prior = bbb.prior.ScaleMixture { pi = pi, sigma1 = s1, sigma2 = s2 }

        it("prior:log_prob backward, " .. name, function()
          local w = t:clone():requires_grad(true)
          prior:log_prob(w):backward()
          local err, at = worst(w.grad, ws, ref)
          assert(err < TOL, ("relative error %.3g at w = %.6g"):format(err, at))
        end)

        it("fused sampling pass, " .. name, function()
          -- eps = 0 makes w = mu exactly; log q then does not depend on mu,
          -- so d kl / d mu = -d log p / d w.
          local mu = t:clone():requires_grad(true)
          local rho = bbb.full(t:size(), -3):requires_grad(true)
          local _, kl = bbb.core.bayes_sample(mu, rho, prior, nil, bbb.zeros(t:size()))
          kl:backward()
          local err, at = worst(-mu.grad, ws, ref)
          assert(err < TOL, ("relative error %.3g at w = %.6g"):format(err, at))
        end)
      end
    end
  end
end)

describe("Gaussian predictive standard deviation", function()
  -- y = w x + b with w ~ N(0, sd^2), b ~ N(m, sd^2): mean m, spread ~ sd sqrt(1 + x^2).
  local function net_at(m, sd)
    local layer = bbb.nn.BayesLinear(1, 1, { generator = bbb.Generator(3) })
    local rho = math.log(math.exp(sd) - 1)
    layer.weight_mu = bbb.tensor { { 0 } }:requires_grad(true)
    layer.weight_rho = bbb.full({ 1, 1 }, rho):requires_grad(true)
    layer.bias_mu = bbb.tensor { m }:requires_grad(true)
    layer.bias_rho = bbb.full({ 1 }, rho):requires_grad(true)
    return layer
  end

  for _, case in ipairs { { 1, 0.1 }, { 100, 0.1 }, { 1000, 0.1 }, { 1000, 0.01 }, { -1000, 1 } } do
    local m, sd = case[1], case[2]
    it(("matches the spread of the samples in float64 at mean %g, spread %g"):format(m, sd), function()
      local net = net_at(m, sd)
      local x = bbb.tensor { { 0 }, { 0.5 }, { 1 }, { -2 } }
      local S = 200
      local mean, std, outs = net:predict(x, { likelihood = "gaussian", samples = S, keep_samples = true })
      local ys = {}
      for s = 1, S do ys[s] = outs[s]:reshape(-1):totable() end
      local got_m, got_s = mean:reshape(-1):totable(), std:reshape(-1):totable()
      for i = 1, 4 do
        local mu = 0
        for s = 1, S do mu = mu + ys[s][i] end
        mu = mu / S
        local v = 0
        for s = 1, S do v = v + (ys[s][i] - mu) ^ 2 end
        local ref = math.sqrt(v / S)
        assert(ref > 0.5 * sd, "the samples must spread")
        assert(math.abs(got_s[i] - ref) <= 1e-3 * ref,
          ("row %d: std %.9g, float64 %.9g (mean %.9g)"):format(i, got_s[i], ref, mu))
        assert(math.abs(got_m[i] - mu) <= 1e-6 * math.abs(mu) + 1e-6 * sd,
          ("row %d: mean %.9g, float64 %.9g"):format(i, got_m[i], mu))
      end
    end)
  end

  it("adds noise_sigma in quadrature", function()
    local net = net_at(100, 0.1)
    local x = bbb.tensor { { 1 } }
    bbb.manual_seed(5)
    local _, s0 = net:predict(x, { likelihood = "gaussian", samples = 50 })
    net = net_at(100, 0.1)
    local _, s1 = net:predict(x, { likelihood = "gaussian", samples = 50, noise_sigma = 0.3 })
    local a, b = s0:item(), s1:item()
    assert(math.abs(b * b - (a * a + 0.09)) < 1e-4, ("%g vs %g"):format(b, math.sqrt(a * a + 0.09)))
  end)
end)

describe("the fused sampling pass's log q", function()
  -- log(1 + t) for t in [0, 1], in doubles without cancellation
  local function log1p(t) return t < 1e-5 and t * (1 - t / 2 + t * t / 3) or math.log(1 + t) end
  local function softplus(r) return r > 0 and r + log1p(math.exp(-r)) or log1p(math.exp(r)) end

  -- log q(w) = sum of -log sigma - eps^2 / 2 - log(2 pi) / 2, in doubles.
  local function logq_ref(rho, eps)
    local s = 0
    for i = 1, #rho do
      local logs = math.log(softplus(rho[i]))
      s = s + (-logs - 0.5 * eps[i] * eps[i] - 0.5 * math.log(2 * math.pi))
    end
    return s
  end

  -- Two fixed chunks (16384 weights each): every rho <= 0 in the first (the
  -- path with log sigma from a polynomial), some > 0 in the second (softplus
  -- and log).
  it("matches a float64 reference from rho = -80 to 6", function()
    local n = 2 * 16384
    local rho, eps = {}, {}
    for i = 1, n do
      local u = ((i * 7919) % 16384) / 16384
      rho[i] = i <= 16384 and -80 * u ^ 3 or -80 * u ^ 3 + 6 * (1 - u) ^ 8
      eps[i] = ((i * 104729) % 2001) / 1000 - 1
    end
    local trho, teps = bbb.tensor(rho), bbb.tensor(eps)
    rho, eps = trho:totable(), teps:totable()   -- the float32 values
    for _, half in ipairs { { 1, 16384 }, { 16385, n } } do
      local r = trho:narrow(1, half[1], 16384):clone()
      local e = teps:narrow(1, half[1], 16384):clone()
      local rs, es = {}, {}
      for i = half[1], half[2] do rs[#rs + 1], es[#es + 1] = rho[i], eps[i] end
      local mu = bbb.zeros(16384)
      local w, logq = bbb.core.bayes_sample(mu, r, nil, nil, e)
      local ref = logq_ref(rs, es)
      assert(math.abs(logq:item() - ref) <= 2e-6 * math.abs(ref), ("%.9g vs %.9g"):format(logq:item(), ref))
      -- and the weights are mu + sigma eps to a few ulp
      local wt = w:totable()
      for i = 1, 16384, 97 do
        local want = softplus(rs[i]) * es[i]
        assert(math.abs(wt[i] - want) <= 4e-7 * math.abs(want) + 1e-45, ("w %.9g vs %.9g"):format(wt[i], want))
      end
    end
  end)
end)

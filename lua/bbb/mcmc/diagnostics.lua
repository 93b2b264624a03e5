--- bbb.mcmc.diagnostics: has a sampler converged, how many independent
-- draws is its output worth, and do its draws fit a known distribution?
-- Rank-normalised split R-hat and bulk effective sample size after Vehtari,
-- Gelman, Simpson, Carpenter and Buerkner (2021), as Stan and ArviZ compute
-- them; the Kolmogorov-Smirnov test with its asymptotic p-value. Chains are
-- plain Lua lists of numbers: the arithmetic is in doubles.
local D = {}

local SQRT2 = math.sqrt(2)

-- erfc(x) for x >= 0 by the Chebyshev fit of Numerical Recipes (erfcc):
-- relative error below 1.2e-7 everywhere, so the far tail keeps its
-- digits (1 - erf(x) would cancel them).
local function erfc_pos(x)
  local t = 1 / (1 + 0.5 * x)
  local poly = -x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
    + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
    + t * (-0.82215223 + t * 0.17087277))))))))
  return t * math.exp(poly)
end

--- normal_cdf(x [, mean, sd]) -> P(X <= x) for X ~ N(mean, sd^2) (0 and 1 by default).
-- @usage
--   assert(math.abs(bbb.mcmc.normal_cdf(1.959964) - 0.975) < 1e-6)
function D.normal_cdf(x, mean, sd)
  local z = (x - (mean or 0)) / (sd or 1) / SQRT2
  if z >= 0 then return 1 - 0.5 * erfc_pos(z) end
  return 0.5 * erfc_pos(-z)
end

-- The standard normal quantile by Acklam's rational approximation
-- (relative error below 1.2e-9), which the rank normalisation needs at
-- every draw.
local A = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
            1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00 }
local B = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
            6.680131188771972e+01, -1.328068155288572e+01 }
local C = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
            -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00 }
local E = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00 }

--- normal_quantile(p) -> z with P(Z <= z) = p for the standard normal, p in (0, 1).
-- @raise normal_quantile: p must be in (0, 1), got ...
-- @usage
--   assert(math.abs(bbb.mcmc.normal_quantile(0.975) - 1.959964) < 1e-6)
function D.normal_quantile(p)
  if type(p) ~= "number" or not (p > 0 and p < 1) then
    error(("normal_quantile: p must be in (0, 1), got %s"):format(tostring(p)), 2)
  end
  if p < 0.02425 then
    local q = math.sqrt(-2 * math.log(p))
    return (((((C[1] * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) * q + C[6])
      / ((((E[1] * q + E[2]) * q + E[3]) * q + E[4]) * q + 1)
  elseif p > 1 - 0.02425 then
    local q = math.sqrt(-2 * math.log(1 - p))
    return -(((((C[1] * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) * q + C[6])
      / ((((E[1] * q + E[2]) * q + E[3]) * q + E[4]) * q + 1)
  end
  local q = p - 0.5
  local r = q * q
  return (((((A[1] * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * r + A[6]) * q
    / (((((B[1] * r + B[2]) * r + B[3]) * r + B[4]) * r + B[5]) * r + 1)
end

-- chains: a list of at least one list of finite numbers, all of one length
-- of at least 4 (a split half needs two draws for a variance).
local function check_chains(chains, what)
  if type(chains) ~= "table" or #chains == 0 then
    error(("%s: chains must be a list of chains (each a list of numbers), got %s")
      :format(what, type(chains) == "table" and "an empty list" or type(chains)), 3)
  end
  local n = type(chains[1]) == "table" and #chains[1] or -1
  for m, c in ipairs(chains) do
    if type(c) ~= "table" then error(("%s: chain %d is a %s, not a list of numbers"):format(what, m, type(c)), 3) end
    if #c ~= n then error(("%s: chain %d has %d draws, chain 1 has %d: give chains of one length"):format(what, m, #c, n), 3) end
    for i = 1, n do
      local v = c[i]
      if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
        error(("%s: chain %d draw %d is %s, not a finite number"):format(what, m, i, tostring(v)), 3)
      end
    end
  end
  if n < 4 then error(("%s: chains need at least 4 draws each, got %d"):format(what, n), 3) end
  return #chains, n
end

-- Each chain cut into its first and second halves (the middle draw of an
-- odd length left out): a chain that drifts then looks like two chains
-- that disagree.
local function split(chains)
  local out = {}
  for _, c in ipairs(chains) do
    local half = #c // 2
    local a, b = {}, {}
    for i = 1, half do a[i], b[i] = c[i], c[#c - half + i] end
    out[#out + 1], out[#out + 2] = a, b
  end
  return out
end

-- The pooled draws of chains of one length, flat, and the order that sorts them.
local function pooled(chains)
  local vals, idx = {}, {}
  for _, c in ipairs(chains) do table.move(c, 1, #c, #vals + 1, vals) end
  for i = 1, #vals do idx[i] = i end
  table.sort(idx, function(a, b) return vals[a] < vals[b] end)
  return vals, idx
end

-- Back from a flat list to chains of length n.
local function unflat(flat, m, n)
  local out = {}
  for j = 1, m do out[j] = table.move(flat, (j - 1) * n + 1, j * n, 1, {}) end
  return out
end

-- The draws pooled and replaced by the normal scores of their ranks
-- ((r - 3/8) / (S + 1/4), Blom's offsets), ties sharing their average rank:
-- R-hat and ESS then exist for heavy tails too, and do not move under a
-- monotone transform of the quantity. vals, idx: pooled's.
local function z_scale(chains, vals, idx)
  if not vals then vals, idx = pooled(chains) end
  local S, z = #vals, {}
  local k = 1
  while k <= S do
    local e = k
    while e < S and vals[idx[e + 1]] == vals[idx[k]] do e = e + 1 end
    local score = D.normal_quantile(((k + e) / 2 - 3 / 8) / (S + 1 / 4))
    for t = k, e do z[idx[t]] = score end
    k = e + 1
  end
  return unflat(z, #chains, #chains[1])
end

-- |x - median| of the pooled draws: the folded draws, whose R-hat sees
-- chains that agree in location but not in spread.
local function fold(chains, vals, idx)
  if not vals then vals, idx = pooled(chains) end
  local S = #vals
  local med = S % 2 == 1 and vals[idx[(S + 1) // 2]] or 0.5 * (vals[idx[S // 2]] + vals[idx[S // 2 + 1]])
  local out = {}
  for j, c in ipairs(chains) do
    out[j] = {}
    for i, v in ipairs(c) do out[j][i] = math.abs(v - med) end
  end
  return out
end

-- Chain means and unbiased within-chain variances.
local function moments(chains)
  local means, vars = {}, {}
  for j, c in ipairs(chains) do
    local s = 0
    for i = 1, #c do s = s + c[i] end
    local mu, ss = s / #c, 0
    for i = 1, #c do ss = ss + (c[i] - mu) ^ 2 end
    means[j], vars[j] = mu, ss / (#c - 1)
  end
  return means, vars
end

-- The classic potential scale reduction of (already split) chains.
local function rhat_basic(chains)
  local m, n = #chains, #chains[1]
  local means, vars = moments(chains)
  local W, grand = 0, 0
  for j = 1, m do W, grand = W + vars[j] / m, grand + means[j] / m end
  local B = 0
  if m > 1 then
    for j = 1, m do B = B + (means[j] - grand) ^ 2 end
    B = B * n / (m - 1)
  end
  if W <= 0 then return (B > 0) and math.huge or 1 end   -- constant chains: agree only if equal
  return math.sqrt(((n - 1) / n * W + B / n) / W)
end

--- rhat(chains) -> the rank-normalised split R-hat: the larger of the
-- bulk R-hat (of the normal scores of the ranks) and the tail R-hat (of
-- the folded draws' scores), over the chains each split in two. Near 1
-- when the chains agree; above 1.01 (Vehtari et al.'s threshold) they
-- have not mixed. chains: a list of chains, each a list of numbers of one
-- length (at least 4).
-- @raise rhat: chains must be a list of chains (each a list of numbers), got ...
-- @raise rhat: chain M has N draws, chain 1 has K: give chains of one length
-- @usage
--   local g, chains = bbb.Generator(1), {}
--   for c = 1, 4 do chains[c] = bbb.randn({ 500 }, 0, 1, g):totable() end
--   assert(bbb.mcmc.rhat(chains) < 1.01)
function D.rhat(chains)
  check_chains(chains, "rhat")
  return (D.rhat_ess(chains))
end

-- Autocovariance of chain c at lag t about its mean mu, divided by its length.
local function acov(c, mu, t)
  local s, n = 0, #c
  for i = 1, n - t do s = s + (c[i] - mu) * (c[i + t] - mu) end
  return s / n
end

-- ESS of (already split, maybe rank-normalised) chains, as Stan's
-- compute_effective_sample_size: the chains' autocorrelations combined
-- through the between-chain variance, Geyer's initial positive sequence
-- truncating the sum, his initial monotone sequence smoothing it. The
-- autocovariances are computed lag by lag only as far as the truncation
-- goes, which for a chain that mixes is a few lags.
local function ess_basic(chains)
  local m, n = #chains, #chains[1]
  local means, vars = moments(chains)
  local mean_var, grand = 0, 0
  for j = 1, m do mean_var, grand = mean_var + vars[j] / m, grand + means[j] / m end
  local var_plus = mean_var * (n - 1) / n
  if m > 1 then
    local B = 0
    for j = 1, m do B = B + (means[j] - grand) ^ 2 end
    var_plus = var_plus + B / (m - 1)
  end
  if var_plus <= 0 then return m * n end   -- constant draws: nothing to correlate
  local function rho(t)
    local a = 0
    for j = 1, m do a = a + acov(chains[j], means[j], t) end
    return 1 - (mean_var - a / m) / var_plus
  end
  local r = { [0] = 1, [1] = rho(1) }
  local even, odd = 1, r[1]
  local s = 1
  while s < n - 4 and even + odd > 0 do
    even, odd = rho(s + 1), rho(s + 2)
    if even + odd >= 0 then r[s + 1], r[s + 2] = even, odd else r[s + 1], r[s + 2] = 0, 0 end
    s = s + 2
  end
  local max_s = s
  r[max_s + 1] = even > 0 and even or 0
  for t = 1, max_s - 3, 2 do   -- the pair sums made non-increasing
    if r[t + 1] + r[t + 2] > r[t - 1] + r[t] then
      r[t + 1] = (r[t - 1] + r[t]) / 2
      r[t + 2] = r[t + 1]
    end
  end
  local sum = 0
  for t = 0, max_s - 1 do sum = sum + (r[t] or 0) end
  local tau = -1 + 2 * sum + r[max_s + 1]
  local total = m * n
  return math.min(total / tau, total * math.log(total, 10))
end

-- rhat_ess(chains) -> rhat, bulk ess: both from one sort of the split chains.
function D.rhat_ess(chains)
  local halves = split(chains)
  local vals, idx = pooled(halves)
  local z = z_scale(halves, vals, idx)
  local r = math.max(rhat_basic(z), rhat_basic(z_scale(fold(halves, vals, idx))))
  return r, ess_basic(z)
end

--- ess(chains [, {rank = true}]) -> the bulk effective sample size: how
-- many independent draws the chains' draws are worth for the centre of the
-- distribution, from the chains split in two and rank-normalised. With
-- rank = false, the draws themselves (not their ranks): the ESS for the
-- mean, which the Monte Carlo standard error sd / sqrt(ess) uses.
-- Independent draws give about their number; an AR(1) chain of
-- autocorrelation rho about N (1 - rho) / (1 + rho).
-- @raise ess: chains must be a list of chains (each a list of numbers), got ...
-- @usage
--   local g = bbb.Generator(2)
--   local iid = { bbb.randn({ 1000 }, 0, 1, g):totable(), bbb.randn({ 1000 }, 0, 1, g):totable() }
--   local n = bbb.mcmc.ess(iid)
--   assert(n > 1600 and n < 2400)
function D.ess(chains, opts)
  check_chains(chains, "ess")
  if opts ~= nil and type(opts) ~= "table" then error(("ess: opts must be a table, got %s"):format(type(opts)), 2) end
  local halves = split(chains)
  if opts and opts.rank == false then return ess_basic(halves) end
  return ess_basic(z_scale(halves))
end

--- summary(chains) -> {mean, sd, rhat, ess, ess_mean, mcse}: the pooled
-- mean and standard deviation, rhat and ess (bulk) as above, ess_mean
-- (ess with rank = false) and the Monte Carlo standard error of the mean,
-- sd / sqrt(ess_mean).
-- @usage
--   local g = bbb.Generator(3)
--   local s = bbb.mcmc.summary { bbb.randn({ 400 }, 5, 2, g):totable(), bbb.randn({ 400 }, 5, 2, g):totable() }
--   assert(math.abs(s.mean - 5) < 4 * s.mcse)
function D.summary(chains)
  local m, n = check_chains(chains, "summary")
  local means, vars = moments(chains)
  local mean, within, between = 0, 0, 0
  for j = 1, m do mean = mean + means[j] / m end
  for j = 1, m do
    within = within + vars[j] * (n - 1)
    between = between + n * (means[j] - mean) ^ 2
  end
  local sd = math.sqrt((within + between) / (m * n - 1))
  local ess_mean = ess_basic(split(chains))
  local rhat, ess = D.rhat_ess(chains)
  return { mean = mean, sd = sd, rhat = rhat, ess = ess, ess_mean = ess_mean, mcse = sd / math.sqrt(ess_mean) }
end

-- The Kolmogorov distribution's tail P(K > lambda), in the two forms of
-- Numerical Recipes (qks): the alternating series converges fast for
-- large lambda, the theta-function form for small.
local function kolmogorov_q(lambda)
  if lambda <= 0 then return 1 end
  if lambda < 1.18 then
    local y = math.exp(-math.pi ^ 2 / (8 * lambda * lambda))
    local s = y + y ^ 9 + y ^ 25 + y ^ 49
    return math.max(0, math.min(1, 1 - math.sqrt(2 * math.pi) / lambda * s))
  end
  local x = math.exp(-2 * lambda * lambda)
  return math.max(0, math.min(1, 2 * (x - x ^ 4 + x ^ 9 - x ^ 16)))
end

--- ks_test(xs, cdf) -> D, p: the Kolmogorov-Smirnov statistic of the
-- draws xs (a list of numbers) against the distribution function cdf
-- (a function of a number), and its p-value by the asymptotic Kolmogorov
-- distribution with Stephens' small-sample correction,
-- lambda = (sqrt(n) + 0.12 + 0.11 / sqrt(n)) D. The draws must be
-- independent: thin a chain to about one draw per effective sample first.
-- @raise ks_test: xs must be a list of at least 2 numbers, got ...
-- @raise ks_test: cdf must be a function, got ...
-- @usage
--   local xs = bbb.randn({ 500 }, 0, 1, bbb.Generator(4)):totable()
--   local d, p = bbb.mcmc.ks_test(xs, bbb.mcmc.normal_cdf)
--   assert(p > 0.01)
function D.ks_test(xs, cdf)
  if type(xs) ~= "table" or #xs < 2 then
    error(("ks_test: xs must be a list of at least 2 numbers, got %s")
      :format(type(xs) == "table" and (#xs .. " numbers") or type(xs)), 2)
  end
  if type(cdf) ~= "function" then error(("ks_test: cdf must be a function, got %s"):format(type(cdf)), 2) end
  local s = {}
  for i, v in ipairs(xs) do
    if type(v) ~= "number" or v ~= v then error(("ks_test: xs[%d] is %s, not a number"):format(i, tostring(v)), 2) end
    s[i] = v
  end
  table.sort(s)
  local n, d = #s, 0
  for i = 1, n do
    local f = cdf(s[i])
    d = math.max(d, i / n - f, f - (i - 1) / n)
  end
  local sn = math.sqrt(n)
  return d, kolmogorov_q((sn + 0.12 + 0.11 / sn) * d)
end

return D

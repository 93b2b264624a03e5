-- bbb.laplace: the last-layer Laplace approximation against Bayesian
-- linear regression (where it is exact), its choice of prior precision,
-- the probit predictive and its errors.
local bbb = require "bbb"
local laplace = require "bbb.laplace"

-- Solves M x = b (Lua rows, small) by Gaussian elimination with partial
-- pivoting; also returns log |det M|.
local function solve(m, b)
  local n, a = #m, {}
  for i = 1, n do
    a[i] = {}
    for j = 1, n do a[i][j] = m[i][j] end
    a[i][n + 1] = b[i]
  end
  local logdet = 0
  for k = 1, n do
    local p = k
    for i = k + 1, n do if math.abs(a[i][k]) > math.abs(a[p][k]) then p = i end end
    a[k], a[p] = a[p], a[k]
    logdet = logdet + math.log(math.abs(a[k][k]))
    for i = k + 1, n do
      local r = a[i][k] / a[k][k]
      for j = k, n + 1 do a[i][j] = a[i][j] - r * a[k][j] end
    end
  end
  local x = {}
  for i = n, 1, -1 do
    local s = a[i][n + 1]
    for j = i + 1, n do s = s - a[i][j] * x[j] end
    x[i] = s / a[i][i]
  end
  return x, logdet
end

-- Bayesian linear regression y = phi . theta + N(0, sigma^2), theta ~ N(0, I / delta).
local N, H, SIGMA, DELTA = 12, 3, 0.5, 2.0
local g = bbb.Generator(11)
local phi = bbb.randn({ N, H }, 0, 1, g)
local y = bbb.randn({ N }, 0, 1, g):totable()
local P = phi:totable()

-- The posterior precision and the MAP weights at DELTA, in double.
local function closed_form()
  local prec, rhs = {}, {}
  for i = 1, H do
    prec[i], rhs[i] = {}, 0
    for j = 1, H do
      local s = 0
      for n = 1, N do s = s + P[n][i] * P[n][j] end
      prec[i][j] = s / SIGMA ^ 2 + (i == j and DELTA or 0)
    end
    for n = 1, N do rhs[i] = rhs[i] + P[n][i] * y[n] / SIGMA ^ 2 end
  end
  return prec, (solve(prec, rhs))
end

-- log N(y; 0, sigma^2 I + Phi Phi^T / delta): the evidence.
local function log_evidence()
  local k = {}
  for a = 1, N do
    k[a] = {}
    for b = 1, N do
      local s = 0
      for i = 1, H do s = s + P[a][i] * P[b][i] end
      k[a][b] = s / DELTA + (a == b and SIGMA ^ 2 or 0)
    end
  end
  local alpha, logdet = solve(k, y)
  local quad = 0
  for a = 1, N do quad = quad + y[a] * alpha[a] end
  return -0.5 * (quad + logdet + N * math.log(2 * math.pi))
end

describe("last_layer", function()
  local prec, theta = closed_form()
  local post = laplace.last_layer { features = phi, weight = bbb.tensor { theta }, likelihood = "gaussian",
    targets = y, sigma = SIGMA, prior_precision = DELTA }

  it("gives the evidence of Bayesian linear regression at the posterior mode", function()
    local got, want = post:log_marglik(DELTA), log_evidence()
    assert(math.abs(got - want) < 1e-4 * math.abs(want), ("%.8f vs %.8f"):format(got, want))
  end)
  it("gives its predictive variance phi^T S phi", function()
    local x = bbb.tensor { { 0.3, -1, 2 }, { 1, 1, 1 } }
    local var = post:logit_variance(x):totable()
    for r, row in ipairs(x:totable()) do
      local s = solve(prec, row)
      local want = 0
      for i = 1, H do want = want + row[i] * s[i] end
      assert(math.abs(var[r][1] - want) < 1e-4 * want, ("%.8f vs %.8f"):format(var[r][1], want))
    end
  end)
  it("chooses the prior precision that maximises the marginal likelihood", function()
    local best = laplace.last_layer { features = phi, weight = bbb.tensor { theta }, likelihood = "gaussian",
      targets = y, sigma = SIGMA }
    local d = best.prior_precision
    assert(d > 1e-6 and d < 1e6)
    for _, f in ipairs { 0.9, 1.1, 0.5, 2 } do
      assert(best:log_marglik(d) >= best:log_marglik(d * f))
    end
  end)
end)

describe("classification", function()
  local n, c = 200, 3
  local x = bbb.randn({ n, 4 }, 0, 1, g)
  local w, b = bbb.randn({ c, 4 }, 0, 2, g), bbb.zeros(c)
  local labels = bbb.linear(x, w, b):argmax(2):totable()
  it("widens the predictive: probit probabilities sum to 1 and are less sure than the mode's", function()
    local post = laplace.last_layer { features = x, weight = w, bias = b, labels = labels, prior_precision = 0.1 }
    local p, map = post:predict(x), bbb.softmax(bbb.linear(x, w, b), 2)
    local sums, top, top_map = p:sum(2):totable(), p:max(2):totable(), map:max(2):totable()
    for i = 1, n do
      assert(math.abs(sums[i] - 1) < 1e-5)
      assert(top[i] <= top_map[i] + 1e-6)
    end
  end)
  it("refuses bad input by name", function()
    local ok, err = pcall(laplace.last_layer, { features = x, weight = bbb.zeros(3, 5), labels = labels })
    assert.is_false(ok)
    assert.truthy(err:find("last_layer: weight must be a (C, 4) tensor", 1, true), err)
    ok, err = pcall(laplace.last_layer, { features = x, weight = w, labels = { 1, 2 } })
    assert.is_false(ok)
    assert.truthy(err:find("last_layer: labels must hold 200 classes", 1, true), err)
  end)
end)

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

-- The KFAC posterior built entry by entry in double: the precision
-- A (x) G / N + delta I with A = sum phi phi^T (phi with its 1 for the
-- bias), G = sum diag(p) - p p^T, p the softmax of the float32 inputs'
-- logits taken in double; the variance of f_c(x) is e^T S e, e = x (x) e_c.
local function kfac_reference(x, w, b, labels, delta)
  local X, W, B = x:totable(), w:totable(), b:totable()
  local n, h, c = #X, #X[1], #W
  local k = h + 1
  local A, G = {}, {}
  for i = 1, k do A[i] = {}; for j = 1, k do A[i][j] = 0 end end
  for i = 1, c do G[i] = {}; for j = 1, c do G[i][j] = 0 end end
  for r = 1, n do
    local phi = { table.unpack(X[r]) }
    phi[k] = 1
    for i = 1, k do for j = 1, k do A[i][j] = A[i][j] + phi[i] * phi[j] end end
    local f, top, sum = {}, -math.huge, 0
    for cc = 1, c do
      f[cc] = B[cc]
      for i = 1, h do f[cc] = f[cc] + W[cc][i] * phi[i] end
      top = math.max(top, f[cc])
    end
    for cc = 1, c do f[cc] = math.exp(f[cc] - top); sum = sum + f[cc] end
    for i = 1, c do
      for j = 1, c do G[i][j] = G[i][j] + (i == j and f[i] / sum or 0) - f[i] * f[j] / sum ^ 2 end
    end
  end
  local prec = {}
  for i = 1, k do
    for ci = 1, c do
      local row = {}
      for j = 1, k do
        for cj = 1, c do row[#row + 1] = A[i][j] * G[ci][cj] / n end
      end
      row[#prec + 1] = row[#prec + 1] + delta
      prec[#prec + 1] = row
    end
  end
  local ref = {}
  function ref.variance(point)
    local out = {}
    for cc = 1, c do
      local e = {}
      for i = 1, k do
        for cj = 1, c do e[#e + 1] = cj == cc and (point[i] or 1) or 0 end
      end
      local s = solve(prec, e)
      out[cc] = 0
      for i = 1, #e do out[cc] = out[cc] + e[i] * s[i] end
    end
    return out
  end
  ref.logdet = select(2, solve(prec, prec[1]))
  return ref
end

describe("last_layer against a float64 reference", function()
  -- features on very different scales: a large one nearly constant (close
  -- to the bias column), a tiny one, a wide one; a weak prior
  local n, c, delta = 40, 3, 1e-3
  local gen = bbb.Generator(5)
  local rows = {}
  for r = 1, n do
    rows[r] = { 1000 + bbb.randn({ 1 }, 0, 0.5, gen):item(), bbb.randn({ 1 }, 0, 1e-3, gen):item(),
      bbb.randn({ 1 }, 0, 100, gen):item() }
  end
  local x = bbb.tensor(rows)
  local w, b = bbb.tensor { { 0.01, 300, 0.02 }, { -0.01, -200, 0.01 }, { 0, 100, -0.03 } }, bbb.tensor { 1, -2, 0.5 }
  local labels = {}
  for r = 1, n do labels[r] = (r % c) + 1 end
  local post = laplace.last_layer { features = x, weight = w, bias = b, labels = labels, prior_precision = delta }
  local ref = kfac_reference(x, w, b, labels, delta)

  it("gives the same predictive variances", function()
    local test = bbb.tensor { { 1000.3, 2e-3, -150 }, { 999, -1e-3, 20 }, { 0, 0, 1 } }
    local got = post:logit_variance(test):totable()
    for r, point in ipairs(test:totable()) do
      local want = ref.variance(point)
      for cc = 1, c do
        local rel = math.abs(got[r][cc] - want[cc]) / want[cc]
        assert(rel < 1e-5, ("row %d class %d: %.9g vs %.9g"):format(r, cc, got[r][cc], want[cc]))
      end
    end
  end)
  it("gives the same log determinant in the marginal likelihood", function()
    -- log_marglik's last term is -1/2 log det of the precision
    local p = post.n_params
    local rest = post.loglik - 0.5 * delta * post.theta_sq + 0.5 * p * math.log(delta)
    local logdet = -2 * (post:log_marglik(delta) - rest)
    assert(math.abs(logdet - ref.logdet) < 1e-6 * math.abs(ref.logdet), ("%.12g vs %.12g"):format(logdet, ref.logdet))
  end)
end)

describe("last_layer on many features", function()
  it("fits 1000 features in seconds", function()
    local gen = bbb.Generator(9)
    local h, c = 1000, 10
    local x, w = bbb.randn({ 1500, h }, 0, 1, gen), bbb.randn({ c, h }, 0, 0.05, gen)
    local labels = bbb.linear(x, w):argmax(2):totable()
    local t0 = os.clock()
    local post = laplace.last_layer { features = x, weight = w, bias = bbb.zeros(c), labels = labels }
    local p = post:predict(x:narrow(1, 1, 50))
    local took = os.clock() - t0
    assert(took < 5, ("took %.1f s"):format(took))
    assert(math.abs(p:sum():item() - 50) < 1e-3)
  end)
end)

describe("last_layer refuses features it cannot use", function()
  local gen = bbb.Generator(4)
  local w = bbb.randn({ 2, 3 }, 0, 1, gen)
  local labels = {}
  for r = 1, 10 do labels[r] = r % 2 + 1 end
  local function features(v)
    local rows = bbb.randn({ 10, 3 }, 0, 1, gen):totable()
    rows[4][2] = v
    return bbb.tensor(rows)
  end
  -- the message, after the position of the call that failed: this file's
  local function message(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    local where, text = err:match("^(.-:%d+): (.*)$")
    assert.truthy(where and where:find("laplace_spec.lua", 1, true), err)
    return text
  end

  it("NaN and inf, naming the row and column", function()
    assert.are.equal("last_layer: features (4, 2) is NaN, not a finite number",
      message(function() laplace.last_layer { features = features(0 / 0), weight = w, labels = labels } end))
    assert.are.equal("last_layer: features (4, 2) is inf, not a finite number",
      message(function() laplace.last_layer { features = features(math.huge), weight = w, labels = labels } end))
    local bad = bbb.tensor { { 1, 0 / 0, 1 }, { 1, 1, 1 } }
    assert.are.equal("last_layer: weight (1, 2) is NaN, not a finite number",
      message(function() laplace.last_layer { features = features(1), weight = bad, labels = labels } end))
  end)
  it("features whose float32 products overflow", function()
    local err = message(function() laplace.last_layer { features = features(1e30), weight = w, labels = labels } end)
    assert.truthy(err:find("last_layer: features (4, 2) is 1e+30: products of features this large overflow float32",
      1, true), err)
  end)
  it("the same at prediction, where large but usable features still give probabilities", function()
    local post = laplace.last_layer { features = features(1), weight = w, labels = labels }
    assert.are.equal("predict: features (4, 2) is NaN, not a finite number",
      message(function() post:predict(features(0 / 0)) end))
    assert.are.equal("logit_variance: features (4, 2) is -inf, not a finite number",
      message(function() post:logit_variance(features(-math.huge)) end))
    assert.are.equal("predict: features must be a (N, 3) tensor, got 2x4",
      message(function() post:predict(bbb.zeros(2, 4)) end))
    local p = post:predict(features(1e12)):totable()
    for _, row in ipairs(p) do assert(math.abs(row[1] + row[2] - 1) < 1e-5, row[1] .. " " .. row[2]) end
  end)
end)

describe("the eigendecomposition under it", function()
  local core = require "bbb.core"
  it("takes a tensor, Lua rows in double, or the Gram matrix of rows", function()
    local values, vectors = core.eigh(bbb.tensor { { 2, 1 }, { 1, 2 } })
    assert(#values == 2 and math.abs(values[1] - 1) < 1e-14 and math.abs(values[2] - 3) < 1e-14)
    local v = vectors:totable()
    assert(math.abs(math.abs(v[1][1]) - math.sqrt(0.5)) < 1e-7 and math.abs(v[1][1] + v[2][1]) < 1e-7)
    -- 1 + 1e-12 survives in double, not in float32
    values = core.eigh { { 1 + 1e-12, 0 }, { 0, 1 } }
    assert(math.abs(values[2] - values[1] - 1e-12) < 1e-15)
    values = core.eigh(bbb.tensor { { 1, 0 }, { 0, 2 }, { 0, 2 } }, true)
    assert(math.abs(values[1] - 1) < 1e-12 and math.abs(values[2] - 8) < 1e-12)
  end)
  it("refuses what is not finite", function()
    local ok, err = pcall(core.eigh, bbb.tensor { { 1, 0 / 0 }, { 0, 1 } })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("eigh: x holds", 1, true), tostring(err))
  end)
end)

describe("the sampled last layer", function()
  local function fitted()
    local g = bbb.Generator(1)
    local x = bbb.randn({ 200, 3 }, 0, 1, g)
    local w = bbb.randn({ 4, 3 }, 0, 1, g)
    local y = {}
    for i = 1, 200 do y[i] = 1 + (i % 4) end
    return bbb.laplace.last_layer { features = x, weight = w, bias = bbb.zeros(4), labels = y },
      bbb.randn({ 5, 3 }, 0, 1, g)
  end

  it("draws outputs whose variance is logit_variance, within Monte Carlo error", function()
    local post, xt = fitted()
    local S = 4000
    local d = post:sample(xt, S, bbb.Generator(2))
    assert.are.same({ S, 5, 4 }, d:size())
    local mean = d:mean(1)
    local var = ((d - mean:reshape(1, 5, 4)):square()):mean(1):totable()
    local want = post:logit_variance(xt):totable()
    local f = bbb.linear(xt, post.weight, post.bias):totable()
    local m = mean:totable()
    for i = 1, 5 do
      for c = 1, 4 do
        -- the sample variance of S normal draws has a standard error of var sqrt(2 / S)
        assert.is_true(math.abs(var[i][c] - want[i][c]) < 4 * want[i][c] * math.sqrt(2 / S), ("%d,%d"):format(i, c))
        assert.is_true(math.abs(m[i][c] - f[i][c]) < 4 * math.sqrt(want[i][c] / S), ("mean %d,%d"):format(i, c))
      end
    end
  end)

  it("gives an MC predictive that is probabilities, near the probit approximation", function()
    local post, xt = fitted()
    local p = post:predict_sampled(xt, 2000, bbb.Generator(3))
    local rows = p:totable()
    local probit = post:predict(xt):totable()
    for i = 1, 5 do
      local sum = 0
      for c = 1, 4 do
        sum = sum + rows[i][c]
        assert.is_true(math.abs(rows[i][c] - probit[i][c]) < 0.05, ("%d,%d"):format(i, c))
      end
      assert.is_true(math.abs(sum - 1) < 1e-5)
    end
    local ok, err = pcall(post.predict_sampled, post, xt, 0)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("predict_sampled: S must be a positive integer, got 0", 1, true))
  end)
end)

describe("split", function()
  it("gives the features last_layer takes, which the last layer maps to the net's output", function()
    local net = bbb.nn.mlp({ 3, 4, 2 }, { generator = bbb.Generator(2) })
    local x = bbb.randn({ 5, 3 }, 0, 1, bbb.Generator(3))
    local body, head = bbb.laplace.split(net)
    local phi = body(x)
    assert.are.same({ 5, 4 }, phi:size())
    local want, got = net:forward(x):totable(), head:forward(phi):totable()
    for i = 1, 5 do
      for j = 1, 2 do assert.are.equal(want[i][j], got[i][j]) end
    end
  end)

  it("refuses a net whose last layer is not a Linear", function()
    local net = bbb.nn.Sequential { bbb.nn.Linear(3, 2), bbb.nn.ReLU() }
    local ok, err = pcall(bbb.laplace.split, net)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("split: the net does not end in a Linear layer", 1, true), tostring(err))
  end)
end)

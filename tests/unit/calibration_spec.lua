-- bbb.calibration: the temperature fit against a closed form and a known
-- scale, the NLL it promises not to raise, and its errors.
local bbb = require "bbb"
local calibration = require "bbb.calibration"

-- n rows of c-class logits N(0, 2^2) and labels drawn from softmax(logits):
-- for these logits the calibrated temperature is 1.
local function calibrated_rows(n, c, seed)
  local g = bbb.Generator(seed)
  local z = bbb.randn({ n, c }, 0, 2, g)
  local p, u = bbb.softmax(z, 2):totable(), bbb.rand({ n }, 0, 1, g):totable()
  local y = {}
  for i = 1, n do
    local acc, k = 0, c
    for j = 1, c do
      acc = acc + p[i][j]
      if u[i] <= acc then k = j break end
    end
    y[i] = k
  end
  return z, y
end

describe("fit_temperature", function()
  it("matches the closed form of a two-class case", function()
    -- logits (0, 1) on every row, 3 of 4 labelled 2: sigmoid(1 / T) = 3/4
    local z = bbb.tensor { { 0, 1 }, { 0, 1 }, { 0, 1 }, { 0, 1 } }
    local T = calibration.fit_temperature(z, { 2, 2, 2, 1 })
    assert(math.abs(T - 1 / math.log(3)) < 1e-5, ("T = %.8f"):format(T))
  end)
  it("recovers the factor logits were scaled by", function()
    local z, y = calibrated_rows(4000, 10, 7)
    for _, factor in ipairs { 0.5, 3 } do
      local T = calibration.fit_temperature(z * factor, y)
      assert(math.abs(T / factor - 1) < 0.08, ("factor %g: T = %.4f"):format(factor, T))
    end
  end)
  it("never raises the NLL of the rows it was fitted on (rows with errors: no floor)", function()
    for seed = 1, 5 do
      local z, y = calibrated_rows(200, 4, seed)
      for _, factor in ipairs { 0.2, 1, 4 } do
        local T, nll = calibration.fit_temperature(z * factor, y)
        assert(nll <= calibration.nll(z * factor, y, 1) + 1e-12)
        assert(math.abs(nll - calibration.nll(z * factor, y, T)) < 1e-12)
      end
    end
  end)
  it("on rows it gets all right, stops where the model still claims an error rate of 1/(n+2)", function()
    -- separable rows: the NLL falls for ever as T -> 0; the floor holds T
    local g = bbb.Generator(11)
    local n = 48
    local z = bbb.randn({ n, 3 }, 0, 1, g):totable()
    local y = {}
    for i = 1, n do
      y[i] = 1 + (i % 3)
      z[i][y[i]] = z[i][y[i]] + 4   -- the right class on top, by a margin
    end
    local logits = bbb.tensor(z)
    local T, nll, info = calibration.fit_temperature(logits, y)
    assert.are.equal(0, info.errors)
    assert.are.equal(n, info.n)
    assert.is_true(info.bound)
    assert.is_true(T > 0.05, ("T = %g collapsed"):format(T))
    -- the claimed error rate at T, in double precision, is the floor
    local doubt = 0
    for i = 1, n do
      local top, sum = -math.huge, 0
      for k = 1, 3 do top = math.max(top, z[i][k] / T) end
      for k = 1, 3 do sum = sum + math.exp(z[i][k] / T - top) end
      doubt = doubt + 1 - 1 / sum
    end
    assert.near(1 / (n + 2), doubt / n, 1e-6)
    assert.near(calibration.nll(logits, y, T), nll, 1e-12)
  end)
  it("leaves a fit the rows can show alone: rows with errors are not held by the floor", function()
    local z, y = calibrated_rows(400, 4, 5)
    local T, _, info = calibration.fit_temperature(z * 3, y)
    assert.is_false(info.bound)
    assert.is_true(info.errors > 0)
    assert.is_true(T >= info.floor)
  end)
  it("is deterministic", function()
    local z, y = calibrated_rows(300, 5, 3)
    assert.are.equal(calibration.fit_temperature(z * 2, y), calibration.fit_temperature(z * 2, y))
  end)
end)

describe("apply", function()
  it("is softmax(logits / T)", function()
    local z = bbb.tensor { { 1, 2, 3 }, { 0, 0, 4 } }
    local p = calibration.apply(z, 2):totable()
    local e = { math.exp(0.5), math.exp(1), math.exp(1.5) }
    local s = e[1] + e[2] + e[3]
    for k = 1, 3 do assert(math.abs(p[1][k] - e[k] / s) < 1e-6) end
    assert(math.abs(p[2][1] + p[2][2] + p[2][3] - 1) < 1e-6)
  end)
  it("gives probabilities for any positive finite T, large logits included", function()
    local z = bbb.tensor { { 1e30, -1e30, 0 }, { 3e38, -3e38, 1 }, { 1, 2, 2 }, { -5e-45, 0, -1e-30 }, { 7, 7, 7 } }
    for _, T in ipairs { 1e-300, 1e-45, 1e-30, 1e-3, 1, 1e3, 1e30, 1e300 } do
      local p = calibration.apply(z, T):totable()
      for i, row in ipairs(p) do
        local sum = 0
        for k, v in ipairs(row) do
          assert(v >= 0 and v <= 1, ("T = %g: p(%d, %d) = %s"):format(T, i, k, tostring(v)))
          sum = sum + v
        end
        assert(math.abs(sum - 1) < 1e-6, ("T = %g: row %d sums to %s"):format(T, i, tostring(sum)))
      end
    end
    -- T -> 0: the argmax, ties shared; T -> inf: uniform
    local sharp, flat = calibration.apply(z, 1e-30):totable(), calibration.apply(z, 1e300):totable()
    assert.are.same({ 1, 0, 0 }, sharp[1])
    assert.are.same({ 1, 0, 0 }, sharp[2])
    assert.are.same({ 0, 0.5, 0.5 }, sharp[3])
    local third = 1 / 3
    for _, row in ipairs(flat) do
      for _, v in ipairs(row) do assert(math.abs(v - third) < 1e-6) end
    end
    -- at T = 1e-45 the smallest float32 gaps still count: a logit of -4 * 2^-149
    -- (a denormal) against 0 gives exp(z / T) : 1
    local gap = bbb.tensor { { -5e-45, 0 } }
    local v = gap:totable()[1][1]
    local tiny = calibration.apply(gap, 1e-45):totable()[1]
    local want = math.exp(v / 1e-45) / (math.exp(v / 1e-45) + 1)
    assert(v < 0 and math.abs(tiny[1] - want) < 1e-6 * want, ("%.9g vs %.9g"):format(tiny[1], want))
  end)
  it("refuses logits that are not finite", function()
    local ok, err = pcall(calibration.apply, bbb.tensor { { 0, 1 }, { 0 / 0, 1 } }, 1)
    assert.is_false(ok)
    assert.truthy(err:find("apply: logit (2, 1) is NaN", 1, true), err)
  end)
end)

describe("errors", function()
  local function assert_error_has(fn, text)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(text, 1, true), tostring(err))
  end
  it("name the function and the input", function()
    assert_error_has(function() calibration.fit_temperature(bbb.zeros(3), { 1, 1, 1 }) end,
      "fit_temperature: logits must be a (N, C) tensor, got 3")
    assert_error_has(function() calibration.fit_temperature(bbb.zeros(3, 2), { 1, 2 }) end,
      "fit_temperature: labels must be 3 classes")
    assert_error_has(function() calibration.fit_temperature(bbb.zeros(2, 2), { 1, 3 }) end,
      "fit_temperature: label 2 is 3, expected a class in 1..2")
    assert_error_has(function() calibration.fit_temperature(bbb.tensor { { 0, 0 / 0 } }, { 1 }) end,
      "fit_temperature: logit (1, 2) is")
    assert_error_has(function() calibration.apply(bbb.zeros(2, 2), 0) end, "apply: T must be a positive number, got 0")
    assert_error_has(function() calibration.nll(bbb.zeros(2, 2), { 1, 1 }, -1) end, "nll: T must be a positive number")
  end)
end)

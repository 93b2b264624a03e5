-- bbb.stats.paired against intervals computed by hand, and its errors.
local bbb = require "bbb"
local stats = require "bbb.stats"

-- a = {3, 4, 5, 6}, b = {1, 2, 4, 4}: differences {2, 2, 1, 2}, mean 1.75,
-- sample variance 0.25, so sd / sqrt(4) = 0.25; t_{3, 0.975} = 3.182446305.
local a, b = { 3, 4, 5, 6 }, { 1, 2, 4, 4 }
local T3 = 3.182446305284263

describe("paired", function()
  it("t: mean +- t_{n-1} sd / sqrt(n)", function()
    local d = stats.paired(a, b)
    assert.near(1.75, d.mean, 1e-15)
    assert.near(1.75 - T3 * 0.25, d.lo, 1e-6)
    assert.near(1.75 + T3 * 0.25, d.hi, 1e-6)
    assert.are.same({ "above", 4, "t", 0.95 }, { d.verdict, d.n, d.method, d.level })
  end)
  it("corrected: Nadeau and Bengio's variance sd^2 (1/n + n_test/n_train)", function()
    local d = stats.paired(a, b, { method = "corrected", n_train = 9, n_test = 1 })
    local half = T3 * math.sqrt(0.25 * (1 / 4 + 1 / 9))
    assert.near(1.75 - half, d.lo, 1e-6)
    assert.near(1.75 + half, d.hi, 1e-6)
    -- wider than the plain t whenever the splits share rows
    local plain = stats.paired(a, b)
    assert.is_true(d.hi - d.lo > plain.hi - plain.lo)
  end)
  it("bootstrap: the percentile interval of resampled means", function()
    -- resampled means of {2, 2, 1, 2} take the values 1, 1.25, ..., 2;
    -- P(mean = 2) = (3/4)^4 = 0.32 > 2.5%, P(mean <= 1) = (1/4)^4 = 0.4% < 2.5%
    -- but P(mean <= 1.25) = 5.1%: the 95% interval is [1.25, 2]
    local d = stats.paired(a, b, { method = "bootstrap" })
    assert.are.same({ 1.25, 2, "above" }, { d.lo, d.hi, d.verdict })
    assert.are.same(d, stats.paired(a, b, { method = "bootstrap" }))   -- seeded
  end)
  it("the verdict says where the interval lies against zero", function()
    assert.are.equal("below", stats.paired(b, a).verdict)
    assert.are.equal("tie", stats.paired({ 1, 2, 3 }, { 2, 1, 3.1 }).verdict)
    -- a level that narrows the interval can turn a tie into a verdict
    local x, y = { 0.3, -0.1, 0.4, 0.2, 0.5 }, { 0, 0, 0, 0, 0 }
    assert.are.equal("tie", stats.paired(x, y, { level = 0.99 }).verdict)
    assert.are.equal("above", stats.paired(x, y, { level = 0.8 }).verdict)
  end)
  it("matches a float64 t interval at many pairs", function()
    -- 1,000 pairs: the t multiplier is 1.962339 (t_{999, 0.975})
    local x, y = {}, {}
    for i = 1, 1000 do x[i], y[i] = math.sin(i), math.sin(i) - 0.01 * (i % 7) end
    local d = stats.paired(x, y)
    local mean, ss = 0, 0
    for i = 1, 1000 do mean = mean + (x[i] - y[i]) / 1000 end
    for i = 1, 1000 do ss = ss + ((x[i] - y[i]) - mean) ^ 2 end
    local half = 1.9623390808264 * math.sqrt(ss / 999 / 1000)
    assert.near(mean - half, d.lo, 1e-8)
  end)
end)

describe("paired's errors", function()
  local function errs(fn, text)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(text, 1, true), tostring(err))
  end
  it("name what is wrong", function()
    errs(function() stats.paired({ 1, 2, 3 }, { 1, 2, 3, 4 }) end, "a and b hold 3 and 4 numbers")
    errs(function() stats.paired({ 1, 0 / 0 }, { 1, 2 }) end, "a[2] is")
    errs(function() stats.paired({ 1 }, { 2 }) end, "need at least 2 pairs")
    errs(function() stats.paired(a, b, { method = "wilcoxon" }) end, "method must be t, bootstrap or corrected")
    errs(function() stats.paired(a, b, { method = "corrected" }) end, "needs n_train")
    errs(function() stats.paired(a, b, { level = 1 }) end, "level must be in (0, 1)")
    errs(function() stats.paired("x", b) end, "a must be a list of numbers")
  end)
end)

describe("format", function()
  it("writes the mean and its interval", function()
    assert.are.equal("1.750 [0.954, 2.546]", stats.format(stats.paired(a, b)))
  end)
end)

describe("interval_multiplier at large df", function()
  it("is quick and between the t at 1,000 and the normal", function()
    local t1e9 = bbb.metrics.interval_multiplier(0.95, 1e9)
    assert.near(bbb.metrics.interval_multiplier(0.95), t1e9, 1e-8)
    assert.is_true(bbb.metrics.interval_multiplier(0.95, 100000) < bbb.metrics.interval_multiplier(0.95, 1000))
    -- continuous across the switch from the series to the expansion
    assert.near(bbb.metrics.interval_multiplier(0.95, 1000), bbb.metrics.interval_multiplier(0.95, 1001), 5e-6)
  end)
end)

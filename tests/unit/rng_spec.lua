-- Random numbers: reproducible from a seed whatever the thread count,
-- resumable from a saved state, and from the right distributions.
local bbb = require "bbb"

local function max_abs_diff(a, b) return (a - b):abs():max():item() end

local with_threads = require("helpers").with_threads

describe("seeding", function()
  it("the same seed gives the same numbers, with a Generator", function()
    local a = bbb.randn({1000}, 0, 1, bbb.Generator(42))
    local b = bbb.randn({1000}, 0, 1, bbb.Generator(42))
    assert.are.equal(0, max_abs_diff(a, b))
    local u1 = bbb.rand({1000}, -2, 3, bbb.Generator(7))
    local u2 = bbb.rand({1000}, -2, 3, bbb.Generator(7))
    assert.are.equal(0, max_abs_diff(u1, u2))
  end)
  it("the same seed gives the same numbers, with manual_seed", function()
    bbb.manual_seed(123)
    local a = bbb.randn{1000}
    local u = bbb.rand{10}
    bbb.manual_seed(123)
    assert.are.equal(0, max_abs_diff(a, bbb.randn{1000}))
    assert.are.equal(0, max_abs_diff(u, bbb.rand{10}))
  end)
  it("manual_seed on the default generator matches a Generator with that seed", function()
    bbb.manual_seed(99)
    assert.are.equal(0, max_abs_diff(bbb.randn{257}, bbb.randn({257}, 0, 1, bbb.Generator(99))))
  end)
  it("a generator argument leaves the default one alone", function()
    bbb.manual_seed(5)
    local expect = bbb.randn{100}
    bbb.manual_seed(5)
    local g = bbb.Generator(6)
    bbb.randn({100}, 0, 1, g)
    assert.are.equal(0, max_abs_diff(expect, bbb.randn{100}))
  end)
  it("different seeds give different numbers", function()
    local a = bbb.randn({1000}, 0, 1, bbb.Generator(1))
    local b = bbb.randn({1000}, 0, 1, bbb.Generator(2))
    assert.is_true(max_abs_diff(a, b) > 0.1)
    -- and not just a shifted stream: hardly any element coincides
    local same = 0
    for i = 1, 1000 do if a[i] == b[i] then same = same + 1 end end
    assert.is_true(same < 5, same)
  end)
  it("consecutive draws differ", function()
    local g = bbb.Generator(3)
    local a, b = bbb.rand({1000}, 0, 1, g), bbb.rand({1000}, 0, 1, g)
    assert.is_true(max_abs_diff(a, b) > 0.1)
    -- draws of odd sizes must not overlap the next draw's numbers either
    local c, d = bbb.randn({3}, 0, 1, g), bbb.randn({3}, 0, 1, g)
    assert.is_true(max_abs_diff(c, d) > 0)
  end)
  it("seed() reads and resets the seed", function()
    local g = bbb.Generator(11)
    assert.are.equal(11, g:seed())
    local a = bbb.rand({50}, 0, 1, g)
    g:seed(11)
    assert.are.equal(0, max_abs_diff(a, bbb.rand({50}, 0, 1, g)))
  end)
end)

describe("thread count", function()
  it("1,000,000 normals are identical on 1 and 2 threads", function()
    local a = with_threads(1, function() return bbb.randn({1000000}, 0, 1, bbb.Generator(2024)) end)
    local b = with_threads(2, function() return bbb.randn({1000000}, 0, 1, bbb.Generator(2024)) end)
    assert.are.equal(0, max_abs_diff(a, b))
  end)
  it("1,000,001 uniforms are identical on 1 and 2 threads", function()
    -- an odd count puts a partial 4-number block at the end of a thread's range
    local a = with_threads(1, function() return bbb.rand({1000001}, -1, 1, bbb.Generator(9)) end)
    local b = with_threads(2, function() return bbb.rand({1000001}, -1, 1, bbb.Generator(9)) end)
    assert.are.equal(0, max_abs_diff(a, b))
  end)
end)

describe("generator state", function()
  it("state() and set_state() reproduce a draw", function()
    local g = bbb.Generator(77)
    bbb.randn({1001}, 0, 1, g)
    local seed, counter = g:state()
    assert.are.equal(77, seed)
    assert.is_true(counter > 0)
    local a = bbb.randn({500}, 0, 1, g)
    local g2 = bbb.Generator(0):set_state(seed, counter)
    assert.are.equal(0, max_abs_diff(a, bbb.randn({500}, 0, 1, g2)))
    g:set_state(seed, counter)
    assert.are.equal(0, max_abs_diff(a, bbb.randn({500}, 0, 1, g)))
  end)
  it("the counter advances with every draw", function()
    local g = bbb.Generator(1)
    local _, c0 = g:state()
    bbb.rand({4}, 0, 1, g)
    local _, c1 = g:state()
    bbb.rand({4}, 0, 1, g)
    local _, c2 = g:state()
    assert.is_true(c1 > c0 and c2 > c1)
  end)
end)

describe("distributions", function()
  it("normal mean and std on 1e6 samples", function()
    local x = bbb.randn({1000000}, 2, 3, bbb.Generator(31))
    local mean = x:mean():item()
    local std = math.sqrt(((x - mean):square()):mean():item())
    -- standard error of the mean is 3/1000; of the std about 3/1414
    assert.is_true(math.abs(mean - 2) < 0.015, mean)
    assert.is_true(math.abs(std - 3) < 0.015, std)
    -- tails: about 4.55% of N(0, 1) lies beyond 2 sigma; the steep clamp
    -- is a step function counting those elements
    local z = (x - 2) / 3
    local frac = ((z:abs() - 2) * 1e6):clamp(0, 1):mean():item()
    assert.is_true(math.abs(frac - 0.0455) < 0.005, frac)
  end)
  it("std 0 gives the mean exactly", function()
    local x = bbb.randn({100}, 1.5, 0, bbb.Generator(1))
    assert.are.equal(0, max_abs_diff(x, bbb.full({100}, 1.5)))
  end)
  it("rand stays within [lo, hi) and fills it evenly", function()
    local lo, hi = -0.5, 0.25
    local x = bbb.rand({1000000}, lo, hi, bbb.Generator(8))
    assert.is_true(x:max():item() < hi)
    assert.is_true((-x):max():item() <= -lo)
    assert.is_true(math.abs(x:mean():item() - (lo + hi) / 2) < 0.002)
    -- variance of U(lo, hi) is (hi - lo)^2 / 12
    local var = (x - (lo + hi) / 2):square():mean():item()
    assert.is_true(math.abs(var - (hi - lo) ^ 2 / 12) < 0.001, var)
  end)
  it("rand with a tiny interval never returns hi", function()
    local x = bbb.rand({100000}, 1, 1 + 2^-20, bbb.Generator(4))
    assert.is_true(x:max():item() < 1 + 2^-20)
    assert.is_true((-x):max():item() <= -1)
  end)
end)

describe("dropout_mask", function()
  it("is rand(sizes, 0, 1, gen):gt(p) * (1 / (1 - p)) bit for bit, and leaves the generator where it would", function()
    for _, p in ipairs { 0, 1e-7, 0.2, 0.5, 0.9, 1 - 2^-20 } do
      for _, shape in ipairs { { 1 }, { 7 }, { 128, 400 }, { 3, 5, 1201 } } do
        local g1, g2 = bbb.Generator(5), bbb.Generator(5)
        local a = bbb.rand(shape, 0, 1, g1):gt(p) * (1 / (1 - p))
        local b = bbb.dropout_mask(shape, p, g2)
        assert.are.same(a:size(), b:size())
        assert.are.equal(0, max_abs_diff(a, b))
        assert.are.equal(select(2, g1:state()), select(2, g2:state()))
      end
    end
  end)
  it("keeps 1 - p of the entries at 1 / (1 - p), the same on 1 and 2 threads", function()
    local a = with_threads(1, function() return bbb.dropout_mask({ 1000001 }, 0.3, bbb.Generator(8)) end)
    local b = with_threads(2, function() return bbb.dropout_mask({ 1000001 }, 0.3, bbb.Generator(8)) end)
    assert.are.equal(0, max_abs_diff(a, b))
    local kept = a:gt(0):sum():item() / 1000001
    assert.is_true(math.abs(kept - 0.7) < 0.002)   -- 5 standard errors
    assert.is_true(math.abs(a:max():item() - 1 / 0.7) < 1e-6)
  end)
  it("refuses p outside [0, 1) and sizes not in a table", function()
    for _, p in ipairs { 1, -0.1, 0 / 0, 2 } do
      local ok, err = pcall(bbb.dropout_mask, { 2 }, p)
      assert.is_false(ok)
      assert.truthy(err:find("bbb.dropout_mask: argument 2 (p)", 1, true), err)
    end
    local ok, err = pcall(bbb.dropout_mask, 2, 0.1)
    assert.is_false(ok)
    assert.truthy(err:find("argument 1 (sizes)", 1, true), err)
  end)
end)

describe("rand_rows", function()
  -- the mapping the replay buffer made in Lua before: the row numbers of the
  -- recorded bandit runs
  local function in_lua(k, n, g)
    local u = bbb.rand({ k }, 0, 1, g):totable()
    for i = 1, k do
      local v = u[i] * n // 1 + 1
      u[i] = v > n and n or v
    end
    return u
  end

  it("is floor(n u) + 1 of rand's u, taken in double, row for row, and leaves the generator where rand would", function()
    for _, n in ipairs { 1, 2, 3, 64, 4095, 4096, 99999, 100000, 2 ^ 24 // 1 } do
      local g1, g2 = bbb.Generator(11), bbb.Generator(11)
      local want, got = in_lua(20000, n, g1), bbb.rand_rows(20000, n, g2):totable()
      local lo, hi = math.huge, -math.huge
      for i = 1, #want do
        assert.are.equal(want[i], got[i])
        lo, hi = math.min(lo, got[i]), math.max(hi, got[i])
      end
      assert.is_true(lo >= 1 and hi <= n, n)
      assert.are.equal(select(2, g1:state()), select(2, g2:state()))
    end
    assert.are.equal(0, bbb.rand_rows(0, 5):numel())
  end)

  it("reaches row 1 and row n and nothing outside them", function()
    local g = bbb.Generator(3)
    local t = bbb.rand_rows(1000000, 1000, g):totable()
    local seen = {}
    for _, v in ipairs(t) do seen[v] = true end
    assert.is_true(seen[1] and seen[1000] and not seen[0] and not seen[1001])
  end)

  it("refuses k below 0, n outside [1, 2^24] and non-integers", function()
    for _, case in ipairs { { -1, 5, "argument 1 (k)" }, { 3, 0, "argument 2 (n)" }, { 3, 2 ^ 24 + 1, "argument 2 (n)" },
                            { 2.5, 3, "argument 1 (k)" }, { 2, 3.5, "argument 2 (n)" } } do
      local ok, err = pcall(bbb.rand_rows, case[1], case[2])
      assert.is_false(ok)
      assert.truthy(err:find("bbb.rand_rows: " .. case[3], 1, true), err)
    end
  end)
end)

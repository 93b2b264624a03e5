-- Matrix products: OpenBLAS's, cut into tiles by shape, so that every op
-- built on a product gives the same bits on 1 and 2 threads, forward and
-- backward; the time they take (bbb.core.gemm_clock); and the environment
-- a run's bits depend on (bbb.core.environment), recorded in checkpoints.
-- tests/c/test_gemm.c checks the tiles against cblas_sgemm itself.
local bbb = require "bbb"
local helpers = require "helpers"
local run, has = helpers.run, helpers.has

local gen = bbb.Generator(77)

-- The float32 bits of every entry, NaNs as one value.
local function bits(t)
  local out = {}
  for i, v in ipairs(t:reshape{ t:numel() }:totable()) do
    out[i] = v ~= v and "nan" or string.pack("<f", v)
  end
  return out
end

-- f() on 1 and on 2 threads; returns what it gave on each.
local function on_threads(f)
  local got = {}
  for _, n in ipairs { 1, 2 } do
    helpers.with_threads(n, function() got[n] = f() end)
  end
  return got
end

-- The bits of a forward result and of the inputs' gradients.
local function forward_backward(make_inputs, op)
  return function()
    local inputs = make_inputs()
    local y = op(table.unpack(inputs))
    ;(y * y):sum():backward()
    local out = { bits(y) }
    for _, x in ipairs(inputs) do out[#out + 1] = bits(x.grad) end
    return out
  end
end

local function rand(shape, relu)
  local t = bbb.randn(shape, 0, 1, gen)
  return relu and t:relu() or t
end

describe("products give the same bits on 1 and 2 threads", function()
  it("in matmul forward and backward, every transpose, past OpenBLAS's blocks", function()
    local shapes = { { 64, 100, 119 }, { 100, 119, 64 }, { 1, 100, 64 }, { 64, 1, 100 },
                     { 37, 350, 45 }, { 30, 20, 700 }, { 13, 17, 9 }, { 300, 257, 40 } }
    for _, s in ipairs(shapes) do
      local m, n, k = s[1], s[2], s[3]
      for _, f in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
        local a0 = f[1] and rand({ k, m }, true) or rand({ m, k }, true)
        local b0 = f[2] and rand({ n, k }) or rand({ k, n })
        local got = on_threads(forward_backward(function()
          return { a0:clone():requires_grad(true), b0:clone():requires_grad(true) }
        end, function(a, b) return bbb.matmul(a, b, f[1], f[2]) end))
        local what = ("%dx%dx%d, transposes %s %s"):format(m, n, k, tostring(f[1]), tostring(f[2]))
        assert.are.same(got[1], got[2], what)
      end
    end
  end)

  it("in linear with a bias", function()
    local x0, w0, b0 = rand({ 270, 119 }, true), rand({ 100, 119 }), rand({ 100 })
    local got = on_threads(forward_backward(function()
      return { x0:clone():requires_grad(true), w0:clone():requires_grad(true), b0:clone():requires_grad(true) }
    end, bbb.linear))
    assert.are.same(got[1], got[2])
  end)

  it("in conv2d forward and backward", function()
    local x0, w0 = rand({ 9, 2, 13, 11 }, true), rand({ 6, 2, 3, 3 })
    local got = on_threads(forward_backward(function()
      return { x0:clone():requires_grad(true), w0:clone():requires_grad(true) }
    end, function(x, w) return bbb.conv2d(x, w) end))
    assert.are.same(got[1], got[2])
  end)

  it("with infinities and NaNs among the inputs, which reach the output", function()
    local a, b = rand({ 200, 30 }, true), rand({ 30, 40 })
    a:set(1, 2, 0 / 0)
    b:set(3, 4, math.huge)
    b:set(5, 6, -math.huge)
    local got = on_threads(function() return bits(bbb.matmul(a, b)) end)
    assert.are.same(got[1], got[2])
    local nans = 0
    for _, v in ipairs(got[1]) do if v == "nan" then nans = nans + 1 end end
    assert.is_true(nans >= 40, nans)   -- row 1 is all NaN, and more where an infinity met a zero
  end)

  it("and stay within a chain of roundings of the float64 product", function()
    local a = bbb.rand({ 8, 300 }, -1, 1, gen) * 1e15
    local b = bbb.rand({ 300, 5 }, -1, 1, gen) * 1e-20
    local c = bbb.matmul(a, b):totable()
    local at, bt = a:totable(), b:totable()
    for i = 1, 8 do
      for j = 1, 5 do
        local s, mag = 0, 0
        for l = 1, 300 do s, mag = s + at[i][l] * bt[l][j], mag + math.abs(at[i][l] * bt[l][j]) end
        assert.is_true(math.abs(c[i][j] - s) <= 2 * 302 * 2 ^ -24 * mag, ("%g vs %g"):format(c[i][j], s))
      end
    end
  end)
end)

describe("bbb.core.environment", function()
  it("names OpenBLAS's build and kernels, and every checkpoint records them", function()
    local env = bbb.core.environment()
    assert.truthy(env.openblas:find("OpenBLAS", 1, true), env.openblas)
    assert.is_true(#env.core > 0)
    local path = os.tmpname()
    bbb.save(path, bbb.nn.Linear(2, 3))
    local f = assert(io.open(path, "rb"))
    local bytes = f:read("a")
    f:close()
    os.remove(path)
    local n = string.unpack("<I8", bytes)
    local header = require("bbb.json").decode(bytes:sub(9, 8 + n))
    assert.are.equal(env.openblas, header.__metadata__.openblas)
    assert.are.equal(env.core, header.__metadata__.openblas_core)
  end)

  it("leaves the products' kinds and bench hooks out of bbb.*", function()
    for _, k in ipairs { "gemm_kernel", "gemm_own_kernel", "gemm_clock" } do
      assert.is_nil(rawget(bbb, k), k)
    end
    assert.is_nil(bbb.core.gemm_kernel)
  end)
end)

describe("bbb.core.gemm_clock", function()
  after_each(function() bbb.core.gemm_clock(false) end)

  it("counts the products made while it runs, and their time, from zero at each start", function()
    local a, b = rand({ 64, 100 }), rand({ 100, 80 })
    bbb.core.gemm_clock(true)
    bbb.matmul(a, b)
    bbb.matmul(a, b)
    local sec, calls = bbb.core.gemm_clock()
    assert.are.equal(2, calls)
    assert.is_true(sec > 0, sec)
    -- a linear layer's forward is one product, and its backward one more for W's gradient
    local x = rand({ 16, 30 })
    local w = rand({ 20, 30 }):requires_grad(true)
    bbb.core.gemm_clock(true)
    bbb.linear(x, w):sum():backward()
    local _, n = bbb.core.gemm_clock()
    assert.is_true(n >= 2, n)
  end)

  it("holds still when stopped, and is off until started", function()
    local a, b = rand({ 10, 10 }), rand({ 10, 10 })
    bbb.core.gemm_clock(true)
    bbb.matmul(a, b)
    local sec, calls = bbb.core.gemm_clock(false)
    assert.are.equal(1, calls)
    bbb.matmul(a, b)
    local sec2, calls2 = bbb.core.gemm_clock()
    assert.are.equal(1, calls2)
    assert.are.equal(sec, sec2)
    helpers.errors_with(function() bbb.core.gemm_clock("yes") end, "boolean expected")
  end)
end)

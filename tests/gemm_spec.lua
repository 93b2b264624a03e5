-- bbb.gemm_kernel: the code that forms matrix products. "haswell" (gemm.c's
-- own kernel) gives the bits of "reference" (plain loops) through every op
-- built on a product, forward and backward; tests/c/test_gemm.c checks both
-- against OpenBLAS's own Haswell kernels.
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

-- f() under each kind, in turn; returns what it gave under each.
local function under(kinds, f)
  local got = {}
  for _, kind in ipairs(kinds) do
    local old = bbb.gemm_kernel(kind)
    local ok, res = pcall(f)
    bbb.gemm_kernel(old)
    assert(ok, res)
    got[kind] = res
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

describe("bbb.gemm_kernel", function()
  after_each(function() bbb.gemm_kernel("openblas") end)

  it("is openblas by default, and returns the kind it replaces", function()
    assert.are.equal("openblas", bbb.gemm_kernel())
    assert.are.equal("openblas", bbb.gemm_kernel("haswell"))
    assert.are.equal("haswell", bbb.gemm_kernel("reference"))
    assert.are.equal("reference", bbb.gemm_kernel())
  end)

  it("names the kinds when given another", function()
    helpers.errors_with(function() bbb.gemm_kernel("fast") end,
      'bbb.gemm_kernel: argument 1 (kind): expected one of "openblas", "haswell", "reference"')
    helpers.errors_with(function() bbb.gemm_kernel(2) end, "argument 1 (kind)")
    assert.are.equal("openblas", bbb.gemm_kernel())
  end)

  it("says whether haswell runs on its own kernel here: where the CPU has AVX2 and FMA", function()
    assert.are.equal(helpers.avx2_fma(), bbb.gemm_own_kernel())
  end)

  it("takes its kind from BBB_GEMM, and refuses a wrong one before any work", function()
    local status, out = run([[-e "print(require('bbb').gemm_kernel())"]], "BBB_GEMM=haswell")
    assert.are.equal(0, status, out)
    has(out, "haswell")
    status, out = run([[-e "print('ran')"]], "BBB_GEMM=fast")
    assert.are_not.equal(0, status, out)
    has(out, 'BBB_GEMM is "fast"; it must be "openblas", "haswell" or "reference"')
    assert.falsy(out:find("ran", 1, true), out)
  end)
end)

describe("the haswell kernel gives the reference's bits", function()
  local KINDS = { "haswell", "reference" }

  it("in matmul forward and backward, every transpose, past the 320-wide blocks", function()
    local shapes = { { 64, 100, 119 }, { 100, 119, 64 }, { 1, 100, 64 }, { 64, 1, 100 },
                     { 37, 350, 45 }, { 30, 20, 700 }, { 13, 17, 9 } }
    for _, s in ipairs(shapes) do
      local m, n, k = s[1], s[2], s[3]
      for _, f in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
        local a0 = f[1] and rand({ k, m }, true) or rand({ m, k }, true)
        local b0 = f[2] and rand({ n, k }) or rand({ k, n })
        local got = under(KINDS, forward_backward(function()
          return { a0:clone():requires_grad(true), b0:clone():requires_grad(true) }
        end, function(a, b) return bbb.matmul(a, b, f[1], f[2]) end))
        local what = ("%dx%dx%d, transposes %s %s"):format(m, n, k, tostring(f[1]), tostring(f[2]))
        assert.are.same(got.reference, got.haswell, what)
      end
    end
  end)

  it("in linear with a bias, on 1 and 2 threads", function()
    for _, threads in ipairs { 1, 2 } do
      helpers.with_threads(threads, function()
        local x0, w0, b0 = rand({ 70, 119 }, true), rand({ 100, 119 }), rand({ 100 })
        local got = under(KINDS, forward_backward(function()
          return { x0:clone():requires_grad(true), w0:clone():requires_grad(true),
                   b0:clone():requires_grad(true) }
        end, bbb.linear))
        assert.are.same(got.reference, got.haswell)
      end)
    end
  end)

  it("in conv2d forward and backward", function()
    local x0, w0 = rand({ 3, 2, 13, 11 }, true), rand({ 6, 2, 3, 3 })
    local got = under(KINDS, forward_backward(function()
      return { x0:clone():requires_grad(true), w0:clone():requires_grad(true) }
    end, function(x, w) return bbb.conv2d(x, w) end))
    assert.are.same(got.reference, got.haswell)
  end)

  it("with infinities and NaNs among the inputs", function()
    local a, b = rand({ 20, 30 }, true), rand({ 30, 40 })
    a:set(1, 2, 0 / 0)
    b:set(3, 4, math.huge)
    b:set(5, 6, -math.huge)
    local got = under(KINDS, function() return bits(bbb.matmul(a, b)) end)
    assert.are.same(got.reference, got.haswell)
    -- a zero of a times an infinity of b is a NaN: no zero was skipped
    local nans = 0
    for _, v in ipairs(got.haswell) do if v == "nan" then nans = nans + 1 end end
    assert.is_true(nans > 40, nans)
  end)

  it("and stays within a chain of roundings of the float64 product", function()
    local a = bbb.rand({ 8, 300 }, -1, 1, gen) * 1e15
    local b = bbb.rand({ 300, 5 }, -1, 1, gen) * 1e-20
    local old = bbb.gemm_kernel("haswell")
    local c = bbb.matmul(a, b):totable()
    bbb.gemm_kernel(old)
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

describe("bbb.gemm_clock", function()
  after_each(function() bbb.gemm_clock(false) end)

  it("counts the products made while it runs, and their time, from zero at each start", function()
    local a, b = rand({ 64, 100 }), rand({ 100, 80 })
    bbb.gemm_clock(true)
    bbb.matmul(a, b)
    bbb.matmul(a, b)
    local sec, calls = bbb.gemm_clock()
    assert.are.equal(2, calls)
    assert.is_true(sec > 0, sec)
    -- a linear layer's forward is one product, and its backward one more for W's gradient
    local x = rand({ 16, 30 })
    local w = rand({ 20, 30 }):requires_grad(true)
    bbb.gemm_clock(true)
    bbb.linear(x, w):sum():backward()
    local _, n = bbb.gemm_clock()
    assert.is_true(n >= 2, n)
  end)

  it("holds still when stopped, and is off until started", function()
    local a, b = rand({ 10, 10 }), rand({ 10, 10 })
    bbb.gemm_clock(true)
    bbb.matmul(a, b)
    local sec, calls = bbb.gemm_clock(false)
    assert.are.equal(1, calls)
    bbb.matmul(a, b)
    local sec2, calls2 = bbb.gemm_clock()
    assert.are.equal(1, calls2)
    assert.are.equal(sec, sec2)
    helpers.errors_with(function() bbb.gemm_clock("yes") end, "boolean expected")
    helpers.errors_with(function() bbb.gemm_clock(true, 1) end, "boolean expected")
  end)

  -- over l, the nonzeros in column l of a times n, and times the nonzeros
  -- in row l of b (a: m x k, b: k x n, as tables of rows)
  local function terms(a, b)
    local a_side, both = 0, 0
    for l = 1, #b do
      local ca, cb = 0, 0
      for i = 1, #a do if a[i][l] ~= 0 then ca = ca + 1 end end
      for j = 1, #b[l] do if b[l][j] ~= 0 then cb = cb + 1 end end
      a_side, both = a_side + ca * #b[l], both + ca * cb
    end
    return a_side, both
  end
  -- a rows x cols tensor with about frac of its entries zero
  local function holey(rows, cols, frac)
    return bbb.relu(bbb.rand({ rows, cols }, -1, 1, gen) - (2 * frac - 1))
  end

  it("counts, when asked, the terms with op(a)'s and with both factors nonzero, through every transpose", function()
    local a, b = holey(13, 37, 0.7), holey(37, 11, 0.5)
    bbb.gemm_clock(true, true)
    bbb.matmul(a, b)
    local _, calls, na, n = bbb.gemm_clock(false)
    assert.are.equal(1, calls)
    local want_a, want = terms(a:totable(), b:totable())
    assert.is_true(want > 0 and want < want_a and want_a < 13 * 37 * 11, want)
    assert.are.equal(want_a, na)
    assert.are.equal(want, n)
    -- linear: x w^T forward; g w and g^T x backward (g = the gradient of a sum of squares)
    local x, w = holey(9, 21, 0.6), holey(17, 21, 0.4):requires_grad(true)
    bbb.gemm_clock(true, true)
    local y = bbb.linear(x, w)
    local _, _, fwd_a, fwd = bbb.gemm_clock()
    local want_fa, want_f = terms(x:totable(), w:t():totable())
    assert.are.equal(want_fa, fwd_a)
    assert.are.equal(want_f, fwd)
    bbb.gemm_clock(true, true)
    local z = bbb.relu(y)   -- zeros in the gradient too
    ;(z * z):sum():backward()
    local _, calls2, bwd_a, bwd = bbb.gemm_clock(false)
    local g = (z * 2):totable()
    assert.are.equal(1, calls2)   -- x needs no gradient: W's alone
    local want_ba, want_b = terms(bbb.tensor(g):t():totable(), x:totable())
    assert.are.equal(want_ba, bwd_a)
    assert.are.equal(want_b, bwd)
    -- not asked: no count
    bbb.gemm_clock(true)
    bbb.matmul(a, b)
    local _, _, no_a, no = bbb.gemm_clock()
    assert.is_nil(no_a)
    assert.is_nil(no)
  end)
end)

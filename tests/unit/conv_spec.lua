-- conv2d, max_pool2d, avg_pool2d and flatten: finite-difference gradients,
-- a float64 reference for the forward pass, the batch tiling, threads, and
-- the errors for shapes that do not fit.
local bbb = require "bbb"
local gradcheck = bbb.testing.gradcheck

local gen = bbb.Generator(27)
local function param(shape, lo, hi)
  return bbb.rand(shape, lo or -1, hi or 1, gen):requires_grad(true)
end
local function check(fn, inputs, opts)
  local ok, report = gradcheck(fn, inputs, opts)
  assert(ok, report)
end

-- An option as a pair {height, width}.
local function pair(v, d) if v == nil then return { d, d } end return type(v) == "table" and v or { v, v } end

-- The convolution by its definition, in Lua's doubles.
local function conv_ref(x, w, b, o)
  o = o or {}
  local st, pd, dl, G = pair(o.stride, 1), pair(o.padding, 0), pair(o.dilation, 1), o.groups or 1
  local B, C, H, W = table.unpack(x:size())
  local O, Cg, kh, kw = table.unpack(w:size())
  local oh = (H + 2 * pd[1] - dl[1] * (kh - 1) - 1) // st[1] + 1
  local ow = (W + 2 * pd[2] - dl[2] * (kw - 1) - 1) // st[2] + 1
  local xv, wv = x:view(-1), w:view(-1)
  local out, mag = {}, {}
  for n = 0, B - 1 do
    for oc = 0, O - 1 do
      local g = oc // (O // G)
      for oy = 0, oh - 1 do
        for ox = 0, ow - 1 do
          local s, m = b and b[oc + 1] or 0, b and math.abs(b[oc + 1]) or 0
          for cl = 0, Cg - 1 do
            local c = g * Cg + cl
            for i = 0, kh - 1 do
              for j = 0, kw - 1 do
                local iy, ix = oy * st[1] - pd[1] + i * dl[1], ox * st[2] - pd[2] + j * dl[2]
                if iy >= 0 and iy < H and ix >= 0 and ix < W then
                  local p = xv[((n * C + c) * H + iy) * W + ix + 1] * wv[((oc * Cg + cl) * kh + i) * kw + j + 1]
                  s, m = s + p, m + math.abs(p)
                end
              end
            end
          end
          out[#out + 1], mag[#mag + 1] = s, m
        end
      end
    end
  end
  return out, mag, { B, O, oh, ow }
end

local CASES = {
  { "odd sizes", { 2, 3, 7, 5 }, { 4, 3, 3, 2 }, {} },
  { "stride 2 and padding 1", { 2, 2, 7, 6 }, { 3, 2, 3, 3 }, { stride = 2, padding = 1 } },
  { "pairs: stride {1, 3}, padding {2, 0}", { 1, 2, 5, 8 }, { 2, 2, 3, 2 }, { stride = { 1, 3 }, padding = { 2, 0 } } },
  { "dilation 2", { 2, 1, 8, 7 }, { 2, 1, 3, 3 }, { dilation = 2, padding = 1 } },
  { "groups 2", { 2, 4, 5, 5 }, { 6, 2, 3, 3 }, { groups = 2, padding = 1 } },
  { "depthwise, 1x1 and a 1-pixel output", { 1, 3, 3, 3 }, { 3, 1, 3, 3 }, { groups = 3 } },
}

describe("conv2d", function()
  for _, c in ipairs(CASES) do
    it("gradcheck in x, w and b: " .. c[1], function()
      local x, w, b = param(c[2]), param(c[3]), param({ c[3][1] })
      -- conv2d is linear in each argument: a wide step has no truncation
      -- error and less float32 rounding
      check(function(a, k, bias) return bbb.conv2d(a, k, bias, c[4]) end, { x, w, b }, { eps = 0.05 })
    end)
  end
  it("gradcheck without a bias, options as the third argument", function()
    check(function(a, k) return bbb.conv2d(a, k, { stride = 2 }) end, { param({ 1, 2, 5, 5 }), param({ 3, 2, 2, 2 }) },
      { eps = 0.05 })
  end)
  it("matches a float64 loop, at ordinary and extreme magnitudes", function()
    for _, scale in ipairs { 1, 1e15, 1e-15 } do
      for _, c in ipairs(CASES) do
        local x = bbb.randn(c[2], 0, scale, gen)
        local w = bbb.randn(c[3], 0, scale, gen)
        local b = bbb.randn({ c[3][1] }, 0, scale * scale, gen)
        local ref, mag, shape = conv_ref(x, w, b, c[4])
        local y = bbb.conv2d(x, w, b, c[4])
        assert.are.same(shape, { table.unpack(y:size()) })
        local yv = y:view(-1)
        for i = 1, #ref do
          -- float32 rounding of each product and of the running sum
          local tol = 4e-7 * mag[i] * 12 + 1e-45
          assert(math.abs(yv[i] - ref[i]) <= tol,
            ("%s, scale %g, element %d: %.9g vs %.9g"):format(c[1], scale, i, yv[i], ref[i]))
        end
      end
    end
  end)
  it("gives the same numbers whatever the workspace cap (tiles of 1 image to the whole batch)", function()
    local x, w, b = param({ 5, 3, 9, 9 }), param({ 4, 3, 3, 3 }), param({ 4 })
    local function run(cap)
      local old = bbb.conv_workspace(cap)
      x:set_grad(nil); w:set_grad(nil); b:set_grad(nil)
      local y = bbb.conv2d(x, w, b, { padding = 1 })
      y:square():sum():backward()
      bbb.conv_workspace(old)
      return y, x.grad:clone(), w.grad:clone(), b.grad:clone()
    end
    local a = { run(1) }
    local z = { run(1 << 30) }
    for k = 1, 4 do
      assert((a[k] - z[k]):abs():max():item() <= 1e-5 * (1 + z[k]:abs():max():item()), "output " .. k)
    end
    assert.has_error(function() bbb.conv_workspace(0) end,
      "conv_workspace: argument 1 (bytes): must be positive, got 0")
  end)
  it("gives the same bits on 1 and 2 threads, forward and backward", function()
    local function run(threads)
      local old = bbb.get_num_threads()
      bbb.set_num_threads(threads)
      local g = bbb.Generator(3)
      local x = bbb.randn({ 64, 6, 14, 14 }, 0, 1, g):requires_grad(true)
      local w = bbb.randn({ 16, 6, 5, 5 }, 0, 0.1, g):requires_grad(true)
      local b = bbb.randn({ 16 }, 0, 0.1, g):requires_grad(true)
      local y = bbb.conv2d(x, w, b, { padding = 2 })
      local p = bbb.max_pool2d(y, 2)
      local q = bbb.avg_pool2d(p, 3, { stride = 2, padding = 1 })
      local loss = (q * q):sum()
      loss:backward()
      bbb.set_num_threads(old)
      return { y:totable(), q:totable(), x.grad:totable(), w.grad:totable(), b.grad:totable() }
    end
    local one, two = run(1), run(2)
    for k = 1, #one do assert.are.same(one[k], two[k]) end
  end)
  it("takes an empty batch", function()
    local w = param({ 4, 3, 3, 3 })
    local y = bbb.conv2d(bbb.zeros(0, 3, 5, 5):requires_grad(true), w, { padding = 1 })
    assert.are.same({ 0, 4, 5, 5 }, { table.unpack(y:size()) })
    y:backward(bbb.zeros(0, 4, 5, 5))
    assert.are.equal(0, w.grad:abs():max():item())
  end)
  it("names the op and the mismatch for shapes that do not fit", function()
    local x = bbb.zeros(2, 3, 7, 6)
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 2, 3, 3)) end,
      "bbb.conv2d: input (2, 3, 7, 6) has 3 channels, weight (4, 2, 3, 3) expects 2 (2 per group x 1 groups)")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 3, 9, 3)) end,
      "bbb.conv2d: kernel 9x3 (dilation 1x1) is larger than the padded input 7x6 (input (2, 3, 7, 6), "
      .. "padding 0x0): the output would be empty")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 3, 3, 3), { dilation = 4 }) end,
      "bbb.conv2d: kernel 3x3 (dilation 4x4) is larger than the padded input 7x6 (input (2, 3, 7, 6), "
      .. "padding 0x0): the output would be empty")
    assert.has_error(function() bbb.conv2d(bbb.zeros(2, 3, 0, 6), bbb.zeros(4, 3, 1, 1)) end,
      "bbb.conv2d: input (2, 3, 0, 6) has an empty plane")
    assert.has_error(function() bbb.conv2d(bbb.zeros(2, 3, 6), bbb.zeros(4, 3, 1, 1)) end,
      "bbb.conv2d: input must be 4-d (batch, channels, height, width), got (2, 3, 6)")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 3, 3)) end,
      "bbb.conv2d: weight must be 4-d (out, in / groups, kH, kW), got (4, 3, 3)")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 1, 3, 3), { groups = 2 }) end,
      "bbb.conv2d: 3 input and 4 output channels must be positive multiples of groups = 2")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 3, 3, 3), bbb.zeros(5)) end,
      "bbb.conv2d: bias (5) does not match weight (4, 3, 3, 3) (one per output channel)")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 3, 3, 3), { stride = 0 }) end,
      "bbb.conv2d: argument 3 (options): stride must be an integer >= 1 or a pair of them, got 0")
    assert.has_error(function() bbb.conv2d(x, bbb.zeros(4, 3, 3, 3), nil, { padding = { 1, -1 } }) end,
      "bbb.conv2d: argument 4 (options): padding must be an integer >= 0 or a pair of them, got {1, -1}")
  end)
end)

describe("pooling", function()
  for _, c in ipairs {
    { "2x2", { 2, 3, 6, 6 }, 2, nil },
    { "3x3 stride 2 padding 1 on odd sizes", { 1, 2, 7, 5 }, 3, { stride = 2, padding = 1 } },
    { "{2, 3} stride {1, 2}", { 2, 1, 5, 7 }, { 2, 3 }, { stride = { 1, 2 } } },
  } do
    it("gradcheck of max_pool2d and avg_pool2d: " .. c[1], function()
      check(function(x) return bbb.max_pool2d(x, c[3], c[4]) end, { param(c[2]) })
      check(function(x) return bbb.avg_pool2d(x, c[3], c[4]) end, { param(c[2]) })
    end)
  end
  it("gradcheck of the 2x2 max on odd sizes, fast and general", function()
    for _, fast in ipairs { true, false } do
      local old = bbb.core.pool_fast_path(fast)
      check(function(x) return bbb.max_pool2d(x, 2) end, { param({ 2, 2, 5, 7 }) })
      bbb.core.pool_fast_path(old)
    end
  end)

  -- The bits of every element, so NaNs and signed zeros compare too.
  local function bits(t)
    local out = {}
    for i, v in ipairs(t:view(-1):totable()) do out[i] = string.pack("<f", v) end
    return out
  end

  it("gives the 2x2 fast path's bits with the general loops: odd sizes, padding, ties, NaN, -0", function()
    local g = bbb.Generator(5)
    for _, c in ipairs {
      { { 2, 3, 7, 9 }, 2, nil }, { { 1, 2, 6, 6 }, 2, nil }, { { 3, 1, 5, 4 }, 2, nil },
      { { 1, 1, 2, 3 }, 2, nil }, { { 2, 2, 7, 5 }, 2, { padding = 1 } },
      { { 2, 2, 8, 6 }, 2, { stride = 1 } }, { { 1, 3, 9, 8 }, 3, { stride = 2, padding = 1 } },
    } do
      -- values from {-1, 0, 1}, so most windows tie; -0 ties +0; a few NaNs
      local v = bbb.rand(c[1], 0, 3, g):view(-1):totable()
      for i = 1, #v do
        v[i] = i % 7 == 0 and -0.0 or i % 23 == 0 and 0 / 0 or math.floor(v[i]) - 1
      end
      local x0 = bbb.tensor(v):reshape(c[1])
      local y_shape = bbb.max_pool2d(x0, c[2], c[3]):size()
      local seed = bbb.randn(y_shape, 0, 1, g)
      local sv = seed:view(-1):totable()
      for i = 1, #sv, 5 do sv[i] = -0.0 end
      seed = bbb.tensor(sv):reshape(y_shape)
      local st = bbb.randn(c[1], 0, 1, g):view(-1):totable()
      for i = 1, #st do st[i] = i % 3 == 0 and -0.0 or i % 3 == 1 and 0.0 or st[i] end
      local start = bbb.tensor(st):reshape(c[1])
      local function run(fast)
        local old = bbb.core.pool_fast_path(fast)
        local x = x0:clone():requires_grad(true)
        local y = bbb.max_pool2d(x, c[2], c[3])
        local plain = bbb.no_grad(function() return bbb.max_pool2d(x, c[2], c[3]) end)
        y:backward(seed)
        local first = bits(x.grad)
        -- into a gradient that holds values, -0 and +0: adds, and leaves the rest as it was
        x:set_grad(start)
        bbb.max_pool2d(x, c[2], c[3]):backward(seed)
        bbb.core.pool_fast_path(old)
        return { bits(y), bits(plain), first, bits(x.grad) }
      end
      local fast, general = run(true), run(false)
      for k = 1, 4 do
        assert.are.same(general[k], fast[k], ("case %s, output %d"):format(table.concat(c[1], "x"), k))
      end
      assert.are.same(fast[1], fast[2])
    end
    assert.has_error(function() bbb.core.pool_fast_path(1) end,
      "pool_fast_path: argument 1 (on): expected a boolean, got number")
  end)

  it("takes the gradient to the first maximum and propagates NaN, on the 2x2 fast path", function()
    local nan = 0 / 0
    local x = bbb.tensor{ { { { 1, 3, 3, 0, 5 }, { 3, 2, 1, nan, 9 }, { 7, 7, 7, 7, 9 } } } }:requires_grad(true)
    local y = bbb.max_pool2d(x, 2)
    local t = y:totable()[1][1][1]
    assert.are.equal(3, t[1])
    assert.is_true(t[2] ~= t[2])
    y:backward(bbb.tensor{ { { { 10, 20 } } } })
    assert.are.same({ { { { 0, 10, 0, 0, 0 }, { 0, 0, 0, 20, 0 }, { 0, 0, 0, 0, 0 } } } }, x.grad:totable())
  end)

  it("computes maxima and padded means", function()
    local x = bbb.tensor{ { { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } } } }
    assert.are.same({ { { { 5, 6 }, { 8, 9 } } } }, bbb.max_pool2d(x, 2, { stride = 1 }):totable())
    -- padding 1: the corner window holds 1, 2, 4, 5 and five zeros
    local a = bbb.avg_pool2d(x, 3, { stride = 2, padding = 1 }):totable()
    assert.are.near(12 / 9, a[1][1][1][1], 1e-6)
    assert.are.near(28 / 9, a[1][1][2][2], 1e-6)
  end)
  it("rejects bad windows", function()
    local x = bbb.zeros(1, 1, 4, 4)
    assert.has_error(function() bbb.max_pool2d(x, 0) end,
      "bbb.max_pool2d: argument 2 (kernel_size): the kernel size must be an integer >= 1 or a pair of them, got 0")
    assert.has_error(function() bbb.avg_pool2d(x, 2, { padding = 2 }) end,
      "bbb.avg_pool2d: padding 2 must be at most half the kernel size 2")
    assert.has_error(function() bbb.max_pool2d(x, 5) end,
      "bbb.max_pool2d: kernel 5x5 (dilation 1x1) is larger than the padded input 4x4 (input (1, 1, 4, 4), "
      .. "padding 0x0): the output would be empty")
    assert.has_error(function() bbb.max_pool2d(bbb.zeros(4, 4), 2) end,
      "bbb.max_pool2d: input must be 4-d (batch, channels, height, width), got (4, 4)")
  end)
end)

describe("conv2d_local and conv2d_flipout (the fused Bayesian convolutions)", function()
  local core = bbb.core
  local function signs(shape, g) return bbb.rand(shape, 0, 1, g):lt(0.5) * 2 - 1 end
  -- a wider step: the loss sums a hundred outputs, and float32 central
  -- differences with the default 1e-3 are noisy at the 1e-3 level there
  local FD = { eps = 1e-2 }
  local function outsize(x, w, o)
    return bbb.no_grad(function() return bbb.conv2d(x, w, nil, o):size() end)
  end
  local function close(a, b, what)
    local err = (a - b):abs():max():item()
    assert(err <= 1e-5 * (1 + b:abs():max():item()), ("%s: off by %g"):format(what, err))
  end
  for _, c in ipairs {
    { "3x3 padding 1", { 3, 2, 6, 5 }, { 4, 2, 3, 3 }, { padding = 1 } },
    { "stride 2, dilation 2, odd sizes", { 2, 3, 9, 7 }, { 2, 3, 3, 2 }, { stride = 2, dilation = { 2, 1 } } },
    { "groups 2", { 2, 4, 5, 5 }, { 4, 2, 2, 3 }, { groups = 2, padding = { 1, 0 } } },
  } do
    it("equal the unfused ops and pass gradcheck: " .. c[1], function()
      local g = bbb.Generator(8)
      local x, mu = param(c[2]), param(c[3], -0.5, 0.5)
      local var, bm, bv = param(c[3], 0.1, 0.5), param({ c[3][1] }), param({ c[3][1] }, 0.1, 0.5)
      local eps = bbb.randn(outsize(x, mu, c[4]), 0, 1, g)
      local function loc(a, m, v, b1, b2)
        return core.conv2d_local(a, m, v, b1, b2, eps, c[4])
      end
      close(loc(x, mu, var, bm, bv), bbb.conv2d(x, mu, bm, c[4])
        + (bbb.conv2d(x:square(), var, bv, c[4]) + 1e-16):sqrt() * eps, "local")
      check(loc, { x, mu, var, bm, bv }, FD)
      check(function(a, m, v) return core.conv2d_local(a, m, v, nil, nil, eps, c[4]) end, { x, mu, var }, FD)
      local dw = param(c[3], -0.3, 0.3)
      local s_in, s_out = signs({ c[2][1], c[2][2] }, g), signs({ c[2][1], c[3][1], 1, 1 }, g)
      local function flip(a, m, d, b) return core.conv2d_flipout(a, m, d, b, s_in, s_out, c[4]) end
      close(flip(x, mu, dw, bm), bbb.conv2d(x, mu, bm, c[4])
        + bbb.conv2d(x * s_in:reshape { c[2][1], c[2][2], 1, 1 }, dw, nil, c[4]) * s_out, "flipout")
      check(flip, { x, mu, dw, bm }, FD)
      check(function(a, m, d) return flip(a, m, d, nil) end, { x, mu, dw }, FD)
    end)
  end

  it("give the same bits on 1 and 2 threads and any tiling, forward and backward", function()
    local function run(threads, cap)
      local old, oldcap = bbb.get_num_threads(), bbb.conv_workspace(cap)
      bbb.set_num_threads(threads)
      local g = bbb.Generator(4)
      local x = bbb.randn({ 37, 6, 12, 12 }, 0, 1, g):requires_grad(true)
      local mu = bbb.randn({ 8, 6, 5, 5 }, 0, 0.1, g):requires_grad(true)
      local w2 = bbb.rand({ 8, 6, 5, 5 }, 0, 0.01, g):requires_grad(true)
      local b1, b2 = bbb.randn({ 8 }, 0, 0.1, g):requires_grad(true), bbb.rand({ 8 }, 0, 0.01, g):requires_grad(true)
      local eps = bbb.randn({ 37, 8, 10, 10 }, 0, 1, g)
      local y1 = core.conv2d_local(x, mu, w2, b1, b2, eps, { padding = 1 })
      local y2 = core.conv2d_flipout(x, mu, w2, b1, signs({ 37, 6 }, g), signs({ 37, 8 }, g), { padding = 1 })
      ;((y1 * y1):sum() + (y2 * y1):sum()):backward()
      bbb.set_num_threads(old)
      bbb.conv_workspace(oldcap)
      return { y1:totable(), y2:totable(), x.grad:totable(), mu.grad:totable(), w2.grad:totable(),
               b1.grad:totable(), b2.grad:totable() }
    end
    local one, two = run(1, 1 << 22), run(2, 1 << 22)
    for k = 1, #one do assert.are.same(one[k], two[k], "output " .. k) end
    local small = run(2, 1)   -- one image per tile: the same values up to rounding
    for k = 1, #one do
      close(bbb.tensor(small[k]), bbb.tensor(one[k]), "tiling, output " .. k)
    end
  end)

  it("name the op and the mismatch", function()
    local x, w = bbb.zeros(2, 3, 5, 5), bbb.zeros(4, 3, 3, 3)
    local eps = bbb.zeros(2, 4, 3, 3)
    assert.has_error(function() core.conv2d_local(x, w, bbb.zeros(4, 3, 3, 2), nil, nil, eps) end,
      "bbb.conv2d_local: var (4, 3, 3, 2) does not match mu (4, 3, 3, 3)")
    assert.has_error(function() core.conv2d_local(x, w, w, bbb.zeros(4), nil, eps) end,
      "bbb.conv2d_local: give both bias_mu and bias_var or neither")
    assert.has_error(function() core.conv2d_local(x, w, w, nil, nil, bbb.zeros(2, 4, 3, 4)) end,
      "bbb.conv2d_local: eps (2, 4, 3, 4) must have the output's shape (2, 4, 3, 3)")
    assert.has_error(function() core.conv2d_local(x, w, w, nil, nil, bbb.zeros(2, 4, 3, 3):requires_grad(true)) end,
      "bbb.conv2d_local: eps is noise and takes no gradient; pass it detached")
    assert.has_error(function() core.conv2d_flipout(x, w, w, nil, bbb.zeros(2, 4), bbb.zeros(2, 4)) end,
      "bbb.conv2d_flipout: s_in (2, 4) must hold one sign per image and input channel (2 x 3, as (B, C) or (B, C, 1, 1))")
    assert.has_error(function() core.conv2d_flipout(x, w, w, nil, bbb.zeros(2, 3), bbb.zeros(3, 4)) end,
      "bbb.conv2d_flipout: s_out (3, 4) must hold one sign per image and output channel (2 x 4, as (B, C) or (B, C, 1, 1))")
    assert.has_error(function() core.conv2d_flipout(x, bbb.zeros(4, 3, 6, 3), bbb.zeros(4, 3, 6, 3), nil,
      bbb.zeros(2, 3), bbb.zeros(2, 4)) end,
      "bbb.conv2d_flipout: kernel 6x3 (dilation 1x1) is larger than the padded input 5x5 (input (2, 3, 5, 5), "
      .. "padding 0x0): the output would be empty")
    assert.has_error(function() core.conv2d_local(bbb.zeros(2, 2, 5, 5), w, w, nil, nil, eps) end,
      "bbb.conv2d_local: input (2, 2, 5, 5) has 2 channels, weight (4, 3, 3, 3) expects 3 (3 per group x 1 groups)")
    assert.has_error(function() core.conv2d_flipout(x, w, w, nil, bbb.zeros(2, 3)) end,
      "bbb.conv2d_flipout: argument 6 (s_out): expected a tensor, got nil")
  end)
end)

describe("flatten", function()
  it("merges the dimensions from start_dim on, and passes gradients", function()
    local x = param({ 2, 3, 4, 5 })
    assert.are.same({ 2, 60 }, { table.unpack(bbb.flatten(x):size()) })
    assert.are.same({ 2, 3, 20 }, { table.unpack(x:flatten(3):size()) })
    check(function(a) return bbb.flatten(a) * 2 end, { param({ 2, 2, 3 }) })
    assert.has_error(function() bbb.flatten(x, 5) end, "flatten: argument 2 (start_dim): must be an integer in 1..4, got 5")
  end)
end)

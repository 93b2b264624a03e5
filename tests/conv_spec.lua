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

describe("flatten", function()
  it("merges the dimensions from start_dim on, and passes gradients", function()
    local x = param({ 2, 3, 4, 5 })
    assert.are.same({ 2, 60 }, { table.unpack(bbb.flatten(x):size()) })
    assert.are.same({ 2, 3, 20 }, { table.unpack(x:flatten(3):size()) })
    check(function(a) return bbb.flatten(a) * 2 end, { param({ 2, 2, 3 }) })
    assert.has_error(function() bbb.flatten(x, 5) end, "flatten: argument 2 (start_dim): must be an integer in 1..4, got 5")
  end)
end)

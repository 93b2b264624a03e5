-- bbb.data.rotate and bbb.data.translate: the shifts of the evaluation
-- under dataset shift, against images whose answer is known.
local bbb = require "bbb"
local data = bbb.data

-- A 28 x 28 image whose pixel (r, c) (0-based) holds r * 28 + c + 1.
local function numbered(h, w)
  return bbb.arange(1, h * w + 1):reshape(1, h * w)
end

local function at(img, w, r, c) return img[r * w + c + 1] end

describe("rotate", function()
  it("turns 90 degrees as numpy's rot90: out(r, c) = in(c, w - 1 - r)", function()
    local x = numbered(28, 28)
    local y = data.rotate(x, 28, 28, 90):reshape(-1):totable()
    local src = x:reshape(-1):totable()
    for r = 0, 27 do
      for c = 0, 27 do
        assert.are.equal(at(src, 28, c, 27 - r), at(y, 28, r, c))
      end
    end
  end)
  it("turns 180 degrees into both flips and 0 into itself", function()
    local x = numbered(28, 28)
    local src = x:reshape(-1):totable()
    local y180 = data.rotate(x, 28, 28, 180):reshape(-1):totable()
    local y0 = data.rotate(x, 28, 28, 0):reshape(-1):totable()
    for r = 0, 27 do
      for c = 0, 27 do
        assert.are.equal(at(src, 28, 27 - r, 27 - c), at(y180, 28, r, c))
        assert.are.equal(at(src, 28, r, c), at(y0, 28, r, c))
      end
    end
  end)
  it("interpolates with weights that sum to 1 inside and fills zeros outside", function()
    local y = data.rotate(bbb.ones(1, 784), 28, 28, 45):reshape(-1):totable()
    assert(math.abs(at(y, 28, 13, 13) - 1) < 1e-5)   -- the centre keeps its neighbourhood
    assert(math.abs(at(y, 28, 10, 17) - 1) < 1e-5)
    assert.are.equal(0, at(y, 28, 0, 0))              -- a corner comes from outside the image
  end)
  it("keeps (B, 1, H, W) shapes and every image of a batch", function()
    local x = bbb.cat({ numbered(28, 28), numbered(28, 28) * 2 }, 1):reshape(2, 1, 28, 28)
    local y = data.rotate(x, 28, 28, 30)
    assert.are.same({ 2, 1, 28, 28 }, y:size())
    local a, b = y[1]:reshape(-1):totable(), y[2]:reshape(-1):totable()
    for i = 1, 784 do assert(math.abs(b[i] - 2 * a[i]) < 1e-3) end
  end)
end)

describe("translate", function()
  it("moves a known pixel and brings zeros in", function()
    local x = bbb.zeros(1, 784)
    x[1][5 * 28 + 5 + 1] = 7
    local y = data.translate(x, 28, 28, 2, 3):reshape(-1):totable()
    assert.are.equal(7, at(y, 28, 7, 8))
    local total = 0
    for i = 1, 784 do total = total + y[i] end
    assert.are.equal(7, total)
    local z = data.translate(numbered(28, 28), 28, 28, 0, 14):reshape(-1):totable()
    for r = 0, 27 do
      assert.are.equal(0, at(z, 28, r, 13))
      assert.are.equal(r * 28 + 1, at(z, 28, r, 14))
    end
  end)
  it("refuses what it cannot do", function()
    local ok, err = pcall(data.translate, bbb.zeros(1, 784), 28, 28, 0.5, 0)
    assert.is_false(ok)
    assert.truthy(err:find("translate: dy and dx must be integers", 1, true))
    ok, err = pcall(data.rotate, bbb.zeros(1, 780), 28, 28, 15)
    assert.is_false(ok)
    assert.truthy(err:find("rotate: expected a (B, 784) or (B, 1, 28, 28) tensor", 1, true))
    ok, err = pcall(data.rotate, bbb.zeros(1, 784), 28, 28, 0 / 0)
    assert.is_false(ok)
    assert.truthy(err:find("rotate: degrees must be a finite number", 1, true))
  end)
end)

-- The dense resampling the gathers replaced, kept as the reference: the
-- (h*w, h*w) matrix A with out = x A, column (r, c) holding the bilinear
-- weights of source(r, c).
local function dense_resample(x, h, w, source)
  local hw, a = h * w, {}
  for i = 1, hw * hw do a[i] = 0 end
  local function add(sr, sc, col, weight)
    if weight > 0 and sr >= 0 and sr < h and sc >= 0 and sc < w then
      local i = (sr * w + sc) * hw + col
      a[i] = a[i] + weight
    end
  end
  for r = 0, h - 1 do
    for c = 0, w - 1 do
      local y, xx = source(r, c)
      if math.abs(y - math.floor(y + 0.5)) < 1e-9 then y = math.floor(y + 0.5) end
      if math.abs(xx - math.floor(xx + 0.5)) < 1e-9 then xx = math.floor(xx + 0.5) end
      local y0, x0 = math.floor(y), math.floor(xx)
      local fy, fx, col = y - y0, xx - x0, r * w + c + 1
      add(y0, x0, col, (1 - fy) * (1 - fx))
      add(y0, x0 + 1, col, (1 - fy) * fx)
      add(y0 + 1, x0, col, fy * (1 - fx))
      add(y0 + 1, x0 + 1, col, fy * fx)
    end
  end
  return bbb.matmul(x:reshape(x:size(1), hw), bbb.tensor(a):reshape(hw, hw)):reshape(x:size())
end

local function dense_rotate(x, h, w, degrees)
  local t = math.rad(degrees)
  local cos, sin = math.cos(t), math.sin(t)
  local cy, cx = (h - 1) / 2, (w - 1) / 2
  return dense_resample(x, h, w, function(r, c)
    local dy, dx = r - cy, c - cx
    return cy + sin * dx + cos * dy, cx + cos * dx - sin * dy
  end)
end

local function dense_translate(x, h, w, dy, dx)
  return dense_resample(x, h, w, function(r, c) return r - dy, c - dx end)
end

-- the largest |a - b| over two tensors of one shape
local function max_gap(a, b)
  return (a - b):abs():max():item()
end

describe("rotate and translate by gathers", function()
  local g = bbb.Generator(3)
  -- more images than one pass of the gathers takes, and a remainder
  local x = bbb.rand({ 130, 1, 28, 28 }, 0, 1, g)

  it("give the dense resampling's images on 28 x 28", function()
    for _, deg in ipairs { 0, 7.5, 15, 45, 90, 133, 180, -30, 270 } do
      local gap = max_gap(data.rotate(x, 28, 28, deg), dense_rotate(x, 28, 28, deg))
      assert(gap < 1e-6, ("rotate %g: %g"):format(deg, gap))
    end
    for _, s in ipairs { { 0, 0 }, { 2, 3 }, { -5, 1 }, { 0, -14 }, { 27, 0 }, { 30, -30 } } do
      local got, want = data.translate(x, 28, 28, s[1], s[2]), dense_translate(x, 28, 28, s[1], s[2])
      assert.are.equal(0, max_gap(got, want))
    end
  end)
  it("rotate a 256 x 256 image in under a second", function()
    local big = bbb.rand({ 1, 256 * 256 }, 0, 1, g)
    local t0 = os.clock()
    local y = data.rotate(big, 256, 256, 30)
    local moved = data.translate(big, 256, 256, 10, -20)
    local took = os.clock() - t0
    assert(took < 1, ("took %.2f s"):format(took))
    assert.are.same({ 1, 256 * 256 }, y:size())
    assert.are.equal(big[1][100 * 256 + 100 + 1], moved[1][110 * 256 + 80 + 1])
    -- a quarter turn is numpy's rot90 at any size: out(r, c) = in(c, w - 1 - r)
    local src, turned = big:reshape(-1):totable(), data.rotate(big, 256, 256, 90):reshape(-1):totable()
    for _, rc in ipairs { { 0, 0 }, { 0, 255 }, { 17, 200 }, { 255, 3 }, { 128, 127 } } do
      local r, c = rc[1], rc[2]
      assert.are.equal(src[c * 256 + (255 - r) + 1], turned[r * 256 + c + 1])
    end
  end)
  it("leave a batch of no images empty", function()
    assert.are.same({ 0, 784 }, data.rotate(bbb.zeros(0, 784), 28, 28, 10):size())
  end)
end)

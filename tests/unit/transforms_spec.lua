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

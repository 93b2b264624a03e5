-- Sizes: every creation function takes them as a table or as numbers;
-- a bad entry is named with its value; size products never overflow.
local bbb = require "bbb"

-- pcall's message without the "file:line: " a tail call may add.
local function message(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

describe("sizes given as numbers or as a table", function()
  it("make the same tensors for every creation function", function()
    for _, name in ipairs{ "zeros", "ones", "empty" } do
      assert.are.same({2, 3}, bbb[name](2, 3):size(), name)
      assert.are.same({2, 3}, bbb[name]{2, 3}:size(), name)
    end
    assert.are.same(bbb.randn({2, 3}, 0, 1, bbb.Generator(5)):totable(),
                    bbb.randn(2, 3, bbb.Generator(5)):totable())
    assert.are.same(bbb.rand({4}, 0, 1, bbb.Generator(5)):totable(),
                    bbb.rand(4, bbb.Generator(5)):totable())
    assert.are.same({{7, 7, 7}, {7, 7, 7}}, bbb.full(2, 3, 7):totable())
    assert.are.same({{7, 7, 7}, {7, 7, 7}}, bbb.full({2, 3}, 7):totable())
  end)
  it("numbers then parameters is an error that says how to give them", function()
    assert.truthy(message(function() return bbb.randn(2, 3, "x") end)
      :find("bbb.randn: argument 3 (gen): expected a bbb.Generator (after sizes given as numbers only a Generator may follow", 1, true))
  end)
  it("x.shape is x:size(), and both print as sizes", function()
    local x = bbb.zeros(2, 3)
    assert.are.same({2, 3}, x.shape)
    assert.are.equal("bbb.Size{2, 3}", tostring(x:size()))
    assert.are.equal("bbb.Size{}", tostring(bbb.tensor(1):size()))
    assert.are.same({2, 3}, bbb.ones(x.shape):size())
  end)
  it("x ^ p is x:pow(p)", function()
    local x = bbb.tensor{1, 2, 3}
    assert.are.same({1, 4, 9}, (x ^ 2):totable())
    assert.are.equal("bbb.Tensor.__pow: argument 1 (x): expected a tensor, got 2",
      message(function() return 2 ^ x end))
  end)
end)

describe("bad sizes name the entry and its value", function()
  it("a negative size keeps its value", function()
    assert.are.equal("bbb.ones: argument 1 (sizes): size 1 is negative (-1099511627776)", message(function() return bbb.ones{-2^40} end))
    assert.are.equal("bbb.zeros: argument 2 (sizes): size 2 is negative (-3)", message(function() return bbb.zeros(2, -3) end))
  end)
  it("reshape refuses strings and fractions instead of reading them as 0", function()
    local x = bbb.ones(12)
    assert.are.equal('bbb.reshape: argument 2 (sizes): size 1 is the string "a", not an integer',
      message(function() return x:reshape{"a", 12} end))
    assert.are.equal('bbb.reshape: argument 2 (sizes): size 2 is the string "a", not an integer',
      message(function() return x:reshape{4, "a"} end))
    assert.are.equal("bbb.reshape: argument 2 (sizes): size 1 is 2.5, not an integer",
      message(function() return x:reshape{2.5, 12} end))
    assert.are.equal("bbb.reshape: argument 2 (sizes): size 1 is negative (-2)", message(function() return x:reshape(-2, 6) end))
  end)
  it("numeric strings are refused as sizes, like any string", function()
    assert.are.equal('bbb.zeros: argument 1 (sizes): size 1 is the string "3", not an integer',
      message(function() return bbb.zeros{"3"} end))
    assert.are.equal('bbb.reshape: argument 2 (sizes): size 1 is the string "12", not an integer',
      message(function() return bbb.ones(12):reshape{"12"} end))
  end)
  it("reshape infers one -1 and says when it cannot", function()
    assert.are.same({3, 4}, bbb.ones(12):reshape(3, -1):size())
    assert.are.equal("bbb.reshape: argument 2 (sizes): cannot infer size 2: (12) has 12 elements, the other sizes give 5",
      message(function() return bbb.ones(12):reshape(5, -1) end))
    assert.are.equal("bbb.reshape: argument 2 (sizes): only one size may be -1",
      message(function() return bbb.ones(12):reshape(-1, -1) end))
  end)
end)

describe("size products that overflow", function()
  it("from_bytes", function()
    assert.are.equal("bbb.from_bytes: argument 3 (sizes): the sizes multiply past 2^63 elements (size 2 is 4294967296)",
      message(function() return bbb.from_bytes("abc", 0, {2^32, 2^32}) end))
    assert.are.equal("bbb.from_bytes: argument 3 (sizes): 4 bytes at offset 0 exceed the 3 available",
      message(function() return bbb.from_bytes("abc", 0, {2, 2}) end))
  end)
  it("reshape", function()
    assert.are.equal("bbb.reshape: argument 2 (sizes): the sizes multiply past 2^63 elements (size 2 is 4)",
      message(function() return bbb.ones{0}:reshape(2^62, 4, -1) end))
  end)
end)

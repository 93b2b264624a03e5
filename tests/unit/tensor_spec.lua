-- Tensor creation, values of every op, broadcasting, reductions, printing.
local bbb = require "bbb"

local function close(a, b, tol)
  tol = tol or 1e-5
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

local function assert_values(t, expected, tol)
  local flat = t:view(-1)
  assert.are.equal(#expected, t:numel())
  for i, v in ipairs(expected) do
    assert(close(flat[i], v, tol), ("element %d: got %.7g, expected %.7g"):format(i, flat[i], v))
  end
end

describe("creation", function()
  it("zeros, ones, full, arange, linspace", function()
    assert_values(bbb.zeros(2, 3), {0, 0, 0, 0, 0, 0})
    assert_values(bbb.ones{2, 2}, {1, 1, 1, 1})
    assert_values(bbb.full({3}, 2.5), {2.5, 2.5, 2.5})
    assert_values(bbb.arange(4), {0, 1, 2, 3})
    assert_values(bbb.arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75})
    assert_values(bbb.linspace(-1, 1, 5), {-1, -0.5, 0, 0.5, 1})
  end)
  it("from nested tables, and back", function()
    local t = bbb.tensor{{1, 2, 3}, {4, 5, 6}}
    assert.are.same({2, 3}, t:size())
    assert.are.equal(2, t:dim())
    assert.are.equal(6, t:numel())
    assert.are.equal(2, #t)
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
    assert.are.equal(7, bbb.tensor(7):item())
    assert.are.equal(0, bbb.tensor(7):dim())
  end)
  it("indexing reads rows and numbers, writes rows", function()
    local t = bbb.tensor{{1, 2}, {3, 4}}
    assert.are.same({3, 4}, t[2]:totable())
    assert.are.equal(4, t[2][2])
    assert.are.equal(3, t:get(2, 1))
    t[1] = 9
    assert.are.same({{9, 9}, {3, 4}}, t:totable())
    t[2] = bbb.tensor{7, 8}
    t:set(1, 2, -1)
    assert.are.same({{9, -1}, {7, 8}}, t:totable())
  end)

  it("names read methods, the properties shape and grad, or nil", function()
    local t = bbb.tensor{{1, 2}, {3, 4}}:requires_grad(true)
    assert.are.equal("function", type(t.sum))
    assert.are.equal(10, t:sum():item())
    assert.are.same({2, 2}, {t.shape[1], t.shape[2]})
    assert.is_nil(t.grad)
    t:sum():backward()
    assert.are.same({{1, 1}, {1, 1}}, t.grad:totable())
    assert.is_nil(t.no_such_name)
    assert.is_nil(t[""])
  end)
  it("reshape and narrow share storage; clone does not", function()
    local t = bbb.arange(6)
    local v = t:reshape(2, 3)
    local r = v:narrow(1, 2, 1)
    r:fill(0)
    assert_values(t, {0, 1, 2, 0, 0, 0})
    local c = t:clone()
    c:fill(5)
    assert.are.equal(0, t[4])
    assert.are.same({3, 2}, t:reshape(-1, 2):size())
  end)
  it("narrow on an inner dimension, index_select, cat, transpose", function()
    local t = bbb.tensor{{1, 2, 3}, {4, 5, 6}}
    assert.are.same({{2, 3}, {5, 6}}, t:narrow(2, 2, 2):totable())
    assert.are.same({{4, 5, 6}, {1, 2, 3}, {4, 5, 6}}, t:index_select(bbb.tensor{2, 1, 2}):totable())
    assert.are.same({{1, 2, 3}, {4, 5, 6}, {1, 2, 3}, {4, 5, 6}}, bbb.cat({t, t}):totable())
    assert.are.same({{1, 2, 3, 1, 2, 3}, {4, 5, 6, 4, 5, 6}}, bbb.cat({t, t}, 2):totable())
    assert.are.same({{1, 4}, {2, 5}, {3, 6}}, t:t():totable())
  end)
end)

describe("elementwise", function()
  local x = bbb.tensor{-2, -0.5, 0.25, 3}
  local cases = {
    {"neg", function(v) return -v end}, {"exp", math.exp},
    {"softplus", function(v) return math.log(1 + math.exp(v)) end},
    {"sigmoid", function(v) return 1 / (1 + math.exp(-v)) end},
    {"tanh", function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end},
    {"relu", function(v) return math.max(v, 0) end},
    {"square", function(v) return v * v end}, {"abs", math.abs},
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " matches double precision", function()
      local y = x[c[1]](x)
      local exp = {}
      for i = 1, 4 do exp[i] = c[2](x[i]) end
      assert_values(y, exp, 2e-6)
    end)
  end
  it("log, log1p, sqrt, pow, clamp on positive inputs", function()
    local p = bbb.tensor{0.5, 1, 4}
    assert_values(p:log(), {math.log(0.5), 0, math.log(4)}, 1e-6)
    assert_values(p:log1p(), {math.log(1.5), math.log(2), math.log(5)}, 1e-6)
    assert_values(p:sqrt(), {math.sqrt(0.5), 1, 2}, 1e-6)
    assert_values(p:pow(3), {0.125, 1, 64}, 1e-6)
    assert_values(p:clamp(0.75, 2), {0.75, 1, 2})
  end)
  it("softplus stays finite and accurate at the extremes", function()
    local y = bbb.tensor{-30, 1000, -1000}:softplus()
    assert(close(y[1], 9.357622968840175e-14, 1e-5))
    assert.are.equal(1000, y[2])
    assert.are.equal(0, y[3])
  end)
  it("logaddexp stays in log space", function()
    local y = bbb.tensor{-1000, 0, 1000}:logaddexp(bbb.tensor{-1000, 0, 999})
    assert(close(y[1], -1000 + math.log(2), 1e-6))
    assert(close(y[2], math.log(2), 1e-6))
    assert(close(y[3], 1000 + math.log(1 + math.exp(-1)), 1e-6))
  end)
  it("operators with numbers on either side", function()
    local t = bbb.tensor{1, 2, 4}
    assert_values(t + 1, {2, 3, 5})
    assert_values(1 - t, {0, -1, -3})
    assert_values(t * 2, {2, 4, 8})
    assert_values(2 / t, {2, 1, 0.5})
    assert_values(t / 2, {0.5, 1, 2})
    assert_values(-t, {-1, -2, -4})
    assert_values(t:maximum(2), {2, 2, 4})
    assert_values(t:gt(1.5), {0, 1, 1})
    assert_values(t:lt(2), {1, 0, 0})
    assert_values(t:minimum(2), {1, 2, 2})
  end)
  it("broadcasts rows, columns, scalars and outer products", function()
    local m = bbb.tensor{{1, 2, 3}, {4, 5, 6}}
    assert.are.same({{11, 22, 33}, {14, 25, 36}}, (m + bbb.tensor{10, 20, 30}):totable())
    assert.are.same({{2, 3, 4}, {8, 9, 10}}, (m + bbb.tensor{{1}, {4}}):totable())
    assert.are.same({{1, 2}, {2, 4}, {3, 6}},
      (bbb.tensor{{1}, {2}, {3}} * bbb.tensor{{1, 2}}):totable())
    assert.are.same({{0, 1, 2}, {3, 4, 5}}, (m - bbb.tensor(1)):totable())
  end)
end)

describe("reductions", function()
  local m = bbb.tensor{{1, 5, 3}, {4, 2, 6}}
  it("sum, mean over all and one dimension", function()
    assert.are.equal(21, m:sum():item())
    assert.are.equal(3.5, m:mean():item())
    assert.are.same({5, 7, 9}, m:sum(1):totable())
    assert.are.same({{9}, {12}}, m:sum(2, true):totable())
    assert.are.same({3, 4}, m:mean(-1):totable())
  end)
  it("max and argmax, 1-based", function()
    assert.are.equal(6, m:max():item())
    local v, i = m:max(2)
    assert.are.same({5, 6}, v:totable())
    assert.are.same({2, 3}, i:totable())
    assert.are.same({2, 1, 2}, m:argmax(1):totable())
  end)
  it("logsumexp is stable", function()
    local y = bbb.tensor{{1000, 1000}, {-1000, -1000}}:logsumexp(2)
    assert(close(y[1], 1000 + math.log(2), 1e-6))
    assert(close(y[2], -1000 + math.log(2), 1e-6))
  end)
  it("sums a million elements accurately", function()
    assert(close(bbb.full({1000, 1000}, 0.1):sum():item(), 1e5, 1e-6))
  end)
end)

describe("linear algebra and nn ops", function()
  it("matmul with transpose flags", function()
    local a, b = bbb.tensor{{1, 2}, {3, 4}}, bbb.tensor{{5, 6}, {7, 8}}
    assert.are.same({{19, 22}, {43, 50}}, a:matmul(b):totable())
    assert.are.same({{26, 30}, {38, 44}}, bbb.matmul(a, b, true):totable())
    assert.are.same({{17, 23}, {39, 53}}, bbb.matmul(a, b, false, true):totable())
  end)
  it("linear = x W^T + b", function()
    local x, w, b = bbb.tensor{{1, 2}}, bbb.tensor{{1, 0}, {0, 1}, {1, 1}}, bbb.tensor{1, 2, 3}
    assert.are.same({{2, 4, 6}}, bbb.linear(x, w, b):totable())
    assert.are.same({{1, 2, 3}}, bbb.linear(x, w):totable())
  end)
  it("log_softmax, softmax, nll and cross_entropy", function()
    local z = bbb.tensor{{1, 2, 3}, {1, 1, 1}}
    local lp = z:log_softmax()
    local l = math.log(math.exp(1) + math.exp(2) + math.exp(3))
    assert_values(lp, {1 - l, 2 - l, 3 - l, -math.log(3), -math.log(3), -math.log(3)}, 1e-6)
    assert_values(z:softmax():sum(2), {1, 1}, 1e-6)
    local labels = bbb.tensor{3, 1}
    local expect = ((l - 3) + math.log(3)) / 2
    assert(close(bbb.nll(lp, labels):item(), expect, 1e-6))
    assert(close(bbb.cross_entropy(z, labels):item(), expect, 1e-6))
    assert(close(bbb.nll(lp, labels, "sum"):item(), 2 * expect, 1e-6))
  end)
  it("gaussian_loglik", function()
    local mu, y = bbb.tensor{0, 1}, bbb.tensor{1, 1}
    -- residuals 1 and 0: -1/(2 * 0.25) - 2 log 0.5 - log(2 pi)
    local v = bbb.gaussian_loglik(mu, y, 0.5):item()
    assert(close(v, -2 * math.log(0.5) - math.log(2 * math.pi) - 2, 1e-6), tostring(v))
    local v2 = bbb.gaussian_loglik(mu, y, bbb.tensor{0.5, 0.5}):item()
    assert(close(v2, v, 1e-6))
  end)
end)

describe("printing", function()
  it("shows values and size like Torch", function()
    local s = tostring(bbb.tensor{{1, 2}, {3, 4}})
    assert.truthy(s:find(" 1 2\n 3 4\n", 1, true), s)
    assert.truthy(s:find("[bbb.Tensor of size 2x2]", 1, true), s)
    assert.truthy(tostring(bbb.tensor{0.5, 1.25}):find("0.5000", 1, true))
    assert.truthy(tostring(bbb.tensor(3)):find("[bbb.Tensor of size ()]", 1, true))
  end)
  it("summarises large tensors", function()
    local s = tostring(bbb.zeros(100, 100))
    assert.truthy(s:find("...", 1, true))
    assert(#s < 2000, #s)
    assert.truthy(s:find("100x100", 1, true))
  end)
  it("prints 3-d slices with Torch's headers", function()
    local s = tostring(bbb.zeros(2, 2, 2))
    assert.truthy(s:find("(1,.,.) =", 1, true), s)
    assert.truthy(s:find("(2,.,.) =", 1, true), s)
  end)
end)

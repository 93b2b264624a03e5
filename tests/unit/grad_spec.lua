-- Finite-difference gradient checks for every differentiable op, and the
-- behaviour of the tape (accumulation, no_grad, freed graphs).
local bbb = require "bbb"
local gradcheck = bbb.testing.gradcheck

local gen = bbb.Generator(2024)
local function param(shape, lo, hi)
  return bbb.rand(shape, lo or -1, hi or 1, gen):requires_grad(true)
end

local function check(fn, inputs, opts)
  local ok, report = gradcheck(fn, inputs, opts)
  assert(ok, report)
end

describe("gradcheck of unary ops", function()
  local unary = {
    "neg", "exp", "softplus", "sigmoid", "tanh", "square", "abs", "relu",
  }
  for _, name in ipairs(unary) do
    it(name, function()
      check(function(x) return x[name](x) end, {param({3, 4})})
    end)
  end
  for _, name in ipairs{"log", "log1p", "sqrt"} do
    it(name .. " (positive inputs)", function()
      check(function(x) return x[name](x) end, {param({3, 4}, 0.5, 2)})
    end)
  end
  it("pow", function() check(function(x) return x:pow(3) end, {param({5}, 0.5, 2)}) end)
  it("pow with the exponent 2, which squares", function()
    check(function(x) return x:pow(2) end, {param({5})})
  end)
  it("pow with a fractional exponent", function()
    check(function(x) return x:pow(0.5) end, {param({5}, 0.5, 2)})
  end)
  it("clamp", function() check(function(x) return x:clamp(-0.5, 0.5) end, {param({6})}) end)
  it("gt and lt pass no gradient", function()
    check(function(x) return x:gt(0) * x + x:lt(0) * 2 end, {param({6})})
  end)
  it("scalar arithmetic on both sides", function()
    check(function(x) return (2 - x) * 3 + 1 end, {param({4})})
    check(function(x) return 2 / x - x / 4 end, {param({4}, 0.5, 2)})
  end)
end)

describe("gradcheck of binary ops with broadcasting", function()
  local ops = {"add", "sub", "mul", "div", "maximum", "minimum", "logaddexp"}
  for _, name in ipairs(ops) do
    it(name .. ": same shape, row, column and scalar", function()
      local lo = name == "div" and 0.5 or -1
      check(function(a, b) return a[name](a, b) end, {param({3, 4}), param({3, 4}, lo, 2)})
      check(function(a, b) return a[name](a, b) end, {param({3, 4}), param({4}, lo, 2)})
      check(function(a, b) return a[name](a, b) end, {param({3, 1}), param({1, 4}, lo, 2)})
      check(function(a, b) return a[name](a, b) end, {param({2, 3}), param({}, lo, 2)})
    end)
  end
  it("x * x sends both contributions to one tensor", function()
    check(function(x) return x * x end, {param({5})})
  end)
end)

describe("gradcheck of reductions", function()
  for _, name in ipairs{"sum", "mean", "max", "logsumexp"} do
    it(name .. " over all and over each dimension", function()
      check(function(x) return x[name](x) end, {param({3, 4})})
      check(function(x) return (x[name](x, 1)) end, {param({3, 4})})
      check(function(x) return (x[name](x, 2, true)) end, {param({3, 4})})
      check(function(x) return (x[name](x, 2)) end, {param({2, 3, 4})})
    end)
  end
  it("sum over enough elements to be summed in chunks", function()
    check(function(x) return x:sum() end, {param({70000}, -0.01, 0.01)}, {max_checks = 4, eps = 1e-2})
  end)
end)

describe("gradcheck of linear algebra and nn ops", function()
  it("matmul, all transpose flags", function()
    for _, f in ipairs{{false, false}, {true, false}, {false, true}, {true, true}} do
      local a = f[1] and param({4, 3}) or param({3, 4})
      local b = f[2] and param({5, 4}) or param({4, 5})
      check(function(x, y) return bbb.matmul(x, y, f[1], f[2]) end, {a, b})
    end
  end)
  it("linear with and without bias", function()
    check(function(x, w, b) return bbb.linear(x, w, b) end, {param({4, 3}), param({5, 3}), param({5})})
    check(function(x, w) return bbb.linear(x, w) end, {param({4, 3}), param({5, 3})})
  end)
  it("log_softmax and softmax", function()
    check(function(x) return x:log_softmax() end, {param({3, 5})})
    check(function(x) return x:softmax() end, {param({3, 5})})
  end)
  it("nll and cross_entropy", function()
    local labels = bbb.tensor{1, 5, 3}
    check(function(x) return bbb.nll(x:log_softmax(), labels) end, {param({3, 5})})
    check(function(x) return bbb.cross_entropy(x, labels, "sum") end, {param({3, 5})})
  end)
  it("relu, then dropout's mask", function()
    local mask = bbb.dropout_mask({3, 4}, 0.5, bbb.Generator(5))
    check(function(x) return x:relu() * mask end, {param({3, 4})})
  end)
  it("gaussian_loglik with a fixed noise", function()
    local y = bbb.tensor{{0.5}, {-1}, {2}}
    check(function(mu) return bbb.gaussian_loglik(mu, y, 0.7) end, {param({3, 1})})
  end)
  it("gaussian_loglik with learned mean and noise", function()
    local y = bbb.tensor{0.5, -1, 2}
    check(function(mu, s) return bbb.gaussian_loglik(mu, y, s:softplus()) end,
      {param({3}), param({1})})
  end)
end)

describe("gradcheck of shape ops", function()
  it("reshape, narrow, index_select, cat, transpose, clone, row indexing", function()
    check(function(x) return x:reshape(6, 2) end, {param({3, 4})})
    check(function(x) return x:narrow(1, 2, 2) end, {param({4, 3})})
    check(function(x) return x:narrow(2, 2, 2) end, {param({4, 3})})
    check(function(x) return x:index_select(bbb.tensor{3, 1, 3}) end, {param({4, 2})})
    check(function(a, b) return bbb.cat({a, b}, 2) end, {param({2, 3}), param({2, 2})})
    check(function(a, b) return bbb.cat({a, b, a}) end, {param({2, 3}), param({1, 3})})
    check(function(x) return x:t() end, {param({2, 3})})
    check(function(x) return x:clone() * x end, {param({4})})
    check(function(x) return x[2] * 2 end, {param({3, 2})})
  end)
end)

describe("the tape", function()
  it("accumulates gradients across backward calls until zero_grad", function()
    local w = bbb.tensor{1, 2}:requires_grad(true)
    for _ = 1, 3 do (w * w):sum():backward() end
    assert.are.same({6, 12}, w.grad:totable())
    w:zero_grad()
    assert.are.same({0, 0}, w.grad:totable())
  end)
  it("a tensor used twice gets both contributions", function()
    local w = bbb.tensor{3}:requires_grad(true)
    local y = w:exp()
    local loss = ((y * 2) + y):sum()
    loss:backward()
    assert((math.abs(w.grad[1] - 3 * math.exp(3))) < 1e-3)
  end)
  it("no_grad records nothing and restores the mode after an error", function()
    local w = bbb.tensor{1}:requires_grad(true)
    local y = bbb.no_grad(function() return w * 2 end)
    assert.is_false(y:requires_grad())
    assert.has_error(function() bbb.no_grad(function() error("boom") end) end)
    assert.is_true(bbb.is_grad_enabled())
  end)
  it("frees the graph after backward; retain_graph keeps it", function()
    local w = bbb.tensor{2}:requires_grad(true)
    local y = (w * w):sum()
    y:backward(nil, true)
    y:backward()
    assert.are.equal(8, w.grad[1])
    assert.is_nil(y:grad_fn())
  end)
  it("takes a seed gradient for non-scalar outputs", function()
    local w = bbb.tensor{1, 2}:requires_grad(true)
    local y = w * 3
    y:backward(bbb.tensor{1, 10})
    assert.are.same({3, 30}, w.grad:totable())
  end)
  it("detach cuts the graph", function()
    local w = bbb.tensor{1, 2}:requires_grad(true)
    local d = (w * 2):detach()
    assert.is_false(d:requires_grad())
  end)
end)

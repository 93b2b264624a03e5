-- Bad arguments get messages naming the function, the argument and the
-- value; networks without layers and silent copies are not allowed to pass
-- unnoticed.
local bbb = require "bbb"

local errors_with = require("helpers").errors_with

describe("network builders", function()
  it("refuse a size list without at least an input and an output size", function()
    errors_with(function() bbb.nn.bayes_mlp({ 784 }) end,
      "nn.bayes_mlp: sizes must list at least two sizes (inputs and outputs), got 1: {784}")
    errors_with(function() bbb.nn.mlp({ 784 }) end, "nn.mlp: sizes must list at least two sizes")
    errors_with(function() bbb.nn.mlp({}) end, "nn.mlp: sizes must list at least two sizes (inputs and outputs), got 0: {}")
    errors_with(function() bbb.nn.bayes_mlp({ 784, 2.5, 10 }) end, "nn.bayes_mlp: sizes[2] must be a positive integer, got 2.5")
    errors_with(function() bbb.nn.bayes_mlp("784") end, "nn.bayes_mlp: sizes must be a list of layer sizes, got string")
    assert.are.equal(1, #bbb.nn.bayes_mlp({ 4, 2 }).layers)
  end)
end)

describe("BayesLinear options", function()
  it("name a bad rho_init or mu_scale, and accept mu_scale = 0", function()
    errors_with(function() bbb.nn.BayesLinear(3, 2, { rho_init = "a" }) end,
      "BayesLinear: rho_init must be a finite number, got 'a'")
    errors_with(function() bbb.nn.BayesLinear(3, 2, { rho_init = 0 / 0 }) end, "BayesLinear: rho_init must be a finite number")
    errors_with(function() bbb.nn.BayesLinear(3, 2, { mu_scale = -1 }) end,
      "BayesLinear: mu_scale must be a finite number >= 0, got -1")
    errors_with(function() bbb.nn.BayesLinear(3, 2, { mu_scale = math.huge }) end, "BayesLinear: mu_scale must be a finite number >= 0, got inf")
    local l = bbb.nn.BayesLinear(3, 2, { mu_scale = 0, rho_init = -3 })
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, l.weight_mu:totable())
    assert.are.same({ 0, 0 }, l.bias_mu:totable())
    assert(math.abs(l.weight_rho:totable()[1][1] + 3) < 1e-6)
    local y = l:forward(bbb.ones { 4, 3 })
    assert.are.same({ 4, 2 }, { y:size(1), y:size(2) })
  end)
end)

describe("gradcheck", function()
  local x = bbb.randn({ 3 }, 0, 1, bbb.Generator(1)):requires_grad(true)
  local function f(t) return t:square() end
  it("names a missing function, bad inputs and a zero step", function()
    errors_with(function() bbb.testing.gradcheck(nil, { x }) end, "gradcheck: fn must be a function, got nil")
    errors_with(function() bbb.testing.gradcheck(f, x) end, "gradcheck: inputs must be a list of tensors, got userdata")
    errors_with(function() bbb.testing.gradcheck(f, { x }, { eps = 0 }) end, "gradcheck: eps must be a finite number > 0, got 0")
    errors_with(function() bbb.testing.gradcheck(f, { x }, { atol = -1 }) end, "gradcheck: atol must be a finite number >= 0, got -1")
    errors_with(function() bbb.testing.gradcheck(f, { x }, 3) end, "gradcheck: opts must be a table, got number")
    assert.is_true((bbb.testing.gradcheck(f, { x })))
  end)
end)

describe("views and copies", function()
  it("narrow along dimension 1 writes through; along 2 and t() are copies, as documented", function()
    local x = bbb.zeros { 2, 3 }
    local row = x:narrow(1, 2, 1)
    row[1][1] = 5
    assert.are.equal(5, x:totable()[2][1])
    local col = x:narrow(2, 1, 1)
    col[1][1] = 7
    assert.are.equal(0, x:totable()[1][1])
    local help = require "bbb.help"
    assert.truthy(help.text("narrow"):find("it is a copy", 1, true), help.text("narrow"))
    assert.truthy(help.text("t"):find("a copy: writes do not reach x", 1, true), help.text("t"))
  end)
end)

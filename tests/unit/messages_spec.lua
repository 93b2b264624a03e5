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

describe("library errors", function()
  -- called straight from pcall, a message raised at the caller's level
  -- carries no position at all; one raised a level too deep names a line
  -- inside the library
  local function message(fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok, "no error")
    return tostring(err)
  end
  local x3 = bbb.randn({ 3, 2 }, 0, 1, bbb.Generator(1))

  it("never name a position inside the library", function()
    local cases = {
      { bbb.laplace.last_layer, { features = x3 }, "last_layer: weight must be a (C, 2) tensor" },
      { bbb.laplace.last_layer, nil, "last_layer: expects a table of options" },
      { bbb.metrics.crps_gaussian, { 1 }, { 1 }, { 0 / 0 }, "crps_gaussian: y[1] is" },
      { bbb.metrics.interval, { 1 }, { 1 }, { 0 / 0 }, 0.9, "interval: y[1] is" },
      { bbb.metrics.auroc, "abc", { 1 }, "auroc: scores must be a tensor or a Lua array, got string" },
      { bbb.metrics.aurc, "abc", { 1 }, "aurc: confidence must be a tensor or a Lua array, got string" },
      { bbb.metrics.detection, { 0 / 0 }, { 1 }, "detection: in_scores[1] is" },
      { bbb.metrics.uncertainty, { bbb.tensor { { 0 / 0, 1 } } }, "uncertainty: row 1 holds NaN" },
      { bbb.prior.from_config, { kind = "gaussian", sigma = -1 },
        "Gaussian prior: sigma must be positive and finite, got -1" },
      { bbb.prior.from_config, { kind = "mixture", pi = 2 }, "ScaleMixture prior: pi must be in (0, 1), got 2" },
      { bbb.nn.build, { type = "BayesLinear", n_in = 2, n_out = 2, prior = { kind = "gaussian", sigma = -1 } },
        "nn.build: config: Gaussian prior: sigma must be positive and finite, got -1" },
    }
    for _, case in ipairs(cases) do
      local text = table.remove(case)
      local fn = table.remove(case, 1)
      local msg = message(fn, table.unpack(case, 1, #case))
      assert.falsy(msg:find(".lua:", 1, true), msg)
      assert.truthy(msg:find(text, 1, true), ("%q not in %q"):format(text, msg))
    end
  end)
  it("name the caller's line when called from Lua", function()
    local function from_here(fn)
      local ok, err = pcall(function()
        local r = fn()
        return r
      end)
      assert.is_false(ok)
      assert.truthy(tostring(err):match("^[^:]*messages_spec%.lua:%d+: "), tostring(err))
    end
    from_here(function() return (bbb.prior.Gaussian { sigma = -1 }) end)
    from_here(function() return (bbb.laplace.last_layer { features = x3 }) end)
    from_here(function() return (bbb.metrics.crps_gaussian({ 1 }, { 1 }, { 0 / 0 })) end)
  end)
end)

describe("NaN and inf weights", function()
  local function nan_net()
    local net = bbb.nn.mlp({ 2, 3, 1 }, { generator = bbb.Generator(2) })
    local w = net.layers[1].weight:detach()
    local rows = w:totable()
    rows[2][1] = 0 / 0
    return net, bbb.tensor(rows)
  end
  it("are refused by load_state_dict, naming the tensor, and leave the module unchanged", function()
    local net, bad = nan_net()
    local sd = {}
    for k, v in pairs(net:state_dict()) do sd[k] = v:detach():clone() end
    local name
    for k, v in pairs(net:state_dict()) do if v == net.layers[1].weight then name = k end end
    sd[name] = bad
    local before = net.layers[1].weight:totable()
    errors_with(function() net:load_state_dict(sd) end,
      ("load_state_dict: %s holds NaN at element 3: weights must be finite"):format(name))
    assert.are.same(before, net.layers[1].weight:totable())
    sd[name] = bad:clamp(-1, 1) * 0 + math.huge
    errors_with(function() net:load_state_dict(sd) end, ("load_state_dict: %s holds inf at element 1"):format(name))
  end)
  it("are not saved: checkpoint.write and save name the tensor and write nothing", function()
    local path = os.tmpname()
    os.remove(path)
    local net, bad = nan_net()
    errors_with(function() bbb.checkpoint.write(path, { ok = bbb.ones(2), w = bad }) end,
      "checkpoint.write: w holds NaN at element 3: only finite values are saved")
    net.layers[1].weight:copy(bad)
    local ok, err = pcall(bbb.save, path, net)
    assert.is_false(ok)
    assert.truthy(tostring(err):match("^save: model%.[%w_.]+ holds NaN at element 3: only finite values are saved$"),
      tostring(err))
    assert.is_nil(io.open(path))
  end)
end)

describe("data loaders", function()
  it("refuse a data set whose n is not the rows of x, and a count of examples that is not one", function()
    local ds = { x = bbb.zeros(10, 2), y = bbb.ones(10), n = 12 }
    errors_with(function() bbb.data.batches(ds, 4) end, "batches: ds.n is 12 but ds.x holds 10 rows")
    errors_with(function() bbb.data.split(ds, 4) end, "split: ds.n is 12 but ds.x holds 10 rows")
    for _, n in ipairs { -1, 2.5, 0 / 0, "10" } do
      errors_with(function() bbb.data.num_batches(n, 4) end,
        "num_batches: n must be a non-negative integer (the number of examples), got " .. tostring(n))
    end
    ds.n = 10
    local count = 0
    for _ in bbb.data.batches(ds, 4) do count = count + 1 end
    assert.are.equal(bbb.data.num_batches(10, 4), count)
    assert.are.equal(3, bbb.data.num_batches(10.0, 4))
  end)
end)

describe("gaussian_loglik", function()
  it("refuses a tensor sigma with an element that is not positive", function()
    local mu = bbb.zeros(3, 1)
    errors_with(function() bbb.gaussian_loglik(mu, mu, bbb.tensor { { 1 }, { 0 }, { 1 } }) end,
      "gaussian_loglik: sigma must be > 0, got 0 at element 2")
    errors_with(function() bbb.gaussian_loglik(mu, mu, bbb.tensor { { 1 }, { 1 }, { -0.5 } }) end,
      "gaussian_loglik: sigma must be > 0, got -0.5 at element 3")
    errors_with(function() bbb.gaussian_loglik(mu, mu, bbb.tensor { 0 / 0 }) end,
      "gaussian_loglik: sigma must be > 0, got NaN at element 1")
    local v = bbb.gaussian_loglik(mu, mu, bbb.tensor { { 0.5 }, { 1 }, { 2 } }):item()
    assert(math.abs(v - (-(math.log(0.5) + math.log(1) + math.log(2)) - 1.5 * math.log(2 * math.pi))) < 1e-5)
  end)
end)

-- What the REPL shows and completes (bbb.repl), and help from the sources'
-- doc comments (bbb.help). tests/integration/pty_spec.lua drives the real terminal.
local bbb = require "bbb"
local repl = require "bbb.app.repl"
local help = require "bbb.help"

describe("repl.show", function()
  it("shows sizes as sizes", function()
    assert.are.equal("bbb.Size{2, 3}", repl.show(bbb.zeros(2, 3):size()))
  end)
  it("shows plain tables by their contents, nested and sorted", function()
    assert.are.equal("{1, 2, 3}", repl.show{ 1, 2, 3 })
    assert.are.equal('{1, a = "x", b = {c = true}}', repl.show{ 1, a = "x", b = { c = true } })
    local t = {}
    t.self = t
    assert.are.equal("{self = {<cycle>}}", repl.show(t))
  end)
  it("shows a tensor inside a table by its size line", function()
    assert.are.equal("{w = bbb.Tensor of size 2x2}", repl.show{ w = bbb.zeros(2, 2) })
  end)
  it("shows modules, priors and ELBO objects readably", function()
    assert.are.equal("ScaleMixture{pi=0.25, sigma1=1, sigma2=0.000911882}",
      repl.show(bbb.prior.ScaleMixture{ pi = 0.25, sigma2 = math.exp(-7) }))
    assert.are.equal("Lu", repl.show{ name = "Lu", log_prob = function(_, w) return w end })
    assert.truthy(repl.show(bbb.nn.BayesLinear(3, 2)):find("^BayesLinear%(3 %-> 2"))
    assert.are.equal("ELBO{n_data=600, n_batches=5, likelihood=categorical, kl_weight=uniform, "
      .. "samples=1, reduction=mean}", repl.show(bbb.elbo.ELBO{ n_data = 600, batch_size = 128 }))
  end)
end)

describe("repl.complete", function()
  local env = { bbb = bbb, x = bbb.zeros(2), print = print, pairs = pairs }
  it("completes fields of tables", function()
    assert.are.same({ "bbb.zeros", "bbb.zeros_like" }, repl.complete("bbb.ze", env))
  end)
  it("completes tensor methods after a colon", function()
    assert.are.same({ "x:softmax", "x:softplus" }, repl.complete("x:so", env))
  end)
  it("completes tensor fields after a dot", function()
    local got = repl.complete("x.sh", env)
    assert.are.same({ "x.shape" }, got)
  end)
  it("completes globals and keywords", function()
    assert.are.same({ "pairs" }, repl.complete("pa", env))
    assert.are.same({ "function" }, repl.complete("func", env))
  end)
  it("completes the submodules bbb loads on demand", function()
    local got = repl.complete("bbb.pr", env)
    assert.truthy(table.concat(got, " "):find("bbb.prior", 1, true))
  end)
  it("offers nothing for what is not a name chain", function()
    assert.are.same({}, repl.complete("f(x).y", env))
    assert.are.same({}, repl.complete("nope.x", env))
  end)
end)

describe("bbb.help", function()
  it("finds a function's signatures and doc from the sources", function()
    local t = assert(help.text(bbb.randn))
    assert.truthy(t:find("randn(n1, n2, ... [, gen]) -> tensor", 1, true), t)
    assert.truthy(t:find("N(mean, std^2)", 1, true), t)
    assert.are.equal(t, help.text("randn"))
    assert.are.equal(t, help.text("bbb.randn"))
  end)
  it("finds tensor methods and Lua functions", function()
    assert.truthy(assert(help.text(bbb.zeros(1).narrow)):find("narrow(x, dim, start, len)", 1, true))
    assert.truthy(assert(help.text(bbb.no_grad)):find("gradient recording off", 1, true))
  end)
  it("says when there is none", function()
    assert.are.same({ nil, "no help for nosuchthing" }, { help.text("nosuchthing") })
  end)
  it("documents every public function of bbb", function()
    local missing = {}
    for k, v in pairs(bbb) do
      if type(v) == "function" and not help.text(v) then missing[#missing + 1] = k end
    end
    table.sort(missing)
    assert.are.same({}, missing)
  end)
  it("the summary's examples run", function()
    -- every line of the summary that shows code, run in order
    local net = bbb.nn.bayes_mlp{ 4, 3, 2 }
    local x, y = bbb.randn(5, 4), bbb.tensor{ 1, 2, 1, 2, 1 }
    local elbo = bbb.elbo.ELBO{ n_data = 60000, batch_size = 128 }
    local opt = bbb.optim.Adam(net, { lr = 1e-3 })
    opt:zero_grad()
    local loss = elbo:loss(net, x, y)
    loss:backward()
    opt:step()
    assert.is_true(bbb.is_tensor(net:predict(x, { samples = 10 })))
    local p = bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) }
    assert.truthy(tostring(p))
    bbb.nn.BayesLinear(4, 2, { prior = { log_prob = function(self, w) return w:sum() end } })
    assert.truthy(help.SUMMARY:find("bbb.elbo.ELBO{n_data=60000, batch_size=128}; elbo:loss(net, x, y)", 1, true))
    assert.falsy(help.SUMMARY:find("ELBO{net", 1, true))
  end)
end)

-- The experiments called as Lua: run(config) returns a plain result table,
-- whose fields these specs read (report and plot only show it).
local bbb = require "bbb"
local mnist = require "bbb.app.experiments.mnist"
local prune = require "bbb.app.experiments.prune"
local figure2 = require "bbb.app.experiments.figure2"

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(require("bbb.app.sys").mkdir_p(d))
  return d
end

local TINY = { limit = 600, test_limit = 100, hidden = 16, epochs = 2, threads = 1, test_samples = 2, batch = 50,
  lr = 0.01 }

describe("mnist.run", function()
  it("returns the epochs' records and the test accuracies of a finished run, and writes its summary", function()
    local dir = tmpdir()
    local t = {}
    for k, v in pairs(TINY) do t[k] = v end
    t.summary = dir .. "/s.json"
    local r = mnist.run(mnist.options(t))
    local f = assert(io.open(t.summary))
    local sum = bbb.json.decode(f:read("a"))
    f:close()
    assert.are.equal(r.test_acc_mc, sum.test_acc_mc)
    assert.are.same(bbb.core.environment(), sum.environment)   -- what a replay pins
    assert.are.equal("done", r.status)
    assert.are.equal(2, #r.history)
    for i, e in ipairs(r.history) do
      assert.are.equal(i, e.epoch)
      assert.is_true(e.elbo_per_example > 0, e.elbo_per_example)
    end
    assert.is_true(r.test_acc_mean > 0.3 and r.test_acc_mean <= 1, r.test_acc_mean)
    assert.is_true(r.test_acc_mc > 0.3 and r.test_acc_mc <= 1, r.test_acc_mc)
    assert.is_true(r.seconds > 0)
    assert.is_nil(r.curves)   -- only with --curves
    assert.is_nil(r.seed)     -- only with a seed's preset
  end)

  it("keeps the minibatch curves with --curves, one point per 20 steps", function()
    local dir = tmpdir()
    local t = {}
    for k, v in pairs(TINY) do t[k] = v end
    t.curves = dir .. "/c.png"
    local r = mnist.run(mnist.options(t))
    assert.are.equal(2 * 12 // 20, #r.curves.it)   -- 12 steps an epoch: one window of 20 in 24
    t.limit, t.batch = 2000, 50
    r = mnist.run(mnist.options(t))
    assert.are.equal(2 * 40 // 20, #r.curves.it)
    assert.are.equal(#r.curves.it, #r.curves.elbo)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("prune.run", function()
  it("tests the model pruned at each fraction, by SNR and by |mu|, fewer weights kept each time", function()
    local dir = tmpdir()
    local t = {}
    for k, v in pairs(TINY) do t[k] = v end
    t.save = dir .. "/m.ckpt"
    mnist.run(mnist.options(t))
    local r = prune.run(prune.parse { "--from", dir .. "/m.ckpt", "--fractions", "0.5,0.9",
      "--test-limit", "100", "--test-samples", "2", "--threads", "1", "--no-plot", "--out", dir .. "/p" })
    assert.are.equal(2, #r.rows)
    assert.are.equal(r.rows[1].total, r.rows[2].total)
    assert.is_true(r.rows[2].kept < r.rows[1].kept and r.rows[1].kept < r.rows[1].total)
    for _, row in ipairs(r.rows) do
      for _, k in ipairs { "snr_mean", "snr_mc", "magnitude_mean", "magnitude_mc" } do
        assert.is_true(row[k] >= 0 and row[k] <= 100, k)
      end
    end
    assert.are.equal(r.rows[1].total, #r.snr)
    assert.truthy(io.open(dir .. "/p-pruned.ckpt"))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("figure2.run", function()
  it("trains each net to --epochs in rounds and sums up its test errors", function()
    local dir = tmpdir()
    local r = figure2.run(figure2.parse { "--units", "8", "--methods", "sgd,bbb", "--epochs", "2", "--round", "1",
      "--limit", "400", "--val", "100", "--test-limit", "100", "--threads", "1", "--dir", dir,
      "--", "--test-samples", "2" })
    for _, m in ipairs { "sgd", "bbb" } do
      assert.are.equal(2, r.epochs[m])
      assert.are.equal(2, r.summary[m].epochs)
      assert.is_true(r.summary[m].final_test_error >= 0 and r.summary[m].final_test_error <= 100)
      assert.is_true(r.summary[m].best_val_epoch >= 1 and r.summary[m].best_val_epoch <= 2)
    end
    assert.is_nil(r.summary.dropout)
    assert.truthy(io.open(r.csv))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("regression.run", function()
  local regression = require "bbb.app.experiments.regression"
  it("returns each net's band over each range, the mean inside it, and the MLP's error", function()
    local r = regression.run(regression.parse { "--task", "sine", "--steps", "40", "--test-samples", "20",
      "--beta", "1,0.01", "--threads", "1", "--no-plot", "--xrange", "-7:7", "--xrange", "-3:3" })
    assert.are.equal(2, #r.nets)
    assert.are.same({ 1, 0.01 }, { r.nets[1].beta, r.nets[2].beta })
    for _, net in ipairs(r.nets) do
      assert.are.equal(2, #net.views)
      for _, v in ipairs(net.views) do
        assert.are.equal(400, #v.gx)
        for i = 1, #v.gx do assert.is_true(v.lo[i] <= v.m[i] and v.m[i] <= v.hi[i], i) end
      end
      assert.is_true(net.views[1].width_out > 0 and net.views[2].width_out == nil)   -- [-3, 3] is the data's range
      assert.is_true(net.coverage >= 0 and net.coverage <= 1)
      assert.is_true(net.terms.kl > 0)
    end
    assert.is_true(r.mlp_mse > 0)
    local q = regression.run(regression.parse { "--task", "toy", "--steps", "5", "--test-samples", "5", "--no-mlp",
      "--no-plot", "--threads", "1" })
    assert.is_nil(q.mlp_mse)
    assert.are.equal(1, #q.nets)
  end)
end)

describe("uci.run", function()
  local uci = require "bbb.app.experiments.uci"
  it("returns a row per set and method, each score's mean and standard error over the splits", function()
    local dir = tmpdir()
    local r = uci.run(uci.parse { "--sets", "boston", "--methods", "mlp", "--splits", "2", "--epochs", "2",
      "--test-samples", "5", "--threads", "1", "--out", dir .. "/u" })
    assert.are.equal(1, #r.rows)
    assert.are.same({ "boston", "mlp", 2 }, { r.rows[1].set, r.rows[1].method, r.rows[1].splits })
    assert.is_true(r.rows[1].rmse > 0 and r.rows[1].rmse_se >= 0)
    assert.are.equal(dir .. "/u", r.out)
    assert.truthy(io.open(dir .. "/u.csv"))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("plot_run.run", function()
  local plot_run = require "bbb.app.experiments.plot_run"
  it("keeps the last record of each epoch, in epoch order, as the curves to draw", function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/r.jsonl", "w"))
    f:write('{"epoch": 2, "elbo_per_example": 3, "val_acc": 0.5}\n{"epoch": 1, "elbo_per_example": 4}\n',
      '{"epoch": 2, "elbo_per_example": 2, "val_acc": 0.6}\n')
    f:close()
    local r = plot_run.run(plot_run.parse { dir .. "/r.jsonl", "--out", dir .. "/p" })
    assert.are.equal(1, #r.losses)
    assert.are.same({ { 1, 2 }, { 4, 2 } }, { r.losses[1].x, r.losses[1].y })
    assert.are.same({ { 2 }, { 60 } }, { r.accs[1].x, r.accs[1].y })
    assert.are.equal(dir .. "/p", r.prefix)
    assert.is_nil(r.model)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("bandit_ablation.run", function()
  local ablation = require "bbb.app.experiments.bandit_ablation"
  it("records each row and seed, and takes a recorded one from --results", function()
    local dir = tmpdir()
    local argv = { "--rows", "paper", "--seeds", "1,2", "--steps", "20", "--probes", "20", "--results", dir .. "/a.jsonl" }
    local r = ablation.run(ablation.parse(argv))
    for _, seed in ipairs { 1, 2 } do
      local rec = r.done["paper/" .. seed]
      assert.are.equal(20, rec.steps)
      assert.is_true(rec.regret["20"] >= 0)
      assert.truthy(rec.diag["20"])
    end
    local again = ablation.run(ablation.parse(argv))
    assert.are.same(r.done["paper/2"].regret, again.done["paper/2"].regret)
    local n = 0
    for _ in io.lines(dir .. "/a.jsonl") do n = n + 1 end
    assert.are.equal(2, n)   -- nothing played again
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

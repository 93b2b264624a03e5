-- The grid search as Lua: its configurations, its identity, the mnist.lua
-- config of a configuration and the command made from it, the result line
-- of a run's summary, the ranking, and grid.run on a tiny grid (its runs
-- are child processes, as always).
local helpers = require "helpers"
local grid = require "bbb.app.experiments.grid"
local mnist = require "bbb.app.experiments.mnist"
local json = require "bbb.json"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. helpers.q(tmp))

-- grid.parse of a grid of 4 configurations, words after it appended.
local function parse(more)
  local argv = { "--lr", "0.001,0.01", "--pi", "0.5", "--log-sigma1", "0", "--log-sigma2", "6,7", "--samples", "1",
    "--epochs", "1", "--val", "100", "--limit", "300", "--hidden", "8", "--jobs", "1", "--results", tmp .. "/g.jsonl" }
  for _, w in ipairs(more or {}) do argv[#argv + 1] = w end
  return grid.parse(argv)
end

local KEY = "lr=%s pi=0.5 log_sigma1=0 log_sigma2=%d samples=1 kl_weight=uniform optim=adam"

describe("grid.configurations", function()
  it("is the product of the axes, the first axis slowest, each with its key", function()
    local cs = grid.configurations(parse())
    assert.are.equal(4, #cs)
    assert.are.equal(KEY:format("0.001", 6), cs[1].key)
    assert.are.equal(KEY:format("0.001", 7), cs[2].key)
    assert.are.equal(KEY:format("0.01", 6), cs[3].key)
    assert.are.equal(KEY:format("0.01", 7), cs[4].key)
    assert.are.equal(0.01, cs[4].lr)
    assert.are.equal(7, cs[4].log_sigma2)
    assert.are.equal("uniform", cs[4].kl_weight)
    assert.are.equal("adam", cs[4].optim)
  end)

  it("takes a value given twice once", function()
    local cs = grid.configurations(grid.parse { "--lr", "1e-3,0.001", "--pi", "0.5", "--log-sigma1", "0",
      "--log-sigma2", "6", "--samples", "1,1", "--results", tmp .. "/one.jsonl" })
    assert.are.equal(1, #cs)
  end)
end)

describe("grid.identity", function()
  it("is the hash of the grid's description, as results files written before recorded it", function()
    local id, text = grid.identity(parse())
    assert.are.equal("lr=0.001,0.01 pi=0.5 log_sigma1=0 log_sigma2=6,7 samples=1 kl_weight=uniform optim=adam "
      .. "epochs=1 val=100 hidden=8 limit=300 seed=1 mnist=", text)
    assert.are.equal("56b8ca6a", id)
    assert.are.equal("52567021", (grid.identity(parse { "--", "--test-limit", "100", "--test-samples", "2" })))
  end)

  it("changes with a setting of the runs, not with where the results go or how many run at once", function()
    local id = grid.identity(parse())
    assert.are.equal(id, (grid.identity(parse { "--jobs", "2", "--results", tmp .. "/other.jsonl", "--top", "3" })))
    assert.are_not.equal(id, (grid.identity(parse { "--seed", "2" })))
    local _, text = grid.identity(parse { "--select", "val-error-min", "--halving", "3" })
    local tail = " halving=3 min_epochs=1 select=val-error-min"
    assert.are.equal(tail, text:sub(-#tail))
  end)
end)

describe("grid.mnist_config", function()
  it("turns a configuration into mnist.lua's flags: axis values, the grid's settings, one thread", function()
    local args = parse()
    local t = grid.mnist_config(args, grid.configurations(args)[4])
    assert.are.same({ lr = 0.01, pi = 0.5, sigma1 = 1, sigma2 = math.exp(-7), samples = 1, kl_weight = "uniform",
      optim = "adam", epochs = 1, val = 100, hidden = 8, limit = 300, seed = 1, threads = 1 }, t)
  end)

  it("under --no-test gives every run --no-test, and the --final run's config drops it", function()
    local args = parse { "--no-test" }
    local c = grid.configurations(args)[1]
    local t = grid.mnist_config(args, c)
    assert.is_true(t.no_test)
    assert.is_true(mnist.options(t).no_test)
    assert.is_nil(grid.mnist_config(parse(), c).no_test)
    local final = grid.mnist_config(args, c, { val = false, no_test = false })
    assert.are.equal(false, final.no_test)
    assert.is_nil(mnist.options(final).no_test)
    -- a grid that reads no test image is another grid than one that does
    local _, text = grid.identity(args)
    assert.are.equal(" no_test", text:sub(-8))
  end)

  it("takes a run's own settings over the grid's, false dropping one", function()
    local args = parse()
    local t = grid.mnist_config(args, grid.configurations(args)[1], { epochs = 5, val = false, threads = 2,
      checkpoint = "c.ckpt" })
    assert.are.equal(5, t.epochs)
    assert.are.equal(false, t.val)
    assert.are.equal(2, t.threads)
    assert.are.equal("c.ckpt", t.checkpoint)
  end)

  it("is a config mnist.lua accepts, and its command line carries it with the flags after -- as given", function()
    local args = parse { "--", "--test-limit", "100", "--batch", "64" }
    local t = grid.mnist_config(args, grid.configurations(args)[2], { val = false })
    local m = mnist.options(t)
    assert.are.equal(0.001, m.lr)
    assert.are.equal(math.exp(-7), m.sigma2)
    assert.are.equal(300, m.limit)
    assert.is_nil(m.val)
    local argv = grid.mnist_argv("m.lua", t, args.mnist_flags)
    assert.are.equal("m.lua", argv[2])
    assert.are.same({ "--test-limit", "100", "--batch", "64" }, { table.unpack(argv, #argv - 3) })
    -- the words after the interpreter parse back to the same config
    local back = mnist.parse { table.unpack(argv, 3) }
    for _, k in ipairs { "lr", "pi", "sigma1", "sigma2", "samples", "epochs", "hidden", "limit", "seed" } do
      assert.are.equal(m[k], back[k], k)
    end
    assert.are.equal(100, back.test_limit)
    assert.are.equal(64, back.batch)
  end)
end)

describe("grid.outcome", function()
  local g = { id = "0badcafe", text = "the grid", select = "val-error" }
  local c = grid.configurations(parse())[3]
  local function epoch(i, val_acc, test_acc, more)
    local e = { epoch = i, val_acc = val_acc, test_acc = test_acc, elbo_per_example = 1.5, nll_per_example = 0.5 }
    for k, v in pairs(more or {}) do e[k] = v end
    return e
  end
  local summary = json.encode { test_acc_mean = 0.8, test_acc_mc = 0.82,
    epochs = { epoch(1, 0.8, 0.7), epoch(2, 0.9, 0.85), epoch(3, 0.85, 0.8, { sigma_mean = { 0.25, 0.5 } }) } }

  it("ranks a run that ended well by its last validation error", function()
    local r = grid.outcome(g, c, 0, summary, "", 7)
    assert.are.equal("ok", r.status)
    assert.are.equal("0badcafe", r.grid)
    assert.are.equal("the grid", r.grid_text)
    assert.are.equal(c.key, r.key)
    assert.are.same({ lr = 0.01, pi = 0.5, log_sigma1 = 0, log_sigma2 = 6, samples = 1, kl_weight = "uniform",
      optim = "adam" }, r.config)
    assert.are.equal(3, r.epochs)
    assert.are.equal(7, r.seconds)
    assert.near(15, r.val_error, 1e-9)
    assert.are.equal(0.82, r.test_acc_mc)
    assert.are.same({ 0.25, 0.5 }, r.sigma_mean)
    assert.is_nil(r.best_epoch)
  end)

  it("with --select val-error-min, by its best epoch, with the test figure there", function()
    local r = grid.outcome({ id = "x", text = "t", select = "val-error-min" }, c, 0, summary, "", 1)
    assert.near(10, r.val_error, 1e-9)
    assert.are.equal(2, r.best_epoch)
    assert.are.equal(0.85, r.test_acc_at_best)
  end)

  it("ranks a --no-test run, whose summary has no test figure, by its validation error", function()
    local no_test = json.encode { val_acc_mean = 0.9, val_acc_mc = 0.91,
      epochs = { epoch(1, 0.8), epoch(2, 0.9) } }
    local r = grid.outcome({ id = "x", text = "t", select = "val-error-min" }, c, 0, no_test, "", 1)
    assert.are.equal("ok", r.status)
    assert.near(10, r.val_error, 1e-9)
    assert.are.equal(2, r.best_epoch)
    assert.is_nil(r.test_acc_mc)
    assert.is_nil(r.test_acc_at_best)
  end)

  it("keeps out a run without a finite validation figure, one that diverged and one that failed", function()
    local no_val = json.encode { epochs = { epoch(1, nil, 0.5) }, test_acc_mean = 0.5, test_acc_mc = 0.5 }
    assert.are.equal("non-finite", grid.outcome(g, c, 0, no_val, "", 1).status)
    local r = grid.outcome(g, c, 1, nil, "epoch 1\nAdam: step 7: the gradient of 1.weight_mu is not finite\n\n", 1)
    assert.are.equal("diverged", r.status)
    assert.are.equal("Adam: step 7: the gradient of 1.weight_mu is not finite", r.message)
    assert.is_nil(r.val_error)
    r = grid.outcome(g, c, 2, summary, "mnist.lua: --batch: expected a positive integer", 1)
    assert.are.equal("failed", r.status)
    assert.are.equal("mnist.lua: --batch: expected a positive integer", r.message)
    assert.are.equal("failed", grid.outcome(g, c, 0, "{not json", nil, 1).status)
  end)
end)

describe("grid.rank", function()
  it("orders the runs that finished well by validation error, then key", function()
    local ranked = grid.rank {
      { key = "b", status = "ok", val_error = 2 }, { key = "a", status = "failed" },
      { key = "c", status = "ok", val_error = 1 }, { key = "a", status = "ok", val_error = 2 },
      { key = "d", status = "ok", val_error = 0.5, ranked_out = true },
    }
    assert.are.equal(3, #ranked)
    assert.are.equal("c", ranked[1].key)
    assert.are.equal("a", ranked[2].key)
    assert.are.equal("b", ranked[3].key)
  end)
end)

describe("grid.run", function()
  it("trains every configuration, ranks them, and a second run takes them from the results file", function()
    local script = helpers.root .. "/scripts/mnist.lua"
    local args = parse { "--results", tmp .. "/run.jsonl", "--", "--test-limit", "100", "--test-samples", "1" }
    local r = grid.run(args, { mnist_script = script })
    assert.are.equal((grid.identity(args)), r.grid)
    assert.are.equal(4, #r.results)
    assert.are.equal(4, #r.ranked)
    assert.are.equal(4, r.budget)
    for i, x in ipairs(r.ranked) do
      assert.are.equal("ok", x.status, x.message)
      assert.are.equal(r.grid, x.grid)
      assert.is_true(x.val_error >= 0 and x.val_error <= 100)
      if i > 1 then assert.is_true(r.ranked[i - 1].val_error <= x.val_error) end
    end
    assert.are.same(r, grid.report(r))
    local lines = 0
    for line in io.lines(args.results) do
      lines = lines + 1
      assert.are.equal(r.grid_text, json.decode(line).grid_text)
    end
    assert.are.equal(4, lines)
    local again = grid.run(args, { mnist_script = script })
    assert.are.equal(4, #again.results)
    for i, x in ipairs(again.ranked) do
      assert.are.equal(r.ranked[i].key, x.key)
      assert.are.equal(r.ranked[i].val_error, x.val_error)
    end
  end)
end)

teardown(function() os.execute("rm -rf " .. helpers.q(tmp)) end)

-- grid.lua on a grid of one configuration, words after it appended.
local ONE = "scripts/grid.lua --epochs 1 --limit 300 --val 100 --lr 1e-3 --pi 0.5 --log-sigma1 0 --log-sigma2 6 "
  .. "--samples 1 --hidden 8 --jobs 1"

describe("the results file", function()
  it("is one grid's at a time: a second run on it is refused while the first holds it", function()
    local path = tmp .. "/locked.jsonl"
    os.execute("mkdir -p " .. helpers.q(tmp .. "/locked.runs"))
    local lock = assert(require("bbb.core").sys.lock(grid.lock_path(path)))
    local status, out = helpers.run(("scripts/grid.lua --epochs 1 --limit 300 --val 100 --lr 1e-3 --pi 0.5 "
      .. "--log-sigma1 0 --log-sigma2 6 --samples 1 --hidden 8 --jobs 1 --results %s"):format(helpers.q(path)))
    assert.are.equal(2, status, out)
    helpers.has(out, "grid.lua: --results: '" .. path .. "' is being written by another run")
    lock:release()
  end)

  it("is written whole or not at all: past a file size limit the grid fails and the file stays as it was", function()
    local path = tmp .. "/full.jsonl"
    -- the limit in bytes (the shell's ulimit counts blocks of its own size)
    local probe = tmp .. "/probe"
    helpers.sh(("ulimit -f 128; head -c 1000000 /dev/zero > %s"):format(helpers.q(probe)))
    local limit = #helpers.read(probe)
    assert.is_true(limit > 4000 and limit < 1000000, tostring(limit))
    -- a line that is no result (skipped with a warning) fills the file to
    -- just under the limit, so the first result line can fit only in part
    local before = ("x"):rep(limit - 200) .. "\n"
    helpers.write(path, before)
    local out, status = helpers.sh(("cd %s && ulimit -f 128 && %s %s --results %s -- --test-limit 100 --test-samples 1")
      :format(helpers.q(helpers.root), helpers.q(helpers.bbblua), ONE, helpers.q(path)))
    assert.are.equal(1, status, out)
    helpers.has(out, "grid.lua: cannot write the results file " .. path .. ": File too large")
    assert.are.equal(before, helpers.read(path))
    local left = helpers.sh("ls -A " .. helpers.q(tmp))
    assert.falsy(left:find("full.jsonl.bbb-tmp", 1, true), left)
  end)
end)

describe("grid.lua's flags", function()
  it("refuses a flag that cannot act in the grid, naming it and why, before any run", function()
    local cases = {
      { "--min-epochs 2", "--min-epochs cannot act in this run: it sets the first rung of --halving, which is not given" },
      { "--final-epochs 3", "--final-epochs cannot act in this run: it sets the --final run, which is not asked for" },
      { "--final-threads 1", "--final-threads cannot act in this run: it sets the --final run" },
      { "--pi 0.25,0.5 -- --model mlp", "--pi cannot act in this run: --model mlp (after --) has no Bayesian layers, "
        .. "so its 2 values would train the same net 2 times: give one value" },
      { "--log-sigma2 6,7 -- --model=dropout", "--log-sigma2 cannot act in this run: --model dropout (after --)" },
      { "--samples 1,2 -- --model cnn-plain", "--samples cannot act in this run: --model cnn-plain (after --) draws no noise" },
      { "--optim adam,sgd -- --momentum 0.5", "mnist.lua: --momentum cannot act in this run: --optim adam has no momentum" },
      { "-- --dropout 0.3", "mnist.lua: --dropout cannot act in this run: --model bbb has no dropout" },
    }
    for i, c in ipairs(cases) do
      local path = ("%s/idle%d.jsonl"):format(tmp, i)
      local status, out = helpers.run(ONE .. " --results " .. helpers.q(path) .. " " .. c[1])
      assert.are.equal(2, status, c[1] .. ":\n" .. out)
      helpers.has(out, c[2])
      assert.falsy(out:find("start lr=", 1, true), out)
      assert.is_nil(helpers.read(path))
    end
  end)
end)

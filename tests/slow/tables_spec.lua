-- The paper's tables: smoke runs of prune.lua, grid.lua and table1.lua on
-- tiny settings, the grid's resume after SIGKILL, and their bad input.
local helpers = require "helpers"
local root = helpers.root
local bbblua = helpers.bbblua
local run, has, ok = helpers.run, helpers.has, helpers.ok
local json = require "bbb.json"




local function fails(args, ...)
  local status, out = run(args)
  assert.are_not.equal(0, status, out)
  for _, want in ipairs{...} do has(out, want) end
  return out
end

local function lines(path)
  local out = {}
  local f = io.open(path)
  if not f then return out end
  for l in f:lines() do out[#out + 1] = l end
  f:close()
  return out
end

local function png(path)
  local f = assert(io.open(path, "rb"), path)
  assert.are.equal("\137PNG", f:read(4))
  f:close()
end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

local TINY = "--epochs 1 --limit 600 --test-limit 100 --hidden 12 --test-samples 2"
local GRID = "scripts/grid.lua --lr 0.001,0.01 --pi 0.5 --log-sigma1 0 --log-sigma2 6,7 --samples 1 "
  .. "--epochs 1 --val 100 --limit 500 --hidden 8 --jobs 1"

describe("the table scripts", function()
  it("answer --help", function()
    for _, s in ipairs { "prune", "grid", "table1", "figure2" } do ok("scripts/" .. s .. ".lua --help", "Usage:") end
  end)

  it("prune.lua trains through mnist.lua, prints the table, saves a pruned model and draws", function()
    local prefix = tmp .. "/p"
    local out = ok("scripts/prune.lua --fractions 0,0.5,0.95,1 --test-limit 200 --test-samples 2 --out " .. prefix
      .. " -- " .. TINY, "training: ", "removed", "SNR mean", "|mu| MC", "paper", "seed003",
      "pruned model (95% removed by SNR) saved to " .. prefix .. "-pruned.ckpt",
      "wrote " .. prefix .. "-snr-hist.png", "wrote " .. prefix .. "-error.png")
    png(prefix .. "-snr-hist.png")
    png(prefix .. "-error.png")
    -- weights left: 784*12+12 + 12*12+12 + 12*10+10 = 9706 in all
    has(out, "9706")
    assert.are.equal("4853", out:match("\n50%%%s+(%d+)"), out)
    -- everything removed: every output is 0, the prediction is class 1 for
    -- every image, so the error is the share of the other digits (not 0)
    local f = assert(io.open(prefix .. "-table.json"))
    local t = json.decode(f:read("a"))
    f:close()
    assert.are.equal(4, #t.rows)
    assert.are.equal(0, t.rows[4].kept)
    assert.is_true(t.rows[4].snr_mc > 50)
    -- the pruned checkpoint holds its masks: 95% of the weights are 0
    local bbb = require "bbb"
    local net = bbb.load(prefix .. "-pruned.ckpt")
    local kept = 0
    net:apply(function(m)
      if m.weight_mask then kept = kept + m.weight_mask:sum():item() + m.bias_mask:sum():item() end
    end)
    assert.are.equal(9706 - math.floor(0.95 * 9706 + 0.5), kept)
    -- and prunes again from it with --from, without training
    out = ok("scripts/prune.lua --from " .. prefix .. "-pruned.ckpt --fractions 0,0.99 --test-limit 100 --no-plot --out "
      .. tmp .. "/p2", "removed")
    assert.falsy(out:find("training: ", 1, true), out)
  end)

  it("grid.lua --halving trains rung by rung on the survivors, resumes them, and a rerun trains nothing", function()
    local results = tmp .. "/halving.jsonl"
    local cmd = "scripts/grid.lua --lr 0.001,0.01 --pi 0.5 --log-sigma1 0,1 --log-sigma2 6 --samples 1 --val 100 "
      .. "--limit 300 --hidden 8 --jobs 1 --epochs 4 --min-epochs 1 --halving 2 --results " .. results
    local out = ok(cmd, "rung 1: 4 configuration(s) trained to 1 epochs", "the best 2 go on",
      "rung 2: 2 configuration(s) trained to 2 epochs", "rung 3: 1 configuration(s) trained to 4 epochs",
      "budget: 8 configuration-epochs, against 16")
    -- the survivors' later rungs resume their checkpoints: the log of rung 3
    -- has 4 epochs, not 2 after a fresh start
    local lines = 0
    for line in io.lines(results) do
      lines = lines + 1
      local r = json.decode(line)
      if r.rung == 3 then assert.are.equal(4, r.epochs, line) end
    end
    assert.are.equal(7, lines)
    out = ok(cmd, "rung 3: 1 configuration(s)")
    assert.falsy(out:find("start", 1, true), out)
  end)

  it("table1.lua --protocol paper chooses each row's setting on the validation split by successive halving", function()
    local out = ok("scripts/table1.lua --protocol paper --units 8 --methods sgd,bbb-gaussian --epochs 3 --min-epochs 1 "
      .. "--limit 10300 --jobs 2 --out " .. tmp .. "/t1p.json -- --test-limit 100",
      "Table 1 by the paper's protocol", "mean sigma per layer", "rows written to")
    local f = assert(io.open(tmp .. "/t1p.json"))
    local t = json.decode(f:read("a"))
    f:close()
    assert.are.equal(2, #t.rows)
    assert.are.equal(5, t.rows[1].settings)       -- sgd: five learning rates
    assert.are.equal(36, t.rows[2].settings)      -- the paper's lr x samples x sigma grid
    assert.are.equal(36 * 1 + 12 * 2, t.rows[2].budget, out)   -- rungs of 1 and 3 epochs, the best third go on
    assert.truthy(t.rows[2].chosen:find("optim=sgd", 1, true))
    -- early stopping's figure from the chosen run's checkpoint: an epoch of its
    -- 3 and a test error, printed beside the row
    for _, r in ipairs(t.rows) do
      assert.is_true(r.best_epoch >= 1 and r.best_epoch <= 3, out)
      assert.is_true(r.test_error_at_best >= 0 and r.test_error_at_best <= 100, out)
    end
    has(out, "(best validation)")
  end)

  it("prune.lua refuses bad input", function()
    fails("scripts/prune.lua --fractions 0,1.5", "--fractions: number '1.5' is out of range: must be in [0, 1]")
    fails("scripts/prune.lua --fractions=-0.1", "--fractions: number '-0.1' is out of range")
    fails("scripts/prune.lua --out " .. tmp .. "/bad --from " .. tmp .. "/missing.ckpt", "prune.lua: --from:", "missing.ckpt")
    ok("scripts/mnist.lua --model mlp --save " .. tmp .. "/mlp.ckpt " .. TINY, "model saved")
    fails("scripts/prune.lua --out " .. tmp .. "/bad --from " .. tmp .. "/mlp.ckpt",
      "has no Bayesian layers (BayesLinear) to prune")
  end)

  it("grid.lua runs, ranks, resumes after SIGKILL without rerunning a finished configuration", function()
    local results = tmp .. "/grid.jsonl"
    -- killed (the whole process group, as a terminal would) once the first
    -- configuration is in the file
    local pidfile = tmp .. "/grid.pid"
    os.execute(("cd %q && (setsid %q %s --results %q > %q 2>&1 & echo $! > %q)"):format(root, bbblua, GRID,
      results, tmp .. "/grid1.log", pidfile))
    local pid = tonumber(lines(pidfile)[1])
    assert.truthy(pid)
    for _ = 1, 1200 do
      if #lines(results) >= 1 then break end
      os.execute("sleep 0.1")
    end
    os.execute("kill -9 -" .. pid .. " 2>/dev/null")
    os.execute("sleep 0.3")
    local before = lines(results)
    assert.is_true(#before >= 1, table.concat(lines(tmp .. "/grid1.log"), "\n"))
    assert.is_true(#before < 4, "the grid finished before it was killed")
    local finished = {}
    for _, l in ipairs(before) do finished[json.decode(l).key] = true end

    local out = ok(GRID .. " --results " .. results, ("%d finished in %s"):format(#before, results),
      ("%d to run"):format(4 - #before), "ranking by validation error")
    for key in pairs(finished) do
      assert.falsy(out:find("start " .. key, 1, true), "reran " .. key .. ":\n" .. out)
    end
    local after, seen = lines(results), {}
    assert.are.equal(4, #after)
    for _, l in ipairs(after) do
      local r = json.decode(l)
      assert.is_nil(seen[r.key])
      seen[r.key] = true
      assert.are.equal("ok", r.status)
      assert.is_true(r.val_error >= 0 and r.val_error <= 100)
    end
    -- the ranking lists all four, best first
    local errs = {}
    for e in out:gmatch("\n%s*%d+%.%s+([%d.]+)%%") do errs[#errs + 1] = tonumber(e) end
    assert.are.equal(4, #errs)
    for i = 2, 4 do assert.is_true(errs[i - 1] <= errs[i]) end

    -- a third run has nothing to do
    ok(GRID .. " --results " .. results, "4 finished", "0 to run")
  end)

  it("grid.lua skips a corrupted line with a warning, counts failures per axis, refuses another grid's file", function()
    local results = tmp .. "/grid2.jsonl"
    ok(GRID .. " --results " .. results, "0 finished", "4 to run")
    local ls = lines(results)
    -- one configuration marked as diverged, one line cut short by a kill
    local r = json.decode(ls[2])
    r.status, r.val_error, r.message = "diverged", nil, "Adam: step 7: the gradient of 1.weight_mu is not finite"
    ls[2] = json.encode(r)
    local f = assert(io.open(results, "w"))
    f:write(table.concat(ls, "\n"), "\n", '{"grid": "', r.grid, '", "key": "lr=0')
    f:close()
    local out = ok(GRID .. " --results " .. results, "warning: skipping line 5 of " .. results,
      "4 finished", "0 to run", "diverged, gave non-finite values or failed: 1 of 4")
    -- the diverged configuration is lr=0.001, log_sigma2=7 (the second line)
    has(out, "lr         0.001: 1/2  0.01: 0/2")
    has(out, "log_sigma2 6: 0/2  7: 1/2")
    -- the corrupted line did not swallow the next append
    ok(GRID:gsub("%-%-log%-sigma2 6,7", "--log-sigma2 6,7,8") .. " --results " .. tmp .. "/grid3.jsonl", "6 to run")
    fails(GRID .. " --epochs 2 --results " .. results, "holds results of a different grid",
      "Give another --results file")
  end)

  it("grid.lua --final retrains the best configuration and tests it", function()
    ok("scripts/grid.lua --lr 0.001 --pi 0.5 --log-sigma1 0 --log-sigma2 6 --samples 1 --epochs 1 --val 100 "
      .. "--limit 400 --hidden 8 --jobs 1 --final --final-threads 1 --results " .. tmp .. "/final.jsonl -- --test-limit 100",
      "final: lr=0.001", "test error")
  end)

  it("grid.lua refuses bad axes", function()
    fails("scripts/grid.lua --pi 0.5,2", "--pi: number '2' is out of range")
    fails("scripts/grid.lua --kl-weight uniform,sometimes", "--kl-weight: expected uniform, blundell or a number")
    fails("scripts/grid.lua --optim adam,lbfgs", "--optim: expected one of adam, sgd, rmsprop, got 'lbfgs'")
    fails("scripts/grid.lua --lr ,", "--lr: expected a comma-separated list")
    fails("scripts/grid.lua --val 500 --limit 500", "--val 500 leaves no training images: the training set has 500 (--limit)")
    fails("scripts/grid.lua --val 60000", "--val 60000 leaves no training images")
    fails("scripts/grid.lua --select val-loss", "--select: expected one of val-error, val-error-min, got 'val-loss'")
  end)

  it("grid.lua --select val-error-min ranks by each run's best validation epoch and keeps its test error", function()
    local results = tmp .. "/grid_min.jsonl"
    local cmd = GRID:gsub("%-%-epochs 1", "--epochs 3") .. " --select val-error-min --results " .. results
      .. " -- --test-limit 100"
    ok(cmd, "ranking by the lowest validation error over the epochs", "test error there")
    local n = 0
    for _, line in ipairs(lines(results)) do
      local r = json.decode(line)
      n = n + 1
      assert.are.equal("ok", r.status, line)
      assert.is_true(r.best_epoch >= 1 and r.best_epoch <= 3, line)
      -- the lowest validation error over the epochs, never above the last one's
      assert.is_true(r.val_error <= 100 * (1 - r.val_acc) + 1e-9, line)
      assert.is_true(r.test_acc_at_best > 0 and r.test_acc_at_best <= 1, line)
      assert.truthy(r.grid_text:find("select=val-error-min", 1, true), line)
    end
    assert.are.equal(4, n)
  end)

  it("table1.lua --protocol paper --lr --samples narrow the Bayesian grid and say so", function()
    local out = ok("scripts/table1.lua --protocol paper --units 8 --methods sgd,bbb-mixture --epochs 1 --lr 1e-3 "
      .. "--samples 1,2 --limit 10300 --jobs 2 --out " .. tmp .. "/t1n.json -- --test-limit 100",
      "the grid narrowed to lr 0.001, samples 1,2", "rows written to")
    local f = assert(io.open(tmp .. "/t1n.json"))
    local t = json.decode(f:read("a"))
    f:close()
    assert.are.equal(1, t.rows[1].settings, out)          -- sgd: one learning rate, no samples axis
    assert.are.equal("1", t.rows[1].axes.samples)
    assert.are.equal(27 * 2, t.rows[2].settings, out)     -- the 27 priors x 2 sample counts
    assert.are.equal("0.001", t.rows[2].axes.lr)
    assert.are.equal("0.25,0.5,0.75", t.rows[2].axes.pi)
  end)

  it("table1.lua --protocol paper refuses what would leave it nothing to run, before any run", function()
    fails("scripts/table1.lua --protocol paper --limit 9000 --out " .. tmp .. "/no.json",
      "--limit 9000 leaves no training images beside the protocol's 10000 validation images")
    fails("scripts/table1.lua --protocol paper --select val-loss", "--select: expected one of val-error, val-error-min")
    fails("scripts/table1.lua --protocol paper --methods ,", "--methods: expected a comma-separated list")
    fails("scripts/table1.lua --protocol paper --units ,", "--units: expected a comma-separated list")
    fails("scripts/table1.lua --protocol paper --lr 1e-3,0", "--lr:")
    fails("scripts/table1.lua --protocol paper --samples 0", "--samples:")
    fails("scripts/table1.lua --lr 1e-3", "--lr and --samples narrow the paper protocol's grid: they need --protocol paper")
    assert.is_nil(io.open(tmp .. "/no.json"))
  end)

  it("the paper-N presets are the settings the paper's protocol chose, and start as its run did", function()
    local mnist = require "bbb.app.experiments.mnist"
    local paper = require "bbb.app.experiments.table1_paper"
    for _, units in ipairs { 400, 800, 1200 } do
      -- each width's finished search of the scale-mixture row: the preset holds its choice
      local f = assert(io.open(root .. "/tests/fixtures/table1_paper_chosen.json"))
      local flags = mnist.PRESETS["paper-" .. units].flags
      local t = json.decode(f:read("a"))[tostring(units)]
      f:close()
      local row
      for _, r in ipairs(t.rows) do if r.method == "bbb-mixture" and r.config then row = r end end
      assert(row, units .. ": no scale-mixture row")
      local c = assert(mnist.PAPER_CHOICE[units], units .. ": the preset does not hold the search's choice")
      for _, k in ipairs { "lr", "samples", "pi", "log_sigma1", "log_sigma2" } do
        assert.are.equal(row.config[k], c[k], units .. " " .. k)
      end
      assert.is_near(math.exp(-c.log_sigma2), flags.sigma2, 1e-12, units .. " sigma2")
      assert.are.equal(c.pi, flags.pi, units .. " pi")
      -- the protocol's fixed flags, as mnist.lua reads them
      for i = 1, #paper.FIXED, 2 do
        local k = paper.FIXED[i]:sub(3):gsub("-", "_")
        assert.are.equal(tonumber(paper.FIXED[i + 1]) or paper.FIXED[i + 1], flags[k], units .. " " .. k)
      end
      assert.are.equal(paper.VAL, flags.val)
      assert.are.equal("sgd", flags.optim)
    end
    -- its first epoch is the search's (rung 1 of the chosen setting: validation error 5.70%,
    -- test error 5.97% with posterior means), made on OpenBLAS 0.3.21's Haswell kernels:
    -- pinned to them, the products (and so every digit) are the search's
    local ok_env, why = helpers.recorded_environment()
    if not ok_env then
      pending(why)
      return
    end
    local status, out = run("scripts/mnist.lua --preset paper-400 --epochs 1 --test-samples 2 --threads 1",
      "OPENBLAS_CORETYPE=Haswell")
    assert.are.equal(0, status, out)
    has(out, "val 94.30%")
    has(out, "posterior means 94.03%")
  end)

  it("table1.lua runs the rows and prints the paper's numbers beside ours", function()
    local out = ok("scripts/table1.lua --units 400 --methods sgd,bbb-mixture --epochs 1 --threads 1 --out "
      .. tmp .. "/t1.json -- --limit 300 --test-limit 100 --test-samples 2 --hidden 10",
      "== sgd, 2x400", "== bbb-mixture, 2x400", "Table 1", "1.83%", "1.36%")
    has(out, "rows written to " .. tmp .. "/t1.json")
    local f = assert(io.open(tmp .. "/t1.json"))
    local t = json.decode(f:read("a"))
    f:close()
    assert.are.equal(2, #t.rows)
    for _, r in ipairs(t.rows) do
      assert.is_true(r.test_error >= 0 and r.test_error <= 100)
      assert.are.equal(300, r.train_images)
    end
    -- table1's own --limit reaches the runs as -- --limit does
    ok("scripts/table1.lua --units 16 --methods sgd --epochs 1 --threads 1 --limit 250 --out "
      .. tmp .. "/t1l.json -- --test-limit 100")
    f = assert(io.open(tmp .. "/t1l.json"))
    t = json.decode(f:read("a"))
    f:close()
    assert.are.equal(250, t.rows[1].train_images)
    fails("scripts/table1.lua --methods sgd,bayes", "--methods: expected one of sgd, dropout, bbb-gaussian, bbb-mixture")
  end)

  it("figure2.lua trains the three nets in turn, resumes each, and gives the bits of an unbroken run", function()
    local F2 = "scripts/figure2.lua --units 10 --limit 900 --val 150 --test-limit 100 --threads 1 -- --test-samples 2"
    -- two rounds of one epoch, then a third epoch asked for later
    local out = ok(F2:gsub(" %-%-", " --epochs 2 --round 1 --dir " .. tmp .. "/f2a --", 1),
      "== bbb: epochs 1-1 of 2", "== sgd: epochs 2-2 of 2", "== dropout: epochs 2-2 of 2", "best val at")
    out = ok(F2:gsub(" %-%-", " --epochs 3 --round 1 --dir " .. tmp .. "/f2a --", 1),
      "bbb 2 done, sgd 2 done, dropout 2 done", "resuming " .. tmp .. "/f2a/bbb-10.ckpt after epoch 2")
    assert.falsy(out:find("epochs 1-", 1, true), out)
    png(tmp .. "/f2a/figure2-10.png")
    -- the same three epochs in one round each
    ok(F2:gsub(" %-%-", " --epochs 3 --round 3 --dir " .. tmp .. "/f2b --", 1), "wrote")
    local a, b = lines(tmp .. "/f2a/figure2-10.csv"), lines(tmp .. "/f2b/figure2-10.csv")
    assert.are.same({ "epoch,bbb,sgd,dropout" }, { a[1] })
    assert.are.equal(4, #a)
    assert.are.same(b, a)
    for i = 2, 4 do assert.truthy(a[i]:match("^%d,%d+%.%d%d,%d+%.%d%d,%d+%.%d%d$"), a[i]) end
    local f = assert(io.open(tmp .. "/f2a/figure2-10.json"))
    local t = json.decode(f:read("a"))
    f:close()
    assert.are.equal(3, t.methods.bbb.epochs)
    assert.are.equal(3, #t.methods.bbb.sigma_mean)       -- a real posterior: each layer's sigma is logged
    assert.is_nil(t.methods.sgd.sigma_mean)
  end)

  it("figure2.lua --from goes on from the protocol's chosen run: the bits of a net trained from its start", function()
    ok("scripts/table1.lua --protocol paper --units 10 --methods sgd --epochs 3 --min-epochs 1 --limit 10300 "
      .. "--jobs 1 --out " .. tmp .. "/t1f.json -- --test-limit 100", "rows written to")
    local f = assert(io.open(tmp .. "/t1f.json"))
    local t = json.decode(f:read("a"))
    f:close()
    local ck = t.rows[1].checkpoint
    assert.truthy(ck and ck:find("%.ckpt$"), tostring(ck))
    -- the same row without its checkpoint: that net trains from epoch 1
    t.rows[1].checkpoint = nil
    f = assert(io.open(tmp .. "/t1f-nock.json", "w"))
    f:write(json.encode(t))
    f:close()
    local F2 = "scripts/figure2.lua --units 10 --methods sgd --epochs 4 --round 4 --limit 10300 --test-limit 100 "
      .. "--threads 1 "
    local out = ok(F2 .. "--from " .. tmp .. "/t1f.json --dir " .. tmp .. "/f2e",
      "goes on from the protocol's chosen run, " .. ck .. " (3 epochs)", "== sgd: epochs 4-4 of 4")
    assert.falsy(out:find("epochs 1-", 1, true), out)
    out = ok(F2 .. "--from " .. tmp .. "/t1f-nock.json --dir " .. tmp .. "/f2f", "== sgd: epochs 1-4 of 4")
    local a, b = lines(tmp .. "/f2e/figure2-10.csv"), lines(tmp .. "/f2f/figure2-10.csv")
    assert.are.equal(5, #a)
    assert.are.same(b, a)
  end)

  it("figure2.lua takes the protocol's chosen settings and refuses bad input", function()
    local rows = tmp .. "/chosen.json"
    local f = assert(io.open(rows, "w"))
    f:write(json.encode{ rows = { { method = "sgd", units = 10, chosen = "lr=0.0001 pi=0.5 log_sigma1=0 "
      .. "log_sigma2=6 samples=1 kl_weight=uniform optim=sgd" } } })
    f:close()
    ok("scripts/figure2.lua --units 10 --methods sgd --epochs 1 --limit 600 --val 100 --test-limit 100 --threads 1 "
      .. "--from " .. rows .. " --dir " .. tmp .. "/f2c", "optimizer sgd lr 0.0001")
    fails("scripts/figure2.lua --methods bbb,bbb", "--methods: 'bbb' is given twice")
    fails("scripts/figure2.lua --methods bbb,adam", "--methods: expected one of bbb, sgd, dropout")
    fails("scripts/figure2.lua --round 0", "--round")
    fails("scripts/figure2.lua --from " .. tmp .. "/missing.json --dir " .. tmp .. "/f2d", "--from:", "missing.json")
    fails("scripts/figure2.lua --units 10 --from " .. rows .. "," .. rows .. " --dir " .. tmp .. "/f2d",
      "--from: the sgd row of 2x10 is in both " .. rows .. " and " .. rows)
    f = assert(io.open(tmp .. "/other.json", "w"))
    f:write('{"epochs": [1, 2]}\n')
    f:close()
    fails("scripts/figure2.lua --from " .. tmp .. "/other.json --dir " .. tmp .. "/f2d",
      "is not the JSON that table1.lua --protocol paper writes")
  end)
end)

-- The training loop: resume bit for bit, Ctrl-C, the JSONL log, and
-- mnist.lua's checks of its flags before any training.
local bbb = require "bbb"
local cjson = require "cjson"

local helpers = require "helpers"
local run = helpers.run

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)


local function lines_of(path)
  local out = {}
  for l in io.lines(path) do out[#out + 1] = l end
  return out
end

-- the JSON a run wrote (--summary)
local function summary(path)
  local f = assert(io.open(path))
  local t = cjson.decode(f:read("a"))
  f:close()
  return t
end

-- the figures of an epoch record, without its timings
local FIGURES = { "epoch", "elbo_per_example", "nll_per_example", "complexity_total", "complexity_per_example",
                  "train_acc", "test_acc", "lr" }
local function same_epoch(want, got, what)
  for _, k in ipairs(FIGURES) do
    assert.is_not_nil(want[k], ("%s: %s"):format(what, k))
    assert.are.equal(want[k], got[k], ("%s: %s"):format(what, k))
  end
  assert.are.same(want.sigma_mean, got.sigma_mean, what .. ": sigma_mean")
end

local function same_tensors(a, b)
  local ta, tb = bbb.checkpoint.read(a), bbb.checkpoint.read(b)
  local n = 0
  for k, t in pairs(ta) do
    if k:match("^model%.") then
      n = n + 1
      assert.truthy(tb[k], k)
      assert.are.equal(0, (t - tb[k]):abs():max():item(), k)
    end
  end
  return n
end

local function my_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("a"):match("^(%d+)")
  f:close()
  return pid
end

-- a tiny classification problem for in-process runs
local function problem(seed)
  local g = bbb.Generator(seed)
  local x = bbb.randn({ 96, 5 }, 0, 1, g)
  local y = (x:narrow(2, 1, 1):reshape(96):gt(0) + 1)
  local ds = { x = x, y = y, n = 96, classes = { "a", "b" } }
  local net = bbb.nn.bayes_mlp({ 5, 8, 2 }, { generator = g, prior = bbb.prior.Gaussian{ sigma = 1 } })
  local opt = bbb.optim.Adam(net, { lr = 0.01 })
  return { model = net, optimizer = opt, schedule = bbb.optim.schedule.exponential(opt, 0.9),
           data = ds, test = ds, batch_size = 16, generator = g, quiet = true, progress = "off" }, g
end

describe("bbb.train.fit", function()
  it("a run stopped by Ctrl-C inside an epoch and resumed ends bit for bit like one never stopped", function()
    local straight = problem(1)
    straight.epochs = 3
    local r1 = bbb.train.fit(straight)
    assert.are.equal("done", r1.status)
    assert.are.equal(3, #r1.history)

    local first = problem(1)
    first.epochs = 3
    first.checkpoint = tmp .. "/inproc.ckpt"
    local pid = my_pid()
    local count = 0
    first.on_step = function()
      count = count + 1
      -- inside epoch 2 (6 batches an epoch); os.execute would ignore SIGINT while it waits
      if count == 8 then io.popen("kill -INT " .. pid):close() end
    end
    local r2 = bbb.train.fit(first)
    assert.are.equal("interrupted", r2.status)
    assert.are.equal(1, r2.epoch)
    assert.are.equal(2, r2.batch)
    assert.are.equal(tmp .. "/inproc.ckpt", r2.checkpoint)

    local again = problem(1)
    again.epochs = 3
    local _, info = bbb.load(tmp .. "/inproc.ckpt")
    again.model:load_state_dict(info.tensors.model)
    again.resume = info
    local r3 = bbb.train.fit(again)
    assert.are.equal("done", r3.status)
    assert.are.equal(3, #r3.history)
    for k, t in pairs(straight.model:state_dict()) do
      assert.are.equal(0, (t - again.model:state_dict()[k]):abs():max():item(), k)
    end
    for e = 1, 3 do
      for _, key in ipairs { "elbo_per_example", "nll_per_example", "complexity_total", "train_acc", "test_acc", "lr" } do
        assert.are.equal(r1.history[e][key], r3.history[e][key], key .. " of epoch " .. e)
      end
    end
  end)

  it("writes a JSONL record per epoch, flushed, and appends on resume", function()
    local o = problem(2)
    o.epochs = 2
    o.log = tmp .. "/run.jsonl"
    o.checkpoint = tmp .. "/run.ckpt"
    o.on_epoch = function(rec) rec.extra_figure = 42 end
    local seen_lines = {}
    o.on_step = function(i)
      if i == 1 then seen_lines[#seen_lines + 1] = #lines_of(o.log) end   -- earlier epochs already on disk
    end
    bbb.train.fit(o)
    assert.are.same({ 0, 1 }, seen_lines)
    local recs = lines_of(o.log)
    assert.are.equal(2, #recs)
    local r = cjson.decode(recs[2])
    for _, k in ipairs { "epoch", "elbo_per_example", "nll_per_example", "complexity_total",
                         "complexity_per_example", "train_acc", "test_acc", "lr", "seconds", "wall" } do
      assert.is_not_nil(r[k], k)
    end
    assert.are.equal(42, r.extra_figure)
    -- a third line, as if a run went on past its checkpoint and was killed
    local f = assert(io.open(o.log, "a"))
    f:write('{"epoch":3}\n')
    f:close()
    local o2 = problem(2)
    o2.epochs = 3
    o2.log = o.log
    local _, info = bbb.load(o.checkpoint)
    o2.model:load_state_dict(info.tensors.model)
    o2.resume = info
    bbb.train.fit(o2)
    -- appended, nothing lost: the stopped run's epoch 3, then the resumed run's
    recs = lines_of(o.log)
    assert.are.equal(4, #recs)
    for i, e in ipairs { 1, 2, 3, 3 } do assert.are.equal(e, cjson.decode(recs[i]).epoch) end
    assert.is_nil(cjson.decode(recs[3]).nll_per_example)
    assert.is_not_nil(cjson.decode(recs[4]).nll_per_example)
  end)

  it("never writes a checkpoint from a run that fails", function()
    local o = problem(3)
    o.epochs = 2
    o.checkpoint = tmp .. "/fail.ckpt"
    bbb.train.fit(o)
    local before = io.open(o.checkpoint, "rb"):read("a")
    local o2 = problem(3)
    o2.epochs = 2
    o2.checkpoint = o.checkpoint
    o2.on_step = function(i) if i == 3 then error("boom") end end
    assert.has_error(function() bbb.train.fit(o2) end)
    assert.are.equal(before, io.open(o.checkpoint, "rb"):read("a"))
  end)

  it("a second Ctrl-C stops the process at once", function()
    local status, out = run("-e " .. ("%q"):format([[
      local pid = io.open("/proc/self/stat"):read("a"):match("^(%d+)")
      bbb.core.sigint_trap(true)
      io.popen("kill -INT " .. pid):close()
      print(bbb.json.encode{ pending_after_first = bbb.core.sigint_pending() })
      io.stdout:flush()
      io.popen("kill -INT " .. pid):close()
      print("still running")]]))
    local first = cjson.decode(out:sub(1, (out:find("\n", 1, true))))
    assert.are.equal(1, first.pending_after_first, out)   -- the first Ctrl-C is only noted
    assert.falsy(out:find("still running", 1, true), out)   -- the second ends the process before this line
    assert.are.equal(130, status, out)
  end)

  it("checks its options", function()
    assert.has_error(function() bbb.train.fit{ model = 1 } end, "train.fit: option optimizer is required")
    local o = problem(4)
    o.epochs = 1.5
    assert.has_error(function() bbb.train.fit(o) end, "train.fit: epochs must be a non-negative integer, got 1.5")
  end)
end)

describe("scripts/mnist.lua runs that last", function()
  local small = " --limit 1200 --test-limit 300 --hidden 24 --seed 5 --test-samples 2"

  it("4 epochs straight equal 2 epochs plus --resume, weights and reported figures", function()
    local s1, full = run("scripts/mnist.lua" .. small .. " --epochs 4 --save " .. tmp .. "/full.st --summary "
      .. tmp .. "/full.json")
    assert.are.equal(0, s1, full)
    local s2, half = run("scripts/mnist.lua" .. small .. " --epochs 2 --checkpoint " .. tmp .. "/half.ckpt --summary "
      .. tmp .. "/half.json")
    assert.are.equal(0, s2, half)
    local s3, rest = run("scripts/mnist.lua --resume " .. tmp .. "/half.ckpt --epochs 4 --save " .. tmp .. "/res.st"
      .. " --summary " .. tmp .. "/rest.json")
    assert.are.equal(0, s3, rest)
    assert.truthy(rest:find("resuming " .. tmp .. "/half.ckpt after epoch 2", 1, true), rest)
    local want, first, second = summary(tmp .. "/full.json"), summary(tmp .. "/half.json"), summary(tmp .. "/rest.json")
    assert.are.equal(4, #want.epochs)
    assert.are.equal(2, #first.epochs)
    assert.are.equal(4, #second.epochs)   -- the resumed run's history holds the first part's epochs
    -- epochs 1-2 from the first part, 3-4 and the final accuracies from the resumed one
    for e = 1, 2 do
      same_epoch(want.epochs[e], first.epochs[e], "first part, epoch " .. e)
      same_epoch(want.epochs[e], second.epochs[e], "resumed run's history, epoch " .. e)
    end
    for e = 3, 4 do same_epoch(want.epochs[e], second.epochs[e], "resumed run, epoch " .. e) end
    assert.is_true(want.test_acc_mc > 0 and want.test_acc_mc <= 1)
    assert.are.equal(want.test_acc_mean, second.test_acc_mean)
    assert.are.equal(want.test_acc_mc, second.test_acc_mc)
    assert.are.equal(12, same_tensors(tmp .. "/full.st", tmp .. "/res.st"))
  end)

  it("refuses a resume that changes the architecture, naming the flag", function()
    run("scripts/mnist.lua" .. small .. " --epochs 1 --checkpoint " .. tmp .. "/arch.ckpt")
    local status, out = run("scripts/mnist.lua --resume " .. tmp .. "/arch.ckpt --hidden 32")
    assert.are_not.equal(0, status)
    assert.truthy(out:find("--hidden is 32 but " .. tmp .. "/arch.ckpt was trained with 24", 1, true), out)
  end)

  it("checks --val, presets and checkpoints before any training", function()
    local cases = {
      { "--val 0", "--val: integer '0' is out of range" },
      { "--val -5", "--val: integer '-5' is out of range" },
      { "--val 1200 --limit 1200", "--val must be smaller than the 1200 training images, got 1200" },
      { "--preset nope", "--preset: expected one of" },
      { "--resume " .. tmp .. "/missing.ckpt", "--resume: load: cannot open" },
      { "--resume " .. tmp, "is a directory" },
    }
    local bad = tmp .. "/tampered.ckpt"
    io.open(bad, "wb"):write(string.pack("<I8", 5000) .. "{}"):close()
    cases[#cases + 1] = { "--resume " .. bad, "declares a 5000-byte header" }
    local log = tmp .. "/refused.jsonl"
    for _, c in ipairs(cases) do
      os.remove(log)
      local status, out = run("scripts/mnist.lua " .. c[1] .. " --log " .. log)
      assert.are_not.equal(0, status, out)
      assert.truthy(out:find(c[2], 1, true), ("%s: expected %q in\n%s"):format(c[1], c[2], out))
      assert.is_nil(io.open(log), "an epoch was trained before refusing " .. c[1] .. ":\n" .. out)
    end
  end)

  it("--val holds out the last images and reports them; presets are documented", function()
    local status, out = run("scripts/mnist.lua" .. small .. " --epochs 1 --val 200 --model mlp --activation tanh "
      .. "--summary " .. tmp .. "/val.json")
    assert.are.equal(0, status, out)
    local s = summary(tmp .. "/val.json")
    assert.are.same({ train = 1000, val = 200, test = 300 }, s.images)
    local val_acc = s.epochs[1].val_acc
    assert.truthy(type(val_acc) == "number" and val_acc >= 0 and val_acc <= 1, out)
    status, out = run("scripts/mnist.lua --help")
    for _, p in ipairs { "s0: seed 000", "s1: seed 001", "s3: seed 003", "paper-400", "paper-1200" } do
      assert.truthy(out:find(p, 1, true), p)
    end
  end)

  it("a preset sets its flags, explicit flags win", function()
    local status, out = run("scripts/mnist.lua --preset s1 --epochs 1 --limit 256 --test-limit 100 --hidden 16 "
      .. "--test-samples 2 --save " .. tmp .. "/s1.st --summary " .. tmp .. "/s1.json")
    assert.are.equal(0, status, out)
    local args = summary(tmp .. "/s1.json").args
    -- the preset's (seed 001's) settings, and --hidden and --epochs as given
    assert.are.equal("s1", args.preset)
    assert.are.equal(255, args.pixel_scale)
    assert.are.equal(1, args.epochs)
    -- the network built: 784 -> 16 (the flag's width, not the preset's 512), Gaussian sigma 6, sigmoid
    local layers = {}
    bbb.load(tmp .. "/s1.st"):apply(function(m) if m.__name ~= "Sequential" then layers[#layers + 1] = m end end)
    assert.are.equal("BayesLinear", layers[1].__name)
    assert.are.equal(784, layers[1].n_in)
    assert.are.equal(16, layers[1].n_out)
    assert.are.equal("gaussian", layers[1].prior.kind)
    assert.are.equal(6, layers[1].prior.sigma)
    assert.are.equal("Sigmoid", layers[2].__name)
  end)
end)

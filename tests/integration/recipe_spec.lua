-- The shared recipe of the experiment scripts: resuming writes only where the
-- command line says, a checkpoint's flags are checked again, outputs are
-- checked and made before training, signals save the run, and a prior
-- written in a Lua file reaches every script.
local h = require "helpers"
local q = h.q

local root = h.root:sub(1, 1) == "/" and h.root or (os.getenv("PWD") .. "/" .. h.root)
local bbblua = h.build:sub(1, 1) == "/" and h.bbblua or (os.getenv("PWD") .. "/" .. h.bbblua)
local MNIST = root .. "/scripts/mnist.lua"
local SMALL = "--limit 300 --test-limit 100 --hidden 16 --threads 1 --test-samples 2 --batch 100"

local function fresh_dir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. q(dir) .. " && ln -s " .. q(root .. "/data") .. " " .. q(dir .. "/data")))
  return dir
end

-- bbblua mnist.lua args, run inside dir: exit status, output.
local function mnist_in(dir, args)
  local out, status = h.sh(("cd %s && %s %s %s"):format(q(dir), q(bbblua), q(MNIST), args))
  return status, out
end

local read, write = h.read, h.write

describe("--resume", function()
  local dir
  setup(function()
    dir = fresh_dir()
    local status, out = mnist_in(dir, SMALL .. " --epochs 1 --checkpoint a/run.ckpt --log a/run.jsonl --save a/model.ckpt")
    assert.are.equal(0, status, out)
  end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("of a copied checkpoint writes the copy, never the original run's files", function()
    local before = {}
    for _, f in ipairs { "run.ckpt", "run.jsonl", "model.ckpt" } do before[f] = read(dir .. "/a/" .. f) end
    os.execute(("mkdir -p %s && cp %s %s"):format(q(dir .. "/b"), q(dir .. "/a/run.ckpt"), q(dir .. "/b/copy.ckpt")))
    local copy = read(dir .. "/b/copy.ckpt")
    local status, out = mnist_in(dir, "--resume b/copy.ckpt --epochs 2")
    assert.are.equal(0, status, out)
    h.has(out, "resuming b/copy.ckpt after epoch 1")
    for f, s in pairs(before) do assert.are.equal(s, read(dir .. "/a/" .. f), "a/" .. f .. " was written") end
    assert.are_not.equal(copy, read(dir .. "/b/copy.ckpt"), "the copy holds the resumed run")
  end)

  -- args (with %s for its output file): 2 epochs into full, and 1 epoch into
  -- half with a checkpoint (the caller resumes it into half).
  local function full_and_half(args, full, half, ckpt)
    local status, out = mnist_in(dir, args:format(full) .. " --epochs 2")
    assert.are.equal(0, status, out)
    status, out = mnist_in(dir, args:format(half) .. " --epochs 1 --checkpoint " .. ckpt)
    assert.are.equal(0, status, out)
  end

  it("with --shift (augmented minibatches) ends where an uninterrupted run ends", function()
    full_and_half(SMALL .. " --model cnn --channels 2,3 --shift 2 --log %s", "s/full.jsonl", "s/half.jsonl", "s/half.ckpt")
    local status, out = mnist_in(dir, "--resume s/half.ckpt --epochs 2 --log s/half.jsonl")
    assert.are.equal(0, status, out)
    local function last_line(f) return (read(dir .. "/" .. f):match("([^\n]+)\n?$")) end
    local full, half = last_line("s/full.jsonl"), last_line("s/half.jsonl")
    local function strip(l) return (l:gsub('"[%w_]*seconds[%w_]*":[%d.e+-]+,?', ""):gsub(',?"wall":[%d.e+-]+', "")) end
    assert.are.equal(strip(full), strip(half))
    assert.truthy(full:find('"epoch":2', 1, true), full)
  end)

  it("with --rho-lr-scale keeps the scale: ends where an uninterrupted run ends, refuses another", function()
    full_and_half(SMALL .. " --optim sgd --reduction sum --rho-lr-scale 100 --summary %s", "r/full.json",
      "r/half.json", "r/half.ckpt")
    local status, out = mnist_in(dir, "--resume r/half.ckpt --epochs 2 --rho-lr-scale 10")
    assert.are_not.equal(0, status)
    h.has(out, "--rho-lr-scale is 10 but r/half.ckpt was trained with 100")
    status, out = mnist_in(dir, "--resume r/half.ckpt --epochs 2 --summary r/half.json")
    assert.are.equal(0, status, out)
    local cj = require("cjson")
    local full, half = cj.decode(read(dir .. "/r/full.json")), cj.decode(read(dir .. "/r/half.json"))
    assert.are.same(full.epochs[2].sigma_mean, half.epochs[#half.epochs].sigma_mean)
    -- the scale moved sigma: an unscaled run's stays nearer its start
    status, out = mnist_in(dir, SMALL .. " --optim sgd --reduction sum --epochs 2 --summary r/one.json")
    assert.are.equal(0, status, out)
    local one = cj.decode(read(dir .. "/r/one.json"))
    assert.is_true(full.epochs[2].sigma_mean[1] > one.epochs[2].sigma_mean[1] * 1.01,
      ("%g against %g"):format(full.epochs[2].sigma_mean[1], one.epochs[2].sigma_mean[1]))
    status, out = mnist_in(dir, SMALL .. " --model mlp --rho-lr-scale 10 --epochs 1")
    assert.are_not.equal(0, status)
    h.has(out, "--rho-lr-scale: --model mlp has no rho (only bbb and cnn have)")
  end)

  it("refuses a checkpoint whose flags were edited to values that do not exist", function()
    local s = read(dir .. "/a/run.ckpt")
    -- the run's flags sit in __metadata__ as JSON inside a JSON string: quotes escaped
    for _, edit in ipairs { { [[\"dataset\":\"mnist\"]], [[\"dataset\":\"cifar\"]], "--dataset" },
                            { [[\"activation\":\"relu\"]], [[\"activation\":\"gelu\"]], "--activation" } } do
      assert.truthy(s:find(edit[1], 1, true), edit[1])
      write(dir .. "/edited.ckpt", (s:gsub(edit[1]:gsub("%p", "%%%0"), edit[2])))
      local status, out = mnist_in(dir, "--resume edited.ckpt --epochs 2")
      assert.are_not.equal(0, status, out)
      h.has(out, "--resume: edited.ckpt holds an invalid " .. edit[3])
    end
  end)

  it("refuses --preset and --seed that differ from the resumed run's", function()
    local status, out = mnist_in(dir, "--resume a/run.ckpt --epochs 2 --preset paper-400 --checkpoint c1.ckpt")
    assert.are_not.equal(0, status, out)
    h.has(out, "--preset paper-400 differs from the resumed run's (none)")
    status, out = mnist_in(dir, "--resume a/run.ckpt --epochs 2 --seed 7 --checkpoint c2.ckpt")
    assert.are_not.equal(0, status, out)
    h.has(out, "--seed is 7 but a/run.ckpt was trained with 1")
  end)
end)

describe("outputs", function()
  it("refuses one path for two outputs, before any work", function()
    local dir = fresh_dir()
    local status, out = mnist_in(dir, SMALL .. " --epochs 1 --checkpoint x.log --log x.log")
    os.execute("rm -rf " .. q(dir))
    assert.are_not.equal(0, status, out)
    h.has(out, "--checkpoint and --log name the same file x.log")
  end)

  it("makes missing folders before training, and stops on one it cannot make", function()
    local dir = fresh_dir()
    local status, out = mnist_in(dir, SMALL .. " --epochs 0 --log out/deep/run.jsonl --summary out/s/sum.json")
    assert.are.equal(0, status, out)
    assert.are.equal("folder", require("bbb.core").sys.kind(dir .. "/out/deep"))
    write(dir .. "/blocker", "")
    status, out = mnist_in(dir, SMALL .. " --epochs 5 --save blocker/sub/m.ckpt")
    os.execute("rm -rf " .. q(dir))
    assert.are_not.equal(0, status, out)
    h.has(out, "--save")
    assert.is_nil(out:find("epoch  1", 1, true), "training started before the output was checked:\n" .. out)
  end)
end)

describe("--log", function()
  it("appends to the file it names, and refuses a log another run is writing", function()
    local dir = fresh_dir()
    write(dir .. "/run.jsonl", '{"earlier":true}\n')
    local status, out = mnist_in(dir, SMALL .. " --epochs 1 --log run.jsonl")
    assert.are.equal(0, status, out)
    local text = read(dir .. "/run.jsonl")
    assert.truthy(text:find('^{"earlier":true}\n{'), text)
    local lock = assert(require("bbb.core").sys.lock(dir .. "/run.jsonl"))
    status, out = mnist_in(dir, SMALL .. " --epochs 1 --log run.jsonl")
    lock:release()
    os.execute("rm -rf " .. q(dir))
    assert.are_not.equal(0, status, out)
    h.has(out, "run.jsonl' is being written by another run")
  end)
end)

describe("a full disk", function()
  local fs
  setup(function()
    fs = os.tmpname()
    os.remove(fs)
    assert(require("bbb.core").sys.mkdir_p(fs))
    if not os.execute(("mount -t tmpfs -o size=16k tmpfs %s 2>/dev/null"):format(q(fs))) then fs = nil end
  end)
  teardown(function()
    if fs then os.execute(("umount %s; rmdir %s"):format(q(fs), q(fs))) end
  end)

  it("makes a plot, a summary and a log an error naming the file, never a short file reported as written", function()
    if not fs then pending("this machine cannot mount a small tmpfs") return end
    local status, out = h.run(("-e %s"):format(q(("require('bbb.app.plot').lines{file = %q, size = {2000, 2000}, series = {{y = {1, 5, 2}}}}")
      :format(fs .. "/big.png"))))
    assert.are_not.equal(0, status, out)
    h.has(out, "big.png': the file came out incomplete")
    assert.is_nil(read(fs .. "/big.png"), "the short PNG was left behind")
    local dir = fresh_dir()
    write(fs .. "/fill", ("x"):rep(15 * 1024))
    status, out = mnist_in(dir, SMALL .. " --epochs 1 --summary " .. fs .. "/s.json")
    os.execute("rm -rf " .. q(dir))
    assert.are_not.equal(0, status, out)
    h.has(out, "s.json")
    h.has(out, "No space left on device")
  end)
end)

describe("signals", function()
  -- Starts a long run, waits for its log to appear (training started), sends sig.
  local function interrupt(dir, sig)
    local sys = require("bbb.core").sys
    local log = ("%s/r%d.jsonl"):format(dir, sig)
    local pid = assert(sys.spawn({ bbblua, MNIST, "--limit", "2000", "--test-limit", "100", "--hidden", "64",
      "--threads", "1", "--epochs", "500", "--log", log }, { stdout = dir .. "/out.txt", stderr = dir .. "/out.txt",
      cwd = dir }))
    local t0 = os.time()
    while not io.open(log) and os.time() - t0 < 60 do sys.sleep(0.05) end
    sys.sleep(0.3)
    sys.kill(pid, sig)
    return sys.wait(pid)
  end

  it("SIGTERM, SIGHUP and SIGQUIT save the run like Ctrl-C; a later run does not overwrite the first's file", function()
    local dir = fresh_dir()
    local how, code = interrupt(dir, 15)
    assert.are.equal("exit", how, read(dir .. "/out.txt"))
    assert.are.equal(143, code, read(dir .. "/out.txt"))
    local first = read(dir .. "/mnist-interrupted.ckpt")
    assert.truthy(first, read(dir .. "/out.txt"))
    h.has(read(dir .. "/out.txt"), "--resume mnist-interrupted.ckpt")
    how, code = interrupt(dir, 1)
    assert.are.equal(129, code, read(dir .. "/out.txt"))
    how, code = interrupt(dir, 3)   -- SIGQUIT too, not a core dump
    assert.are.equal("exit", how, read(dir .. "/out.txt"))
    assert.are.equal(131, code, read(dir .. "/out.txt"))
    assert.truthy(read(dir .. "/mnist-interrupted-3.ckpt"), read(dir .. "/out.txt"))
    assert.truthy(read(dir .. "/mnist-interrupted-2.ckpt"), read(dir .. "/out.txt"))
    assert.are.equal(first, read(dir .. "/mnist-interrupted.ckpt"))
    os.execute("rm -rf " .. q(dir))
  end)
end)

describe("--prior FILE.lua", function()
  it("trains with the file's prior, names it, resumes with it, and refuses it changed or gone", function()
    local dir = fresh_dir()
    local text = read(root .. "/examples/priors/student_t.lua")
    write(dir .. "/t.lua", text)
    local status, out = mnist_in(dir, SMALL .. " --epochs 1 --prior t.lua --checkpoint run.ckpt")
    assert.are.equal(0, status, out)
    h.has(out, "prior=StudentT{nu=3, s=0.1}")
    status, out = mnist_in(dir, "--resume run.ckpt --epochs 2")
    assert.are.equal(2, status, out)   -- the file is named again for every run
    h.has(out, "never runs code it names")
    status, out = mnist_in(dir, "--resume run.ckpt --epochs 2 --prior t.lua")
    assert.are.equal(0, status, out)
    h.has(out, "epoch  2")
    write(dir .. "/t.lua", text .. "\n-- edited\n")
    status, out = mnist_in(dir, "--resume run.ckpt --epochs 3 --prior t.lua")
    assert.are_not.equal(0, status, out)
    h.has(out, "is not the one the model was trained with")
    os.remove(dir .. "/t.lua")
    status, out = mnist_in(dir, "--resume run.ckpt --epochs 3 --prior t.lua")
    assert.are_not.equal(0, status, out)
    h.has(out, "prior file 't.lua' does not exist")
    status, out = mnist_in(dir, SMALL .. " --epochs 1 --prior missing.lua")
    assert.are_not.equal(0, status, out)
    h.has(out, "--prior: prior file 'missing.lua' does not exist")
    os.execute("rm -rf " .. q(dir))
  end)
end)

describe("a script's failure", function()
  it("reads as 'script: message', without the file:line of each error() that passed it on", function()
    local dir = fresh_dir()
    write(dir .. "/t.lua", [[
local recipe = require "bbb.app.recipe"
local function inner() error("ELBO: the likelihood term is not finite") end
local function outer() local ok, e = pcall(inner); if not ok then error(e, 2) end end
recipe.main("t.lua", function() outer() end)
]])
    local out, status = h.sh(("cd %s && %s t.lua"):format(q(dir), q(bbblua)))
    assert.are.equal(1, status, out)
    assert.are.equal("t.lua: ELBO: the likelihood term is not finite\n", out)
    out = h.sh(("cd %s && BBB_DEBUG=1 %s t.lua"):format(q(dir), q(bbblua)))
    h.has(out, "t.lua:4: t.lua:2: ELBO")   -- --debug keeps where it came from
    os.execute("rm -rf " .. q(dir))
  end)
end)

describe("recipe.main on an interrupt", function()
  it("exits 130 when Ctrl-C reached a C op (\"op: interrupted\"), 1 for any other error", function()
    local run = function(msg)
      return select(2, h.sh(("%s -e %s"):format(q(bbblua),
        q(('require("bbb.app.recipe").main("x.lua", function() error(%q) end)'):format(msg)))))
    end
    assert.are.equal(130, run("bbb.index_select: interrupted"))
    assert.are.equal(130, run("interrupted!"))
    assert.are.equal(1, run("the file was not interrupted by anything"))
  end)
end)

describe("the checkpoint", function()
  it("is one run's at a time: a second run writing it is refused, and the lock goes with the run", function()
    local dir = fresh_dir()
    local lock = assert(require("bbb.core").sys.lock(dir .. "/.run.ckpt.lock"))
    local status, out = mnist_in(dir, SMALL .. " --epochs 1 --checkpoint run.ckpt")
    assert.are.equal(1, status, out)
    h.has(out, "train: checkpoint run.ckpt: another run is writing it")
    lock:release()
    status, out = mnist_in(dir, SMALL .. " --epochs 1 --checkpoint run.ckpt")
    assert.are.equal(0, status, out)
    assert.truthy(read(dir .. "/run.ckpt"))
    assert.is_nil(read(dir .. "/.run.ckpt.lock"))
    os.execute("rm -rf " .. q(dir))
  end)
end)

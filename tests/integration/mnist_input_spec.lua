-- scripts/mnist.lua given what it cannot use: a checkpoint whose saved
-- state was edited, a working folder with data of its own, a flag that
-- cannot act in the run, and --curves on a run too short to plot. Each is
-- refused (or said) before any work, naming what is wrong.
local bbb = require "bbb"
local helpers = require "helpers"
local q = helpers.q

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. q(tmp))
local function absolute(p) return p:sub(1, 1) == "/" and p or (os.getenv("PWD") .. "/" .. p) end
local root = absolute(helpers.root)
local SMALL = " --limit 500 --test-limit 100 --hidden 8 --test-samples 1 --threads 1"

-- The checkpoint of a real one-epoch run, written once.
local base
local function checkpoint()
  if not base then
    base = tmp .. "/run.ckpt"
    local status, out = helpers.run("scripts/mnist.lua --epochs 1 --checkpoint " .. q(base) .. SMALL)
    assert.are.equal(0, status, out)
  end
  return base
end

-- A copy of the run's checkpoint with edit(tensors, meta) applied.
local function edited(name, edit)
  local tensors, meta = bbb.checkpoint.read(checkpoint())
  edit(tensors, meta)
  local path = tmp .. "/" .. name .. ".ckpt"
  bbb.checkpoint.write(path, tensors, meta)
  return path
end

-- out holds no sign that the run started: no data read, no epoch trained.
local function no_work(out)
  assert.falsy(out:find("data: MNIST from", 1, true), "data read before refusing:\n" .. out)
  assert.falsy(out:find("epoch  1", 1, true), "trained before refusing:\n" .. out)
end

describe("mnist.lua --resume", function()
  teardown(function() os.execute("rm -rf " .. q(tmp)) end)

  it("refuses a checkpoint whose saved state is not what a run writes, naming the file and the field", function()
    local cases = {
      { "epoch-neg", function(_, m) m.state.epoch = -3 end,
        "holds state.epoch = -3, which must be an integer from 0 to the run's --epochs (2)" },
      { "epoch-huge", function(_, m) m.state.epoch = 1e12 end, "holds state.epoch = 1000000000000, which must be" },
      { "steps", function(_, m) m.elbo.steps = -1 end, "holds elbo.steps = -1, which must be a non-negative integer" },
      { "opt-steps", function(_, m) m.optimizer.t = -1 end, "holds optimizer.t = -1, which must be a non-negative integer" },
      { "lr-neg", function(_, m) m.optimizer.lr = -0.1 end,
        "holds optimizer.lr = -0.1, which must be a positive finite number" },
      { "lr-nan", function(_, m) m.optimizer.lr = "nan" end,
        "holds optimizer.lr = the string 'nan', which must be a positive finite number" },
      { "batch", function(_, m) m.state.batch = -1 end, "holds state.batch = -1, which must be a non-negative integer" },
      { "schedule", function(_, m) m.schedule.epoch = -5 end,
        "holds schedule.epoch = -5, which must be the state's epoch (1)" },
      { "no-state", function(_, m) m.state = nil end, "holds no state, which must be the training state (an object)" },
      { "string-state", function(_, m) m.state = "done" end, "holds state = the string 'done', which must be the training state" },
      { "list-state", function(_, m) m.state = { 1, 2 } end, "holds state = a list, which must be the training state" },
      { "reshaped", function(t)
          t["optimizer.1.weight_mu.m"] = t["optimizer.1.weight_mu.m"]:reshape(784, 8)
        end, "holds the optimizer tensor 1.weight_mu.m of shape 784x8, but its parameter 1.weight_mu has shape 8x784" },
    }
    for _, c in ipairs(cases) do
      local path = edited(c[1], c[2])
      local status, out = helpers.run("scripts/mnist.lua --epochs 2 --resume " .. q(path))
      assert.are.equal(2, status, c[1] .. ":\n" .. out)
      helpers.has(out, "mnist.lua: --resume: " .. path .. " " .. c[3])
      no_work(out)
    end
  end)

  it("takes the checkpoint as written", function()
    helpers.ok("scripts/mnist.lua --epochs 2 --resume " .. q(checkpoint()), "resuming " .. checkpoint() .. " after epoch 1",
      "epoch  2")
  end)
end)

describe("mnist.lua's data", function()
  -- IDX files of n blank 28 x 28 images and their labels, all 0.
  local function plant(dir, n, skip)
    os.execute("mkdir -p " .. q(dir))
    for _, split in ipairs { "train", "t10k" } do
      if skip ~= split .. "-images-idx3-ubyte" then
        helpers.write(dir .. "/" .. split .. "-images-idx3-ubyte", string.pack(">I4I4I4I4", 0x803, n, 28, 28)
          .. ("\0"):rep(n * 784))
      end
      if skip ~= split .. "-labels-idx1-ubyte" then
        helpers.write(dir .. "/" .. split .. "-labels-idx1-ubyte", string.pack(">I4I4", 0x801, n) .. ("\0"):rep(n))
      end
    end
  end

  it("comes from the checkout's data folder, named on the first line, not from the working folder's", function()
    local work = tmp .. "/work"
    plant(work .. "/data/mnist", 300, "t10k-labels-idx1-ubyte")
    local out, status = helpers.sh(("cd %s && %s %s --epochs 1 %s"):format(q(work), q(absolute(helpers.bbblua)),
      q(root .. "/scripts/mnist.lua"), SMALL))
    assert.are.equal(0, status, out)
    assert.are.equal("data: MNIST from " .. root .. "/data/mnist", out:match("^[^\n]*"))
    helpers.has(out, "mnist: 500 training, 100 test images")
  end)

  it("is refused when its folder lacks one of the four files, naming the folder and the file", function()
    -- a checkout of its own (BBB_LUA_DIR: bbb's Lua files seen through a link)
    -- whose data folder misses the test labels
    local fake = tmp .. "/checkout"
    local lua_dir = os.getenv("BBB_LUA_DIR") or (root .. "/lua")
    os.execute(("mkdir -p %s/data/mnist && ln -s %s %s/lua"):format(q(fake), q(lua_dir), q(fake)))
    for _, f in ipairs { "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte" } do
      os.execute(("cp %s/data/mnist/%s* %s/data/mnist/"):format(q(root), f, q(fake)))
    end
    local status, out = helpers.run("scripts/mnist.lua --epochs 1" .. SMALL, "BBB_LUA_DIR=" .. q(fake .. "/lua"))
    assert.are.equal(1, status, out)
    helpers.has(out, "mnist.lua: MNIST data: " .. fake .. "/data/mnist holds no t10k-labels-idx1-ubyte")
    no_work(out)
    -- shift.lua, which reads the test images after training every net, checks them before
    status, out = helpers.run("scripts/shift.lua --model mlp --epochs 1 --limit 300 --val 100 --out " .. q(tmp .. "/sh"),
      "BBB_LUA_DIR=" .. q(fake .. "/lua"))
    assert.are.equal(1, status, out)
    helpers.has(out, "shift.lua: MNIST data: " .. fake .. "/data/mnist holds no t10k-labels-idx1-ubyte")
    assert.falsy(out:find("training", 1, true), out)
  end)
end)

describe("mnist.lua's flags", function()
  it("refuses a flag that cannot act in the run, naming it and why", function()
    local cases = {
      { "--momentum 0.5", "--momentum cannot act in this run: --optim adam has no momentum (only sgd has)" },
      { "--preset s1 --momentum 0.5", "--momentum cannot act in this run: --optim adam has no momentum" },
      { "--checkpoint-every 2", "--checkpoint-every cannot act in this run: no checkpoint is written without --checkpoint" },
      { "--cnn-hidden 16", "--cnn-hidden cannot act in this run: --model bbb is no CNN" },
      { "--model mlp --channels 4,6", "--channels cannot act in this run: --model mlp is no CNN" },
      { "--dropout 0.3", "--dropout cannot act in this run: --model bbb has no dropout" },
      { "--model cnn-plain --dropout 0.3", "--dropout cannot act in this run: --model cnn-plain has no dropout" },
      { "--model cnn --layers 1", "--layers cannot act in this run: --model cnn is a CNN" },
      { "--model cnn-dropout --activation tanh", "--activation cannot act in this run: --model cnn-dropout is a CNN" },
    }
    for _, c in ipairs(cases) do
      local status, out = helpers.run("scripts/mnist.lua --epochs 1 " .. c[1] .. SMALL)
      assert.are.equal(2, status, c[1] .. ":\n" .. out)
      helpers.has(out, "mnist.lua: " .. c[2])
      no_work(out)
    end
    helpers.ok("scripts/mnist.lua --epochs 1 --optim sgd --momentum 0.5 --model dropout --dropout 0.3" .. SMALL,
      "test accuracy")
  end)

  it("--curves on a run too short for one point of the curves says so", function()
    local png = tmp .. "/curves.png"
    helpers.ok("scripts/mnist.lua --epochs 1 --curves " .. q(png) .. SMALL, "--curves: no plot written to " .. png
      .. ": the run trained 4 step(s), fewer than the 20 that each point of the curves averages")
    assert.is_nil(helpers.read(png))
  end)
end)

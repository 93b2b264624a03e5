-- scripts/ood.lua end to end on tiny settings, through the real interpreter:
-- the figures it writes (PREFIX.json), the pictures, reuse of saved models,
-- and bad input refused before any work.
local bbb = require "bbb"
local helpers = require "helpers"
local function run(args) return helpers.run("scripts/ood.lua " .. args) end
local has = helpers.has

local function refused(args, text)
  local status, out = run(args)
  assert.are_not.equal(0, status, out)
  has(out, text)
  assert.falsy(out:find("training", 1, true), "work started before the error:\n" .. out)
  return out
end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)
local TINY = " --limit 1500 --test-limit 300 --noise-n 60 --hidden 24 --epochs 2 --lr 0.005 --test-samples 4 --chunk 128"
local BITS_MAX = math.log(10, 2) + 1e-4   -- entropy of ten classes, in bits

-- The figures a run wrote to PREFIX.json (--out PREFIX).
local function results(prefix)
  local f = assert(io.open(prefix .. ".json"), "no " .. prefix .. ".json")
  local r = require("cjson").decode(f:read("a"))
  f:close()
  return r
end

local function in_unit(v, what)
  assert(type(v) == "number" and v >= 0 and v <= 1, ("%s = %s, not in [0, 1]"):format(what, tostring(v)))
end

-- The target of key among the run's targets.
local function target(r, key)
  for _, t in ipairs(r.targets) do if t.key == key then return t end end
  error("no target " .. key)
end

local function names(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v.name end
  return out
end

describe("ood.lua", function()
  teardown(function() os.execute("rm -rf '" .. tmp .. "'") end)

  it("answers --help with the presets and the units", function()
    local status, out = run("--help")
    assert.are.equal(0, status, out)
    has(out, "Usage:")
    has(out, "s0: seed 000")
    has(out, "s1: seed 001")
    has(out, "in bits")
  end)

  local saved = tmp .. "/m"
  it("trains the three models and reports every set, AUROC, calibration and pictures", function()
    local status, out = run(TINY .. " --out " .. tmp .. "/p/ood --save-models " .. saved)
    assert.are.equal(0, status, out)
    has(out, "in bits")
    local r = results(tmp .. "/p/ood")
    for _, m in ipairs { "bbb", "mlp", "dropout" } do assert.are.equal("trained", r.models[m].source, m) end
    local acc = r.figures.bbb_mc.mnist.acc
    assert(acc > 0.3 and acc <= 1, out)                 -- chance is 10%
    for _, set in ipairs { "fashion", "normal", "uniform" } do
      local c = r.figures.bbb_mc[set]
      assert.is_nil(c.acc, set)                         -- no accuracy off the in-distribution set
      local h, mi, eh = c.entropy, c.mi, c.expected_entropy
      assert(h >= 0 and h <= BITS_MAX, set)
      assert(mi >= 0 and math.abs(h - mi - eh) < 2e-4, set)   -- H = MI + E[H]
      in_unit(c.auroc_entropy, set .. " AUROC by H")
      in_unit(c.auroc_mi, set .. " AUROC by MI")
      local m = r.figures.mlp[set]
      assert.is_nil(m.mi, set)                          -- a point estimate has no MI
      in_unit(m.auroc_entropy, set .. " MLP AUROC by H")
    end
    -- calibration on MNIST test: 15 equal-width confidence bins over the 300 images
    for _, row in ipairs { "bbb_mean", "bbb_mc", "mlp", "dropout_mc" } do
      local n = 0
      for _, b in ipairs(r.reliability[row]) do n = n + b.count end
      assert.are.equal(15, #r.reliability[row], row)
      assert.are.equal(300, n, row)
    end
    in_unit(r.figures.dropout_mc.mnist.ece, "MC dropout ECE")
    -- the targets, each with the figures it compares and a verdict that follows from them
    local b, d = r.figures.bbb_mc.fashion.auroc_mi, r.figures.dropout_mc.fashion.auroc_mi
    local t = target(r, "auroc_mi")
    assert.are.same({ b }, t.values)
    assert.are.equal(b >= 0.95 and "met" or "missed", t.verdict)
    t = target(r, "auroc_mi_vs_dropout")
    assert.are.same({ b, d }, t.values)
    assert.are.equal(b > d and "met" or "missed", t.verdict)
    -- the default prior of this study, in the config and in the model trained
    assert.are.same({ "gaussian", 1 }, { r.config.prior, r.config.sigma1 })
    local first
    bbb.load(saved .. "-bbb.safetensors"):apply(function(m) first = first or (m.__name == "BayesLinear" and m) end)
    assert.are.same({ "gaussian", 1 }, { first.prior.kind, first.prior.sigma })
    for _, f in ipairs { "entropy-bbb_mc", "entropy-bbb_mean", "entropy-mlp", "entropy-dropout_mc",
                         "reliability", "noise-bars", "passes" } do
      local fh = assert(io.open(tmp .. "/p/ood-" .. f .. ".png", "rb"), "missing " .. f .. "\n" .. out)
      assert.are.equal("\137PNG", fh:read(4))
      fh:close()
    end
  end)

  it("loads the saved models with --from-* instead of training", function()
    local status, out = run(TINY .. " --sets normal --out " .. tmp .. "/q/ood --from-bbb " .. saved
      .. "-bbb.safetensors --from-mlp " .. saved .. "-mlp.safetensors --from-dropout " .. saved .. "-dropout.safetensors")
    assert.are.equal(0, status, out)
    local r = results(tmp .. "/q/ood")
    for _, m in ipairs { "bbb", "mlp", "dropout" } do
      assert.are.same({ "loaded", saved .. "-" .. m .. ".safetensors" }, { r.models[m].source, r.models[m].path })
    end
    assert.are.same({ "mnist", "normal" }, names(r.sets))   -- no Fashion-MNIST
    assert.is_nil(r.figures.bbb_mc.fashion)
    in_unit(r.figures.bbb_mc.normal.auroc_mi, "AUROC by MI on N(0,1) noise")
  end)

  it("takes the convolutional models mnist.lua --model cnn, cnn-plain and cnn-dropout saved", function()
    local cnn = {}
    for _, m in ipairs { "cnn", "cnn-plain", "cnn-dropout" } do
      cnn[m] = tmp .. "/" .. m .. ".st"
      local status, out = helpers.run(("scripts/mnist.lua --model %s --channels 3,4 --hidden 12 --epochs 1 "
        .. "--limit 256 --test-limit 32 --test-samples 1 --threads 1 --save %s"):format(m, cnn[m]))
      assert.are.equal(0, status, out)
    end
    local status, out = run(TINY .. " --sets fashion --out " .. tmp .. "/c/ood --from-bbb " .. cnn.cnn
      .. " --from-mlp " .. cnn["cnn-plain"] .. " --from-dropout " .. cnn["cnn-dropout"])
    assert.are.equal(0, status, out)
    local r = results(tmp .. "/c/ood")
    for _, m in ipairs { "bbb", "mlp", "dropout" } do assert.are.equal("loaded", r.models[m].source, m) end
    assert.are.equal(cnn.cnn, r.models.bbb.path)
    in_unit(r.figures.bbb_mc.fashion.auroc_mi, "AUROC by MI on Fashion-MNIST")
    refused("--from-bbb " .. cnn["cnn-plain"], "holds no Bayesian layer")
    refused("--from-mlp " .. cnn.cnn, "is a Bayesian model (use --from-bbb)")
  end)

  it("refuses bad input before any work", function()
    refused("--test-samples 0", "--test-samples: integer '0' is out of range")
    refused("--preset s9", "--preset: expected one of s0, s1, got 's9'")
    refused("--sets normal cifar", "--sets: expected one of mnist, fashion, normal, uniform, got 'cifar'")
    local wrong = tmp .. "/wrong.safetensors"
    bbb.save(wrong, bbb.nn.bayes_mlp({ 100, 8, 10 }, {}))
    refused("--from-bbb " .. wrong, "--from-bbb: " .. wrong .. " takes inputs of 100 values, but mnist images have 784 pixels")
    refused("--from-mlp " .. saved .. "-bbb.safetensors", "is a Bayesian model (use --from-bbb)")
    refused("--from-bbb " .. tmp .. "/missing.safetensors", "--from-bbb: ")
    refused("--dataset fashion --from-mlp " .. saved .. "-mlp.safetensors",
      "was trained on mnist, but the in-distribution set is fashion")
  end)
end)

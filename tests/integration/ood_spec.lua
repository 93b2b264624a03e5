-- scripts/ood.lua end to end on tiny settings, through the real interpreter:
-- the table, the pictures, reuse of saved models, and bad input refused
-- before any work.
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

-- Table rows: model, set, then the figures (a "-" where there is none).
local function row(out, model, set)
  local line = out:match("\n(" .. model:gsub("%p", "%%%0") .. "%s+" .. set:gsub("%p", "%%%0") .. "[^\n]*)")
  assert.truthy(line, ("no row %s / %s in:\n%s"):format(model, set, out))
  local cells = {}
  for c in line:sub(#model + 1):gsub("^%s+", ""):sub(#set + 1):gmatch("%S+") do cells[#cells + 1] = c end
  return cells
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
    for _, m in ipairs { "bbb", "mlp", "dropout" } do has(out, "training " .. m) end
    local r = row(out, "BBB MC 4", "MNIST test (in)")
    local acc = tonumber(r[1])
    assert(acc and acc > 30 and acc <= 100, out)        -- chance is 10%
    for _, set in ipairs { "Fashion-MNIST test", "N(0,1) noise", "uniform noise" } do
      local c = row(out, "BBB MC 4", set)
      assert.are.equal("-", c[1])                       -- no accuracy off the in-distribution set
      local h, mi, eh = tonumber(c[3]), tonumber(c[4]), tonumber(c[5])
      assert(h >= 0 and h <= math.log(10, 2) + 1e-4, out)
      assert(mi >= 0 and math.abs(h - mi - eh) < 2e-4, out)   -- H = MI + E[H]
      for k = 7, 8 do
        local a = tonumber(c[k])
        assert(a and a >= 0 and a <= 1, out)
      end
      local m = row(out, "MLP", set)
      assert.are.equal("-", m[4])                       -- a point estimate has no MI
      assert(tonumber(m[7]) >= 0 and tonumber(m[7]) <= 1, out)
    end
    has(out, "Calibration on MNIST test (15 equal-width confidence bins)")
    local ece = tonumber(out:match("\nMC dropout 4%s+([%d.]+)"))
    assert(ece and ece >= 0 and ece <= 1, out)
    has(out, "MNIST vs Fashion-MNIST: BBB AUROC by MI >= 0.95")
    local line = out:match("AUROC by MI >= 0.95[^\n]*")
    assert.truthy(line:match("%s[%d.]+%s+met$") or line:match("%s[%d.]+%s+missed$"), out)
    -- the comparison with MC dropout's MI, with both numbers and a verdict that follows from them
    local b, d, verdict = out:match("BBB AUROC %(MI%) > MC dropout's %(MI%)%s+([%d.]+) vs ([%d.]+)%s+(%a+)")
    assert.truthy(b, out)
    assert.are.equal(tonumber(b) > tonumber(d) and "met" or "missed", verdict)
    has(out, "prior=Gaussian{sigma=1}")      -- the default prior of this study
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
    assert.falsy(out:find("training", 1, true), out)
    has(out, "bbb: loaded " .. saved .. "-bbb.safetensors")
    row(out, "BBB MC 4", "N(0,1) noise")
    assert.falsy(out:find("Fashion-MNIST test", 1, true), out)
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
    assert.falsy(out:find("training", 1, true), out)
    local cells = row(out, "BBB MC 4", "Fashion-MNIST test")
    assert.truthy(tonumber(cells[#cells]), out)   -- an AUROC
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

-- scripts/shift.lua end to end on tiny settings: the shape of shift.json,
-- the ensemble (members differ, its prediction their average), the fitted
-- temperature and Laplace precision kept, a rerun reusing what is saved,
-- and bad flags refused before any work.
local bbb = require "bbb"
local json = require "bbb.json"
local helpers = require "helpers"
local function run(args) return helpers.run("scripts/shift.lua " .. args) end
local has = helpers.has

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)
local out_dir = tmp .. "/s"
local METHODS = { "plain", "temperature", "dropout", "ensemble", "bbb", "bbb-ensemble", "laplace", "laplace-sampled" }
local TINY = " --limit 600 --val 200 --test-limit 300 --epochs 1 --noise-n 50 --test-samples 3 --members 2 "
  .. "--threads 1 --methods " .. table.concat(METHODS, " ") .. " --out " .. out_dir
  .. " -- --cnn-hidden 16 --channels 2,4"

local function refused(args, text)
  local status, out = run(args)
  assert.are.equal(2, status, out)
  has(out, text)
  assert.falsy(out:find("training", 1, true), "work started before the error:\n" .. out)
end

local function in_unit(v, what)
  assert(type(v) == "number" and v >= 0 and v <= 1, ("%s = %s, not in [0, 1]"):format(what, tostring(v)))
end

describe("shift.lua", function()
  teardown(function() os.execute("rm -rf '" .. tmp .. "'") end)

  it("answers --help", function()
    local status, out = run("--help")
    assert.are.equal(0, status, out)
    has(out, "--methods")
    has(out, "bbb-ensemble")
  end)

  it("refuses bad flags before any work", function()
    refused("--methods plain magic --out " .. tmp .. "/x", "shift.lua: ")
    refused("--members 1 --out " .. tmp .. "/x", "shift.lua: ")
    refused("--from " .. tmp .. "/nowhere --out " .. tmp .. "/x", "--from: " .. tmp .. "/nowhere holds no models/")
    refused("--limit 100 --val 100 --out " .. tmp .. "/x", "--val 100 must be smaller than --limit 100")
    refused("--out " .. tmp .. "/x -- --seed 3", "--seed after --: shift.lua sets it")
    refused("--out " .. tmp .. "/x -- --dataset=fashion", "--dataset after --: shift.lua sets it")
    refused("--methods plain bbb plain --out " .. tmp .. "/x", "--methods: plain is given twice")
    local not_prior = tmp .. "/not_prior.lua"
    helpers.write(not_prior, "return 42\n")
    refused("--out " .. tmp .. "/x -- --prior " .. not_prior, "--prior " .. not_prior .. " after --: ")
  end)

  it("opens the BBB nets it trained with a prior written in Lua given after --", function()
    local dir = tmp .. "/lua_prior"
    local status, out = run("--model mlp --methods bbb plain --epochs 1 --limit 600 --val 100 --test-limit 200 "
      .. "--noise-n 50 --threads 1 --out " .. dir .. " -- --prior examples/priors/student_t.lua")
    assert.are.equal(0, status, out)
    local r = json.decode(helpers.read(dir .. "/shift.json"))
    assert.are.same({ "--prior", "examples/priors/student_t.lua" }, r.config.mnist_flags)
    assert.are.same({ "bbb", "plain" }, r.methods)
    in_unit(r.headline.rotate.bbb.brier / 2, "bbb rotated Brier / 2")
  end)

  local result
  it("writes shift.json: every method at every rotation and translation, OOD scores, fits", function()
    local status, out = run(TINY)
    assert.are.equal(0, status, out)
    result = json.decode(helpers.read(out_dir .. "/shift.json"))
    for _, kind in ipairs { "rotate", "translate" } do
      local amounts = {}
      if kind == "rotate" then for a = 0, 180, 15 do amounts[#amounts + 1] = a end
      else for k = 0, 26, 2 do amounts[#amounts + 1] = k end end   -- rolled, the default
      for _, m in ipairs(METHODS) do
        for _, a in ipairs(amounts) do
          local f = result[kind][m][tostring(a)]
          local where = ("%s %s %d"):format(kind, m, a)
          in_unit(f.acc, where .. " acc")
          in_unit(f.ece, where .. " ece")
          assert(f.nll > 0 and f.brier >= 0 and f.brier <= 2, where)
        end
      end
    end
    for _, m in ipairs(METHODS) do
      local o = result.ood[m]
      in_unit(o.aurc, m .. " aurc")
      for _, set in ipairs { "fashion", "uniform" } do
        for _, k in ipairs { "auroc", "aupr_in", "aupr_out", "fpr95" } do
          in_unit(o[set].max_prob[k], m .. " " .. set)
          in_unit(o[set].entropy[k], m .. " " .. set)
        end
      end
    end
    assert.truthy(result.ood.ensemble.fashion.mi)        -- several members: mutual information
    assert.is_nil(result.ood.plain.fashion.mi)           -- one net: none
    -- the headline: the mean over the shifted steps, here of one seed
    for _, m in ipairs(METHODS) do
      local total = 0
      for a = 15, 180, 15 do total = total + result.rotate[m][tostring(a)].brier end
      assert.near(total / 12, result.headline.rotate[m].brier, 1e-9)
      assert.are.equal(0, result.headline.rotate[m].brier_sd)
    end
    assert(result.temperature["1"] > 0)
    assert(result.laplace_precision["1"] > 0)
    assert.are.equal("string", type(result.command))
    assert.are.equal("string", type(result.commit))
    assert.are.equal("table", type(result.environment))
  end)

  it("reuses the saved models and evaluation on a rerun", function()
    local status, out = run(TINY)
    assert.are.equal(0, status, out)
    assert.falsy(out:find("training ", 1, true), out)
    has(out, "evaluation reused")
    local again = json.decode(helpers.read(out_dir .. "/shift.json"))
    assert.are.equal(result.rotate.bbb["90"].nll, again.rotate.bbb["90"].nll)
  end)

  it("averages ensemble members that differ", function()
    local shift = require "bbb.app.experiments.shift"
    local config = shift.options { limit = 600, val = 200, test_limit = 300, epochs = 1, members = 2,
      methods = { "ensemble" }, out = out_dir, mnist_flags = { "--cnn-hidden", "16", "--channels", "2,4" } }
    local models = shift.load_models(config, 1)
    assert.are.equal(2, #models.plain_members)
    local w1 = models.plain_members[1].net:parameters()[1]
    local w2 = models.plain_members[2].net:parameters()[1]
    assert((w1 - w2):abs():max():item() > 1e-3, "members are the same net")
    local x = bbb.data.load_mnist { split = "test", scale = 1, limit = 50 }.x
    local probs, stack = shift.predict(models, "ensemble", x, {}, 3)
    assert.are.same({ 2, 50, 10 }, stack:size())
    local mean = (bbb.softmax(models.plain_members[1].net:forward(x * (1 / 126)), 2)
      + bbb.softmax(models.plain_members[2].net:forward(x * (1 / 126)), 2)) * 0.5
    assert((probs - mean):abs():max():item() < 1e-6)
  end)
  it("draws --test-samples from each member of the BBB ensemble", function()
    local shift = require "bbb.app.experiments.shift"
    local config = shift.options { limit = 600, val = 200, test_limit = 300, epochs = 1, members = 2,
      methods = { "bbb-ensemble" }, out = out_dir, mnist_flags = { "--cnn-hidden", "16", "--channels", "2,4" } }
    local models = shift.load_models(config, 1)
    local x = bbb.data.load_mnist { split = "test", scale = 1, limit = 20 }.x
    local _, stack = shift.predict(models, "bbb-ensemble", x, {}, 3)
    assert.are.same({ 6, 20, 10 }, stack:size())
  end)

  it("rolls the test images by default, and shifts them zero-filled with --translation zero", function()
    assert.are.equal("roll", result.config.translation)
    local x = bbb.tensor { { 1, 2, 3, 4, 5, 6 } }   -- 2 x 3 images
    assert.are.same({ { 3, 1, 2, 6, 4, 5 } }, bbb.data.roll(x, 2, 3, 0, 1):totable())
    assert.are.same({ { 4, 5, 6, 1, 2, 3 } }, bbb.data.roll(x, 2, 3, 1, 0):totable())
    assert.are.same(x:totable(), bbb.data.roll(x, 2, 3, 4, -6):totable())   -- whole turns
    local dir = tmp .. "/zero"
    local status, out = run("--model mlp --methods plain --epochs 1 --limit 600 --val 100 --test-limit 200 "
      .. "--noise-n 50 --threads 1 --translation zero --out " .. dir)
    assert.are.equal(0, status, out)
    local r = json.decode(helpers.read(dir .. "/shift.json"))
    assert.is_table(r.translate.plain["14"])
    assert.is_nil(r.translate.plain["16"])
  end)

  it("--eval validation scores half the held-out training images, for choosing a recipe", function()
    local dir = tmp .. "/val"
    local status, out = run("--model mlp --methods plain temperature --epochs 1 --limit 800 --val 300 "
      .. "--noise-n 50 --threads 1 --eval validation --out " .. dir)
    assert.are.equal(0, status, out)
    local r = json.decode(helpers.read(dir .. "/shift.json"))
    assert.are.equal("validation", r.config.eval)
    in_unit(r.rotate.plain["0"].acc, "plain clean validation accuracy")
    assert.is_table(r.rotate.temperature["90"])
  end)

  it("trains the BBB CNN by the uncertainty recipe unless --bbb-recipe accuracy", function()
    local _, info = bbb.load(out_dir .. "/models/bbb-s1.ckpt")
    local saved = info.meta.args
    assert.are.same({ "cnn-uncertainty", "uniform", "gaussian", 1, "local", -3 },
      { saved.preset, saved.kl_weight, saved.prior, saved.sigma1, saved.estimator, saved.rho_init })
    local _, plain = bbb.load(out_dir .. "/models/plain-s1.ckpt")
    assert.is_nil(plain.meta.args.preset)
  end)

  it("the sampled Laplace predictive is near the probit one on clean images", function()
    local a, b = result.rotate.laplace["0"], result.rotate["laplace-sampled"]["0"]
    assert.is_true(math.abs(a.acc - b.acc) < 0.03, ("%g %g"):format(a.acc, b.acc))
    assert.is_true(math.abs(a.nll - b.nll) < 0.1 * a.nll, ("%g %g"):format(a.nll, b.nll))
  end)

end)

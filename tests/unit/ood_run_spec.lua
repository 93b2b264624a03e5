-- bbb.app.experiments.ood in-process on tiny settings: the result table
-- ood.run returns (every row on every set, AUROCs, calibration, what the
-- pictures draw), models saved and loaded again, and bad checkpoints raised
-- as usage errors rather than exits.
local ood = require "bbb.app.experiments.ood"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

local TINY = { limit = 300, test_limit = 200, epochs = 1, base_epochs = 1, hidden = 16, base_hidden = 16,
  test_samples = 3, noise_n = 50, threads = 1, chunk = 128, out = tmp .. "/o/ood" }
local ROWS = { "bbb_mean", "bbb_mc", "mlp", "dropout_mc" }
local BITS_MAX = math.log(10, 2) + 1e-4   -- entropy of ten classes, in bits

-- ood.options of TINY with more settings on top.
local function config(more)
  local t = {}
  for k, v in pairs(TINY) do t[k] = v end
  for k, v in pairs(more or {}) do t[k] = v end
  return ood.options(t)
end

-- ood.run without its progress lines in the test output.
local function run(cfg)
  local saved_print = _G.print
  _G.print = function() end
  local ok, result = pcall(ood.run, cfg)
  _G.print = saved_print
  if not ok then error(result, 0) end
  return result
end

local function keys(list, field)
  local out = {}
  for i, v in ipairs(list) do out[i] = v[field] end
  return out
end

local function in_unit(v, what)
  assert(type(v) == "number" and v >= 0 and v <= 1, ("%s = %s, not in [0, 1]"):format(what, tostring(v)))
end

-- Only numbers, strings, booleans and tables of them: what JSON can hold.
local function assert_plain(v, where)
  local t = type(v)
  if t == "table" then
    assert(getmetatable(v) == nil, where .. " has a metatable")
    for k, x in pairs(v) do assert_plain(x, where .. "." .. tostring(k)) end
  else
    assert(t == "number" or t == "string" or t == "boolean", ("%s is a %s"):format(where, t))
  end
end

-- Every row on every set: figures in range, and the ones a row cannot have absent.
local function check_figures(result)
  for _, row in ipairs(result.rows) do
    local base = result.figures[row.key].mnist
    in_unit(base.acc, row.key .. " acc")
    in_unit(base.ece, row.key .. " ece")
    in_unit(base.aurc, row.key .. " aurc")
    assert(base.brier >= 0 and base.brier <= 2, row.key .. " brier")
    assert(base.nll > 0, row.key .. " nll")
    assert.is_nil(base.auroc_entropy)
    assert.is_nil(base.auroc_mi)
    for _, set in ipairs { "fashion", "normal", "uniform" } do
      local f = result.figures[row.key][set]
      local where = row.key .. " on " .. set
      assert.is_nil(f.acc, where)                      -- no labels of the in-distribution classes
      assert(f.entropy >= 0 and f.entropy <= BITS_MAX, where)
      assert.are.equal("number", type(f.seed001_entropy), where)
      in_unit(f.auroc_entropy, where .. " AUROC by H")
      for _, by in ipairs { "entropy", "max_prob", "mi" } do
        local d = f.detection[by]
        if by ~= "mi" or row.mc then
          for _, k in ipairs { "auroc", "aupr_in", "aupr_out", "fpr95" } do in_unit(d[k], where .. " " .. by .. " " .. k) end
        else
          assert.is_nil(d, where)
        end
      end
      if row.mc then
        in_unit(f.auroc_mi, where .. " AUROC by MI")
        assert(f.mi >= 0, where)
        assert(math.abs(f.entropy - f.mi - f.expected_entropy) < 2e-4, where .. ": H = MI + E[H]")
      else
        assert.is_nil(f.mi, where)                     -- a point estimate has no MI
        assert.is_nil(f.expected_entropy, where)
        assert.is_nil(f.auroc_mi, where)
      end
    end
  end
end

-- What ood.plot draws, and the times.
local function check_picture_data(result)
  local sizes = { mnist = 200, fashion = 200, normal = 50, uniform = 50 }
  for _, row in ipairs(ROWS) do
    for set, n in pairs(sizes) do assert.are.equal(n, #result.entropies[row][set], row .. " " .. set) end
    local count = 0
    for _, b in ipairs(result.reliability[row]) do count = count + b.count end
    assert.are.equal(15, #result.reliability[row])
    assert.are.equal(200, count)
  end
  assert.are.equal(8, #result.noise_probs.bbb_mc)
  for _, p in ipairs(result.noise_probs.mlp) do
    local s = 0
    for _, v in ipairs(p) do s = s + v end
    assert.are.equal(10, #p)
    assert.is_near(1, s, 1e-4)
  end
  assert.are.same({ "mnist", "fashion" }, keys(result.passes, "set"))
  for _, group in ipairs(result.passes) do
    assert.are.equal(5, #group.images)
    for _, image in ipairs(group.images) do
      assert.are.equal(3, #image.classes)              -- one class per pass
      assert.are.equal("string", type(image.label))
    end
  end
  local t = result.times
  assert(t.trained_wall >= 0 and t.total_wall >= t.trained_wall, "times")
end

describe("ood.run", function()
  teardown(function() os.execute("rm -rf '" .. tmp .. "'") end)

  local saved = tmp .. "/m"
  local result
  setup(function()
    result = run(config { out = tmp .. "/p/ood", save_models = saved })
  end)

  it("returns every row on every set, in the table's order, as plain data", function()
    assert_plain(result, "result")
    assert.are.same(ROWS, keys(result.rows, "key"))
    assert.are.same({ false, true, false, true }, keys(result.rows, "mc"))
    assert.are.same({ "mnist", "fashion", "normal", "uniform" }, keys(result.sets, "name"))
    assert.are.same({ true, false, false, false }, keys(result.sets, "is_in"))
    assert.are.equal("mnist", result.dataset)
    assert.are.equal("fashion", result.other)
    assert.are.equal(16, result.config.hidden)
    assert.are.equal(3, result.config.test_samples)
    assert.is_false(result.default_run)
  end)

  it("scores each out-of-distribution set by entropy, and the MC rows by mutual information", function()
    check_figures(result)
  end)

  it("keeps what the pictures draw and the times", function()
    check_picture_data(result)
  end)

  it("loads the saved models instead of training, with the same posterior-mean figures", function()
    local again = run(config { sets = "normal", out = tmp .. "/q/ood", from_bbb = saved .. "-bbb.safetensors",
      from_mlp = saved .. "-mlp.safetensors", from_dropout = saved .. "-dropout.safetensors" })
    assert.are.same({ "mnist", "normal" }, keys(again.sets, "name"))
    assert.is_nil(again.passes)                          -- no other data set
    for _, row in ipairs { "bbb_mean", "mlp" } do      -- deterministic rows: the same weights, the same numbers
      assert.are.equal(result.figures[row].mnist.acc, again.figures[row].mnist.acc)
      assert.are.equal(result.figures[row].mnist.entropy, again.figures[row].mnist.entropy)
      assert.are.same(result.entropies[row].normal, again.entropies[row].normal)
    end
  end)

  it("raises a checkpoint that does not fit as a usage error, without exiting", function()
    local function usage(more)
      local ok, err = pcall(run, config(more))
      assert.is_false(ok)
      assert.are.equal("table", type(err), tostring(err))
      return err.usage
    end
    assert.are.equal("--from-mlp: " .. saved .. "-bbb.safetensors is a Bayesian model (use --from-bbb)",
      usage { from_mlp = saved .. "-bbb.safetensors" })
    assert.are.equal("--from-bbb: " .. saved .. "-mlp.safetensors holds no Bayesian layer",
      usage { from_bbb = saved .. "-mlp.safetensors" })
    assert.are.equal("--from-mlp: " .. saved .. "-mlp.safetensors was trained on mnist, but the "
      .. "in-distribution set is fashion (--dataset)", usage { dataset = "fashion", from_mlp = saved .. "-mlp.safetensors" })
  end)

  it("draws the pictures from the result", function()
    if not require("bbb.app.sys").find_program("gnuplot") then return end
    local saved_print = _G.print
    _G.print = function() end
    local ok, written = pcall(ood.plot, result)
    _G.print = saved_print
    assert(ok, written)
    assert.are.equal(7, #written)
    for _, f in ipairs(written) do
      local fh = assert(io.open(f, "rb"), "missing " .. f)
      assert.are.equal("\137PNG", fh:read(4))
      fh:close()
    end
  end)
end)

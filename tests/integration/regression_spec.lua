-- scripts/regression.lua end to end through the real interpreter: the
-- tasks and the seeds' presets on tiny settings, the band's behaviour on
-- fixed seeds (what a scientist would check by eye), and bad input refused
-- before any training.
local helpers = require "helpers"


local function run(args) return helpers.run("scripts/regression.lua " .. args) end
local function ok(args, ...) return helpers.ok("scripts/regression.lua " .. args, ...) end

local function is_png(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local head = f:read(4)
  f:close()
  return head == "\137PNG"
end

-- The figures the script prints about its band.
local function band_figures(out)
  return {
    coverage = tonumber(out:match("coverage of the 95%% band inside the training range: ([%d.]+)%%")),
    inside = tonumber(out:match("inside the training range ([%d.]+), outside")),
    outside = tonumber(out:match("inside the training range [%d.]+, outside ([%d.]+)")),
  }
end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

describe("regression.lua", function()
  teardown(function() os.execute("rm -rf " .. tmp) end)

  it("writes a plot and reports coverage and band widths for every task", function()
    for _, task in ipairs { "toy", "paper", "sine" } do
      local png = tmp .. "/" .. task .. ".png"
      local n = task == "toy" and "" or " --n 50"   -- the toy's points are fixed
      local out = ok(("--task %s --epochs 60 --test-samples 20%s --out %s"):format(task, n, png),
        "coverage of the 95% band inside the training range", "inside the training range", "wrote " .. png)
      local f = band_figures(out)
      assert.truthy(f.coverage and f.inside and f.outside, out)
      assert.truthy(is_png(png), png)
    end
  end)

  it("takes the architecture, the KL weight and the band method from flags", function()
    local png = tmp .. "/flags.png"
    local out = ok(("--task sine --activation relu --layers 3 --hidden 7 --beta 0.01 --band percentile "
      .. "--band-of f --xrange -5:5 --epochs 30 --test-samples 30 --n 40 --no-mlp --out %s"):format(png),
      "BBB 1-7-7-7-1 relu", "kl-weight 0.4 (beta 0.01)", "mean band width over [-5, 5]", "wrote " .. png)
    assert.falsy(out:find("MLP", 1, true), out)
    assert.truthy(is_png(png))
    ok("--task toy --kl-weight 0.5 --epochs 20 --test-samples 10 --no-plot", "kl-weight 0.5 (beta 0.0833333)")
  end)

  it("preset s1 runs seed 001's nets and prints the seed's numbers beside ours", function()
    local png = tmp .. "/s1.png"
    local out = ok(("--preset s1 --epochs 50 --mlp-epochs 200 --test-samples 20 --out %s"):format(png),
      "BBB 1-32-1 sigmoid, prior N(0, 10^2), noise sigma 0.1 (fixed), adam lr 0.1",
      "MLP 1-16-16-1 sigmoid, MSE, sgd lr 0.01, 200 epochs",
      "mean band width over [-5, 5]", "mean band width over [-100, 100]",
      "seed 001 beside ours", "seed 278.1, ours", "MLP at x = 100: seed about -13, ours", "BBB at x = 4: truth -207")
    assert.truthy(is_png(png))
  end)

  it("preset s4 sweeps beta and tabulates ELBO, L2 and KL beside seed 004's", function()
    local png = tmp .. "/s4.png"
    local out = ok(("--preset s4 --epochs 30 --test-samples 20 --n 40 --out %s"):format(png),
      "BBB 1-10-10-1 tanh", "sweep: 5 nets", "-0.04507, -0.01688, 28.19")
    local rows = {}
    for beta, elbo, l2, kl in out:gmatch("\n(%S+)%s+(%-?[%d.]+)%s+(%-?[%d.]+)%s+([%d.]+)%s+[%d.]+%%") do
      rows[#rows + 1] = { beta = tonumber(beta), elbo = tonumber(elbo), l2 = tonumber(l2), kl = tonumber(kl) }
    end
    assert.are.equal(5, #rows, out)
    for i, b in ipairs { 1, 0.1, 0.01, 0.001, 0.0001 } do
      local r = rows[i]
      assert.are.equal(b, r.beta)
      -- ELBO = L2 - beta KL, to the printed precision
      assert.is_true(math.abs(r.elbo - (r.l2 - b * r.kl)) < 2e-5 + 1e-3 * math.abs(r.elbo), out)
    end
    assert.truthy(is_png(png))
  end)

  -- Blundell et al.'s curve on a fixed seed: the band covers fresh points
  -- inside the data and widens away from it.
  it("paper: the band covers at least 90% inside the data and is at least 3x wider outside", function()
    local out = ok("--task paper --seed 4 --test-samples 200 --no-plot --no-mlp")
    local f = band_figures(out)
    assert.truthy(f.coverage and f.inside and f.outside, out)
    assert.is_true(f.coverage >= 90, out)
    assert.is_true(f.outside >= 3 * f.inside, out)
  end)

  -- The sine on a fixed seed: a tanh net's band of f saturates outside the
  -- data (every hidden unit is flat there, so the spread stays what it was
  -- at the edge of the data), whatever the prior; ReLU units grow linearly
  -- away from the data and so does the band.
  it("sine: a tanh net's band does not widen outside the data, a ReLU net's does", function()
    local common = "--task sine --seed 1 --band-of f --test-samples 200 --no-plot --no-mlp"
    local tanh = band_figures(ok(common .. " --activation tanh"))
    local tanh_wide_prior = band_figures(ok(common .. " --activation tanh --prior-sigma 3"))
    local relu = band_figures(ok(common .. " --activation relu"))
    for _, f in ipairs { tanh, tanh_wide_prior, relu } do
      assert.truthy(f.coverage and f.inside and f.outside)
      assert.is_true(f.coverage >= 90, ("coverage %s"):format(f.coverage))
    end
    assert.is_true(tanh.outside < 1.5 * tanh.inside, ("tanh: %s vs %s"):format(tanh.outside, tanh.inside))
    assert.is_true(tanh_wide_prior.outside < 1.5 * tanh_wide_prior.inside)
    assert.is_true(relu.outside > 2.5 * relu.inside, ("relu: %s vs %s"):format(relu.outside, relu.inside))
  end)

  it("refuses bad input before training", function()
    local cases = {
      { "--xrange 2:1", "--xrange: lo must be below hi, got 2:1" },
      { "--xrange 1:1", "--xrange: lo must be below hi" },
      { "--xrange -1:-3", "--xrange: lo must be below hi, got -1:-3" },
      { "--xrange 1", "--xrange: expected lo:hi in finite numbers" },
      { "--xrange 0:inf", "--xrange: expected lo:hi in finite numbers" },
      { "--yrange 3:-3", "--yrange: lo must be below hi" },
      { "--band gaussian", "--band: expected one of percentile, normal, got 'gaussian'" },
      { "--band-of z", "--band-of: expected one of y, f" },
      { "--beta -1", "--beta: number '-1' is out of range" },
      { "--beta nan", "--beta: expected a number, got 'nan'" },
      { "--beta 1e999", "--beta: number '1e999' is not finite" },
      { "--beta 0.1,-0.5", "--beta: number '-0.5' is out of range" },
      { "--beta 0.1,", "--beta: expected a number, got ''" },
      { "--kl-weight -2", "--kl-weight: expected uniform, blundell or a number, got '-2'" },
      { "--kl-weight inf", "--kl-weight: expected uniform, blundell or a number, got 'inf'" },
      { "--beta 0.1 --kl-weight 1", "give --kl-weight or --beta, not both" },
      { "--activation gelu", "--activation: expected one of relu, sigmoid, tanh" },
      { "--layers 0", "--layers:" },
      { "--preset s9", "--preset: expected one of s1, s4" },
      { "--xrange -1e300,1e300", "--xrange: -1e300,1e300 reaches beyond [-1e6, 1e6], where the float32 net's band "
        .. "is no longer finite" },
      { "--xrange 0:1e7", "--xrange: 0:1e7 reaches beyond [-1e6, 1e6]" },
      { "--xrange 1e5:100000.001", "--xrange: 1e5:100000.001 is too narrow for float32 to sample 400 points in it" },
      { "--band percentile --test-samples 1", "--test-samples 1: a percentile band needs the spread of at least 2 samples" },
      { "--test-samples 1", "--test-samples 1: a normal band needs the spread of at least 2 samples" },
      { "--n 50", "--n cannot act in this run: --task toy trains on its 6 fixed points" },
      { "--yrange 0:1", "--yrange cannot act in this run: --no-plot draws no plot" },
      { "--out " .. tmp .. "/no.png", "--out cannot act in this run: --no-plot writes no plot" },
      { "--no-mlp --mlp-lr 0.1", "--mlp-lr cannot act in this run: the MLP baseline is off (--no-mlp)" },
      { "--preset s4 --mlp-epochs 9", "--mlp-epochs cannot act in this run: the MLP baseline is off (preset s4)" },
    }
    for _, c in ipairs(cases) do
      local status, out = run(c[1] .. " --task toy --epochs 5 --no-plot")
      assert.are_not.equal(0, status, out)
      assert.truthy(out:find(c[2], 1, true), ("%s: expected %q in:\n%s"):format(c[1], c[2], out))
      assert.falsy(out:find("epochs in", 1, true), "trained before refusing " .. c[1])
    end
  end)

  it("measures the band inside the data however wide the view, and a view beside the data too", function()
    for _, band in ipairs { "percentile", "normal" } do
      local out = ok(("--task paper --epochs 5 --test-samples 20 --no-mlp --no-plot --band %s --xrange -1e6:1e6 "
        .. "--xrange 2:3"):format(band), "mean band width over [-1e+06, 1e+06]: inside the training range ",
        "mean band width over [2, 3]: ", ", all of it outside the training range [0, 0.5]")
      local inside, outside = out:match("over %[%-1e%+06, 1e%+06%]: inside the training range ([%d.]+), outside ([%d.]+)")
      assert.is_true(tonumber(inside) > 0 and tonumber(outside) > tonumber(inside), out)
      assert.falsy(out:lower():find("nan", 1, true), out)
    end
  end)
end)

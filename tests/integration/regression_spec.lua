-- scripts/regression.lua end to end through the real interpreter: the
-- tasks and the seeds' presets on tiny settings, the band's behaviour on
-- fixed seeds (what a scientist would check by eye), read from the figures
-- it writes (--summary), and bad input refused before any training.
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

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

-- `regression.lua args --summary FILE` -> the figures it wrote, and its output.
local n_runs = 0
local function figures(args)
  n_runs = n_runs + 1
  local path = ("%s/summary%d.json"):format(tmp, n_runs)
  local out = ok(args .. " --summary " .. path)
  local f = assert(io.open(path), out)
  local s = require("cjson").decode(f:read("a"))
  f:close()
  return s, out
end

local function finite(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge end

-- The band of a run's (first) net: its coverage and its widths over the
-- first range, each checked to be a finite number.
local function band(s)
  local net = s.nets[1]
  local v = net.views[1]
  local f = { coverage = net.coverage, inside = v.width_in, outside = v.width_out }
  for k, x in pairs(f) do assert.is_true(finite(x), k) end
  return f
end

describe("regression.lua", function()
  teardown(function() os.execute("rm -rf " .. tmp) end)

  it("writes a plot and reports coverage and band widths for every task", function()
    for _, task in ipairs { "toy", "paper", "sine" } do
      local png = tmp .. "/" .. task .. ".png"
      local n = task == "toy" and "" or " --n 50"   -- the toy's points are fixed
      local s, out = figures(("--task %s --epochs 60 --test-samples 20%s --out %s"):format(task, n, png))
      assert.are.equal(task, s.task)
      assert.are.equal(task == "toy" and 6 or 50, s.n)
      local f = band(s)
      assert.is_true(f.coverage >= 0 and f.coverage <= 1, out)
      assert.is_true(f.inside > 0 and f.outside > 0, out)
      assert.truthy(is_png(png), png)
    end
  end)

  it("takes the architecture, the KL weight and the band method from flags", function()
    local png = tmp .. "/flags.png"
    local s, out = figures(("--task sine --activation relu --layers 3 --hidden 7 --beta 0.01 --band percentile "
      .. "--band-of f --xrange -5:5 --epochs 30 --test-samples 30 --n 40 --no-mlp --out %s"):format(png))
    assert.are.same({ 1, 7, 7, 7, 1 }, s.bnn.sizes)
    assert.are.equal("relu", s.bnn.activation)
    assert.are.equal(1, #s.nets)
    assert.is_near(0.4, s.nets[1].kl_weight, 1e-12)   -- beta x n
    assert.are.equal(0.01, s.nets[1].beta)
    assert.are.same({ "percentile", "f" }, { s.args.band, s.args.band_of })
    assert.are.same({ { -5, 5 } }, s.ranges)
    assert.are.same({ -5, 5 }, s.nets[1].views[1].range)
    assert.is_true(finite(s.nets[1].views[1].width_in) and finite(s.nets[1].views[1].width_out), out)
    assert.is_nil(s.mlp, out)
    assert.truthy(is_png(png))
    s = figures("--task toy --kl-weight 0.5 --epochs 20 --test-samples 10 --no-plot")
    assert.are.equal(0.5, s.nets[1].kl_weight)
    assert.is_near(0.5 / 6, s.nets[1].beta, 1e-15)
  end)

  it("preset s1 runs seed 001's nets and reports the seed's numbers beside ours", function()
    local png = tmp .. "/s1.png"
    local s, out = figures(("--preset s1 --epochs 50 --mlp-epochs 200 --test-samples 20 --out %s"):format(png))
    local b = s.bnn
    assert.are.same({ { 1, 32, 1 }, "sigmoid", 10, 0.1, "adam", 0.1 },
      { b.sizes, b.activation, b.prior_sigma, b.noise_sigma, b.optim, b.lr })
    local m = s.mlp
    assert.are.same({ { 1, 16, 16, 1 }, "sigmoid", "sgd", 0.01, 200 }, { m.sizes, m.activation, m.optim, m.lr, m.epochs })
    assert.are.same({ { -5, 5 }, { -100, 100 } }, s.ranges)
    for k, r in ipairs(s.ranges) do assert.are.same(r, s.nets[1].views[k].range) end
    -- seed 001's figures, and ours beside them
    local seed = s.seed001
    assert.are.same({ elbo = 278.1, mlp_mse = 4.19e-05, mlp_mse_epoch = 25000, mlp_at_100 = -13 }, seed.seed)
    local ours = seed.ours
    assert.are.equal(-207, ours.at4.truth)   -- -x^4 + 3x^2 + 1 at x = 4
    assert.is_true(ours.at4.lo <= ours.at4.mean and ours.at4.mean <= ours.at4.hi, out)
    assert.is_true(ours.at100.lo <= ours.at100.mean and ours.at100.mean <= ours.at100.hi, out)
    assert.are.equal(s.nets[1].last_epoch.elbo_total, ours.elbo)
    assert.are.equal(m.mse, ours.mlp_mse)
    assert.is_true(finite(ours.mlp_at_100) and m.mse > 0, out)
    assert.truthy(is_png(png))
  end)

  it("preset s4 sweeps beta and tabulates ELBO, L2 and KL beside seed 004's", function()
    local png = tmp .. "/s4.png"
    local s = figures(("--preset s4 --epochs 30 --test-samples 20 --n 40 --out %s"):format(png))
    assert.are.same({ { 1, 10, 10, 1 }, "tanh" }, { s.bnn.sizes, s.bnn.activation })
    assert.are.same({ beta = 0.001, elbo = -0.04507, l2 = -0.01688, kl = 28.19 }, s.seed004)
    assert.are.equal(5, #s.nets)
    for i, b in ipairs { 1, 0.1, 0.01, 0.001, 0.0001 } do
      local r = s.nets[i]
      assert.are.equal(b, r.beta)
      assert.is_true(r.terms.kl > 0 and r.terms.l2 < 0)
      -- ELBO = L2 - beta KL
      assert.is_near(r.terms.l2 - b * r.terms.kl, r.terms.elbo, 1e-12 * (1 + math.abs(r.terms.elbo)))
    end
    assert.truthy(is_png(png))
  end)

  -- Blundell et al.'s curve on a fixed seed: the band covers fresh points
  -- inside the data and widens away from it.
  it("paper: the band covers at least 90% inside the data and is at least 3x wider outside", function()
    local f = band(figures("--task paper --seed 4 --test-samples 200 --no-plot --no-mlp"))
    assert.is_true(f.coverage >= 0.9, ("coverage %s"):format(f.coverage))
    assert.is_true(f.outside >= 3 * f.inside, ("%s vs %s"):format(f.outside, f.inside))
  end)

  -- The sine on a fixed seed: a tanh net's band of f saturates outside the
  -- data (every hidden unit is flat there, so the spread stays what it was
  -- at the edge of the data), whatever the prior; ReLU units grow linearly
  -- away from the data and so does the band.
  it("sine: a tanh net's band does not widen outside the data, a ReLU net's does", function()
    local common = "--task sine --seed 1 --band-of f --test-samples 200 --no-plot --no-mlp"
    local tanh = band(figures(common .. " --activation tanh"))
    local tanh_wide_prior = band(figures(common .. " --activation tanh --prior-sigma 3"))
    local relu = band(figures(common .. " --activation relu"))
    for _, f in ipairs { tanh, tanh_wide_prior, relu } do
      assert.is_true(f.coverage >= 0.9, ("coverage %s"):format(f.coverage))
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
    for _, band_kind in ipairs { "percentile", "normal" } do
      local s, out = figures(("--task paper --epochs 5 --test-samples 20 --no-mlp --no-plot --band %s --xrange -1e6:1e6 "
        .. "--xrange 2:3"):format(band_kind))
      assert.are.same({ 0, 0.5 }, s.training_range)
      local wide, beside = s.nets[1].views[1], s.nets[1].views[2]
      assert.are.same({ -1e6, 1e6 }, wide.range)
      assert.is_true(finite(wide.width_in) and finite(wide.width_out), out)
      assert.is_true(wide.width_in > 0 and wide.width_out > wide.width_in, out)
      -- [2, 3] lies beside the data: no width inside it
      assert.are.same({ 2, 3 }, beside.range)
      assert.is_nil(beside.width_in, out)
      assert.is_true(finite(beside.width_out) and beside.width_out > 0, out)
      assert.is_true(finite(s.nets[1].coverage) and finite(s.nets[1].noise_sigma), out)
    end
  end)
end)

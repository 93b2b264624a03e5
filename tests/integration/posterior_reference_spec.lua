-- scripts/reference.lua end to end on a tiny table written here: the NUTS
-- reference of Bayesian linear regression (--hidden 0) against its closed
-- form, the fields of reference.json for regression and classification, a
-- second run (of the hmc kernel) that keeps the finished chains, and bad
-- input refused before any work.
local bbb = require "bbb"
local helpers = require "helpers"
local json = require "bbb.json"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

-- 60 rows of two features: y = 1.5 a - 2 b + 0.5 + noise (sd 0.5), and a
-- class that mostly follows the sign of a + b.
local function write_table(path)
  local g = bbb.Generator(5)
  local x, e = bbb.randn({ 60, 2 }, 0, 1, g):totable(), bbb.randn({ 60 }, 0, 0.5, g):totable()
  local lines = { "a,b,y,class" }
  for i, r in ipairs(x) do
    local y = 1.5 * r[1] - 2 * r[2] + 0.5 + e[i]
    lines[#lines + 1] = ("%.6f,%.6f,%.6f,%s"):format(r[1], r[2], y, r[1] + r[2] + e[i] > 0 and "up" or "down")
  end
  helpers.write(path, table.concat(lines, "\n") .. "\n")
end

local csv = tmp .. "/table.csv"
write_table(csv)
local FIT = "-- --epochs 20 --tune off --test-samples 20"

local function run(args) return helpers.run("scripts/reference.lua " .. args, "BBB_PROGRESS=off") end

local function read_json(path) return json.decode(assert(helpers.read(path), path), path) end

-- The rows of part k of split.json, as a (n, 2) tensor of features and n targets.
local function part(split, k, rows)
  local xs, ys = {}, {}
  for _, i in ipairs(split[k]) do xs[#xs + 1] = { rows[i][1], rows[i][2] }; ys[#ys + 1] = rows[i][3] end
  return xs, ys
end

local function read_rows(path)
  local rows = {}
  for line in io.lines(path) do
    local a, b, y = line:match("^([-%d.]+),([-%d.]+),([-%d.]+),")
    if a then rows[#rows + 1] = { tonumber(a), tonumber(b), tonumber(y) } end
  end
  return rows
end

-- mean and sd (with n, as the scaler) of column j of the rows.
local function scaler(list)
  local m, v = 0, 0
  for _, x in ipairs(list) do m = m + x / #list end
  for _, x in ipairs(list) do v = v + (x - m) ^ 2 / #list end
  return m, math.sqrt(v)
end

-- The value of flag in the fit.lua command a method's .argv file holds, or nil.
local function flag_of(path, flag)
  local argv = {}
  for w in (assert(helpers.read(path), path) .. "\0"):gmatch("([^%z]*)%z") do argv[#argv + 1] = w end
  for i, w in ipairs(argv) do if w == flag then return argv[i + 1] end end
  return nil
end

describe("reference.lua", function()
  teardown(function() os.execute("rm -rf " .. tmp) end)

  it("--help works", function()
    helpers.ok("scripts/reference.lua --help", "--hidden", "--methods", "--warmup", "--chains")
  end)

  it("--hidden 0: the NUTS predictive mean is the closed-form posterior predictive mean", function()
    local out = tmp .. "/linear"
    local status, text = run(("--data %s --target y --ignore class --out %s --hidden 0 --warmup 150 --draws 150 "
      .. "--chains 2 --noise-sigma 0.2 --methods mlp,laplace,bbb-tempered %s"):format(csv, out, FIT))
    assert.are.equal(0, status, text)
    local r = read_json(out .. "/reference.json")
    for _, k in ipairs { "rhat_max", "ess_min", "test_ll", "seconds" } do
      assert.are.equal("number", type(r.hmc[k]), k)
    end
    assert.are.equal("nuts", r.hmc.kernel)
    assert.are.equal(10, r.hmc.max_depth)
    assert.are.equal(2, #r.hmc.per_chain)
    for k, ch in ipairs(r.hmc.per_chain) do
      assert.are.equal(k, ch.chain)
      assert.truthy(ch.tree_depth >= 1 and ch.gradients > 0 and ch.divergences == 0, text)
    end
    helpers.has(text, "NUTS, max depth 10")
    helpers.has(text, "tree depth")
    assert.truthy(r.hmc.rhat_max < 1.1, text)
    assert.are.equal("number", type(r.methods.mlp.test_ll))
    assert.truthy(r.methods.mlp.w1 > 0)
    -- the distance per test row, whose mean is the method's
    local rows = r.methods.mlp.w1_rows
    assert.are.equal(#read_json(out .. "/split.json").test, #rows)
    local sum = 0
    for _, v in ipairs(rows) do sum = sum + v end
    assert.truthy(math.abs(sum / #rows - r.methods.mlp.w1) < 1e-12)
    -- laplace: a plain net with one noise sd, as the chains have
    assert.truthy(r.methods.laplace.w1 > 0 and r.methods.laplace.test_ll < 0, text)
    assert.are.equal("homo", flag_of(out .. "/methods/laplace.argv", "--noise"))
    -- bbb-tempered: the complexity term x 0.3 over an epoch of fit.lua's 32-row minibatches
    local n_train = #read_json(out .. "/split.json").train
    assert.are.equal(0.3 / math.ceil(n_train / 32), tonumber(flag_of(out .. "/methods/bbb-tempered.argv", "--kl-weight")))
    assert.are.equal("number", type(r.methods["bbb-tempered"].w1))
    -- the closed form, in the standardised units the chains ran in (the
    -- chains saw the inputs turned to their principal axes, which the
    -- predictive must not feel)
    assert.are.equal("on", r.hmc.rotate_inputs)
    local split, rows = read_json(out .. "/split.json"), read_rows(csv)
    local xs, ys = part(split, "train", rows)
    local vx, vy = part(split, "validation", rows)
    table.move(vx, 1, #vx, #xs + 1, xs)
    table.move(vy, 1, #vy, #ys + 1, ys)
    local ma, sa = scaler((function() local t = {} for i, r0 in ipairs(xs) do t[i] = r0[1] end return t end)())
    local mb, sb = scaler((function() local t = {} for i, r0 in ipairs(xs) do t[i] = r0[2] end return t end)())
    local my, sy = scaler(ys)
    -- the noise the chains assumed, as --noise-sigma fixed it, in the target's units
    assert.are.equal("fixed", r.hmc.noise)
    assert.truthy(math.abs(r.hmc.noise_sigma - 0.2 * sy) < 1e-5 * sy, tostring(r.hmc.noise_sigma))
    local function std(r0) return { (r0[1] - ma) / sa, (r0[2] - mb) / sb } end
    local zx, zy = {}, {}
    for i, r0 in ipairs(xs) do zx[i], zy[i] = std(r0), (ys[i] - my) / sy end
    local mean = bbb.mcmc.linear_posterior(bbb.tensor(zx), bbb.tensor(zy), { noise_sigma = 0.2, prior_sigma = 1 })
    local f = bbb.checkpoint.read(out .. "/predictive.safetensors").f
    local hmc_mean, hmc_sd = f:mean(1):totable(), ((f - f:mean(1):reshape(1, -1)):square():mean(1)):sqrt():totable()
    local tx = part(split, "test", rows)
    for i, r0 in ipairs(tx) do
      local z = std(r0)
      local exact = (mean[1] * z[1] + mean[2] * z[2] + mean[3]) * sy + my
      local mcse = hmc_sd[i] / math.sqrt(r.hmc.ess_min)
      assert.truthy(math.abs(hmc_mean[i] - exact) < 4 * mcse + 1e-4,
        ("test row %d: HMC %.4f, exact %.4f (Monte Carlo error %.4f)"):format(i, hmc_mean[i], exact, mcse))
    end
    -- the turn: orthogonal, and the chains' inputs are the standardised ones times it
    local job = bbb.checkpoint.read(out .. "/hmc/job.safetensors")
    local v = job.rotation
    for i, row in ipairs(v:t():matmul(v):totable()) do
      for j, e in ipairs(row) do assert.truthy(math.abs(e - (i == j and 1 or 0)) < 1e-5) end
    end
    assert.truthy((job.x - bbb.tensor(zx):matmul(v)):abs():max():item() < 1e-4)
    -- a second run reads the fits back, with the seconds each one took
    local again_status, again = run(("--data %s --target y --ignore class --out %s --hidden 0 --warmup 150 --draws 150 "
      .. "--chains 2 --noise-sigma 0.2 --methods mlp,laplace,bbb-tempered %s"):format(csv, out, FIT))
    assert.are.equal(0, again_status, again)
    assert.falsy(again:find("fitting", 1, true), again)
    local r2 = read_json(out .. "/reference.json")
    for _, name in ipairs { "mlp", "bbb-tempered" } do
      local kept = tonumber(helpers.read(out .. "/methods/" .. name .. ".seconds"))
      assert.truthy(kept > 0)
      assert.are.equal(kept, r2.methods[name].seconds)
      assert.truthy(math.abs(r.methods[name].seconds - kept) < 1e-3)
    end
    -- laplace: its fit's seconds and the posterior's
    assert.truthy(r2.methods.laplace.seconds >= tonumber(helpers.read(out .. "/methods/laplace.seconds")))
  end)

  it("keeps the chains a finished run wrote, and runs only what changed", function()
    local out = tmp .. "/again"
    local args = ("--data %s --target y --ignore class --out %s --hidden 0 --warmup 50 --draws 20 --chains 2 "
      .. "--kernel hmc --leapfrog 4 --methods none"):format(csv, out)
    local s1, t1 = run(args)
    assert.are.equal(0, s1, t1)
    local before = helpers.read(out .. "/hmc/chain-2.safetensors")
    os.remove(out .. "/hmc/chain-1.safetensors")
    local s2, t2 = run(args)
    assert.are.equal(0, s2, t2)
    helpers.has(t2, "1 of 2 chains done in an earlier run, kept")
    assert.truthy(before == helpers.read(out .. "/hmc/chain-2.safetensors"))
    local s3, t3 = run(args:gsub("%-%-draws 20", "--draws 24"))
    assert.are.equal(0, s3, t3)
    assert.falsy(t3:find("done in an earlier run", 1, true), t3)
    local r = read_json(out .. "/reference.json")
    assert.are.equal("hmc", r.hmc.kernel)
    assert.are.equal(4, r.hmc.leapfrog)
    assert.falsy(r.hmc.per_chain[1].tree_depth)
  end)

  it("a table with missing values: the net takes the model's inputs, indicator columns included", function()
    local lines = {}
    for line in io.lines(csv) do lines[#lines + 1] = line end
    lines[4] = lines[4]:gsub("^[^,]*", "")   -- one row without its 'a'
    local gappy = tmp .. "/gappy.csv"
    helpers.write(gappy, table.concat(lines, "\n") .. "\n")
    local out = tmp .. "/gappy"
    local status, text = run(("--data %s --target y --ignore class --out %s --hidden 0 --warmup 30 --draws 10 "
      .. "--chains 2 --kernel hmc --leapfrog 4 --methods none"):format(gappy, out))
    assert.are.equal(0, status, text)
    local job = bbb.checkpoint.read(out .. "/hmc/job.safetensors")
    assert.are.equal(3, job.x:size(2))   -- a, b and a's missing-value indicator
    assert.are.equal(3, job.rotation:size(1))
    local r = read_json(out .. "/reference.json")
    assert.are.equal("sampled", r.hmc.noise)
    assert.truthy(r.hmc.noise_sigma > 0)
  end)

  it("classification: agreement and total variation against the reference", function()
    local out = tmp .. "/classes"
    local status, text = run(("--data %s --target class --ignore y --out %s --hidden 0 --warmup 60 --draws 40 "
      .. "--chains 2 --methods mlp,bbb-flipout,laplace %s"):format(csv, out, FIT))
    assert.are.equal(0, status, text)
    local r = read_json(out .. "/reference.json")
    assert.are.equal("classification", r.task)
    assert.is_nil(flag_of(out .. "/methods/laplace.argv", "--noise"))
    for _, name in ipairs { "mlp", "bbb-flipout", "laplace" } do
      local m = r.methods[name]
      assert.truthy(m.agreement >= 0 and m.agreement <= 1 and m.tv >= 0 and m.tv <= 1, text)
      local agree, tv = 0, 0
      for i, v in ipairs(m.tv_rows) do
        assert.truthy(m.agreement_rows[i] == 0 or m.agreement_rows[i] == 1)
        agree, tv = agree + m.agreement_rows[i], tv + v
      end
      assert.are.equal(#m.tv_rows, #m.agreement_rows)
      assert.truthy(math.abs(agree / #m.tv_rows - m.agreement) < 1e-12 and math.abs(tv / #m.tv_rows - m.tv) < 1e-12)
      assert.truthy(r.hmc.test_ll < 0 and m.test_ll < 0)
    end
    -- a BBB variant is fit.lua's BBB with its own estimator
    assert.are.equal("bbb", read_json(out .. "/methods/bbb-flipout.json").model)
    local estimators = {}
    require("bbb.app.tabular").load(out .. "/methods/bbb-flipout.ckpt").net:apply(function(layer)
      if layer.estimator then estimators[#estimators + 1] = layer.estimator end
    end)
    assert.truthy(#estimators >= 1)
    for _, e in ipairs(estimators) do assert.are.equal("flipout", e) end
  end)

  it("refuses bad input before any work", function()
    local function refused(args, want)
      local status, text = run(args)
      assert.are.equal(2, status, text)
      helpers.has(text, want)
    end
    local base = ("--data %s --target y --out %s/bad"):format(csv, tmp)
    refused(base .. " --hidden 5,x", "--hidden: expected 0 or units per layer like 50 or 20,20, got '5,x'")
    refused(base .. " --methods bbb,gp", "--methods: expected one of bbb, bbb-weight, bbb-flipout, bbb-tempered, mlp, dropout, ensemble, laplace, got 'gp'")
    refused(base .. " --noise-sigma -1", "--noise-sigma: expected infer or a positive number, got '-1'")
    refused(base .. " --kernel mala", "--kernel: expected one of nuts, hmc")
    refused(base .. " --leapfrog 8", "--leapfrog is for --kernel hmc")
    refused(base .. " --kernel hmc --max-depth 5", "--max-depth is for --kernel nuts")
    refused(base .. " --max-depth 0", "--max-depth")
    refused(base .. " -- --seed 3", "--seed after --: reference.lua sets it for every fit.lua run itself")
    refused(base .. " --methods bbb,bbb-weight -- --estimator local", "--estimator after --: --methods bbb-weight")
    refused(base .. " --methods bbb-tempered -- --kl-weight=0.1", "--kl-weight after --: --methods bbb-tempered sets it")
    refused(base .. " --methods laplace,bbb -- --model bbb", "--model after --: reference.lua sets it")
    refused(base .. " --split " .. tmp .. "/nothing.json", "--split: " .. tmp .. "/nothing.json is not a file")
    refused(("--data %s/missing.csv --target y --out %s/bad"):format(tmp, tmp), "missing.csv")
    refused(("--data %s --target nope --out %s/bad"):format(csv, tmp), "nope")
    refused(("--data %s --target class --ignore y --out %s/bad --noise-sigma 0.5"):format(csv, tmp),
      "--noise-sigma is for regression")
    assert.falsy(helpers.read(tmp .. "/bad/hmc/job.safetensors"))
  end)
end)

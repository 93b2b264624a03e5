-- scripts/fit.lua and scripts/predict.lua end to end on small CSV tables
-- written to a temporary folder, and bbb.tabular's pieces on their own.
local bbb = require "bbb"
local H = require "helpers"
local tab = require "bbb.app.tabular"

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. H.q(dir)))

-- y = 2 x1 - x2 + (colour effect) + noise; class "hi" when y > 0
local function write_table(path, n, seed, opts)
  opts = opts or {}
  local g = bbb.Generator(seed)
  local x = bbb.randn({ n, 3 }, 0, 1, g):totable()
  local colours = opts.colours or { "red", "green", "blue" }
  local effect = { red = 1, green = 0, blue = -1, purple = 3 }
  local lines = { opts.header or "x1,x2,colour,y,label" }
  for i = 1, n do
    local c = colours[1 + (i % #colours)]
    local y = 2 * x[i][1] - x[i][2] + effect[c] + 0.3 * x[i][3]
    local row = { ("%.5f"):format(x[i][1]), ("%.5f"):format(x[i][2]), c }
    if not opts.no_target then
      row[#row + 1] = ("%.5f"):format(y)
      row[#row + 1] = y > 0 and "hi" or "lo"
    end
    lines[#lines + 1] = table.concat(row, ",")
  end
  local f = assert(io.open(path, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end

local function read_csv_file(path)
  local rows = {}
  for line in io.lines(path) do rows[#rows + 1] = line end
  return rows
end

local train_csv, new_csv = dir .. "/train.csv", dir .. "/new.csv"
write_table(train_csv, 300, 1)
write_table(new_csv, 40, 2, { header = "x1,x2,colour", no_target = true })

-- the JSON a run wrote (--summary)
local function summary_of(path) return bbb.json.decode(H.read(path)) end

describe("fit.lua and predict.lua", function()
  it("regression: fit, save, predict with epistemic and aleatoric parts, plot", function()
    local out = H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --epochs 40 --every 0 --save %s --plot %s "
      .. "--summary %s"):format(H.q(train_csv), H.q(dir .. "/reg.ckpt"), H.q(dir .. "/reg.png"), H.q(dir .. "/reg.json")))
    local fit = summary_of(dir .. "/reg.json")
    assert.are.same({ "regression", "y" }, { fit.task, fit.target })
    assert.are.same({ train = 243, validation = 27, test = 30 }, fit.rows)
    local t = fit.test
    assert.is_true(t.rmse < 1.2, out)   -- the noise is 0.3; the target's spread about 2.6
    assert.is_true(t.ll > -2, out)
    -- the 50/90/95% intervals' coverage of the test rows
    assert.is_true(t.cover50 >= 0 and t.cover50 <= t.cover90 and t.cover90 <= t.cover95 and t.cover95 <= 1, out)
    H.ok(("scripts/predict.lua --model %s --data %s --out %s --summary %s"):format(H.q(dir .. "/reg.ckpt"), H.q(new_csv),
      H.q(dir .. "/pred.csv"), H.q(dir .. "/pred.json")))
    local pred = summary_of(dir .. "/pred.json")
    assert.are.equal(40, pred.rows)
    assert.are.equal(bbb.json.null, pred.scores)   -- no target in the file: nothing to score
    local rows = read_csv_file(dir .. "/pred.csv")
    assert.are.equal(41, #rows)
    assert.are.equal("mean,std,epistemic_std,aleatoric_std,lo50,hi50,lo90,hi90,lo95,hi95", rows[1])
    for i = 2, #rows do
      local v = {}
      for w in rows[i]:gmatch("[^,]+") do v[#v + 1] = tonumber(w) end
      local mean, std, epi, alea = v[1], v[2], v[3], v[4]
      assert.near(std, math.sqrt(epi ^ 2 + alea ^ 2), 1e-3 * std + 1e-5)
      assert.is_true(epi > 0 and alea > 0)
      assert.is_true(v[5] < mean and mean < v[6] and v[7] < v[5] and v[10] > v[8])
    end
    local f = io.open(dir .. "/reg.png", "rb")
    assert.truthy(f, "no plot")
    f:close()
  end)

  it("classification: probabilities, entropy and mutual information; the scores when the target is there", function()
    local out = H.ok(("scripts/fit.lua --tune off --data %s --target label --ignore y --epochs 30 --every 0 --save %s "
      .. "--summary %s"):format(H.q(train_csv), H.q(dir .. "/cls.ckpt"), H.q(dir .. "/cls.json")))
    local fit = summary_of(dir .. "/cls.json")
    assert.are.same({ "classification", "label" }, { fit.task, fit.target })
    assert.is_true(fit.test.accuracy > 0.5 and fit.test.accuracy <= 1, out)   -- two classes
    assert.is_true(fit.test.ece >= 0 and fit.test.ece <= 1, out)
    out = H.ok(("scripts/predict.lua --model %s --data %s --out %s --plot %s --summary %s"):format(H.q(dir .. "/cls.ckpt"),
      H.q(train_csv), H.q(dir .. "/cls.csv"), H.q(dir .. "/cal.png"), H.q(dir .. "/cls_pred.json")))
    local pred = summary_of(dir .. "/cls_pred.json")
    assert.are.equal(300, pred.rows)
    assert.is_true(pred.scores.accuracy > 0.5 and pred.scores.accuracy <= 1, out)   -- the target is in the file
    assert.are.equal("\137PNG", H.read(dir .. "/cal.png"):sub(1, 4))
    local rows = read_csv_file(dir .. "/cls.csv")
    assert.are.equal("predicted,p_hi,p_lo,entropy,mutual_information,observed", rows[1])
    local p = {}
    for w in rows[2]:gmatch("[^,]+") do p[#p + 1] = w end
    assert.near(1, tonumber(p[2]) + tonumber(p[3]), 1e-4)
    assert.is_true(tonumber(p[5]) >= 0 and tonumber(p[5]) <= tonumber(p[4]) + 1e-6)
  end)

  it("a missing column is an error naming it (exit 2); an unseen category too with --unseen error", function()
    local bad = dir .. "/bad.csv"
    write_table(bad, 10, 3, { header = "x1,x2,colour", no_target = true, colours = { "red", "purple" } })
    local status, out = H.run(("scripts/predict.lua --model %s --data %s --out %s --unseen error"):format(H.q(dir .. "/reg.ckpt"),
      H.q(bad), H.q(dir .. "/x.csv")))
    assert.are.equal(2, status, out)
    H.has(out, "predict.lua: ")
    H.has(out, "column 'colour': category 'purple' (row 1) was never seen in training (known: green, blue, red)")
    local f = assert(io.open(dir .. "/nocol.csv", "w"))
    f:write("x1,colour\n1,red\n")
    f:close()
    status, out = H.run(("scripts/predict.lua --model %s --data %s"):format(H.q(dir .. "/reg.ckpt"), H.q(dir .. "/nocol.csv")))
    assert.are.equal(2, status, out)
    H.has(out, "column 'x2' (used by the model) is not in")
    status, out = H.run(("scripts/fit.lua --tune off --data %s --target nope"):format(H.q(train_csv)))
    assert.are.equal(2, status, out)
    H.has(out, "fit.lua: read_csv: target column 'nope' is not in the header")
    status, out = H.run(("scripts/predict.lua --model %s --data %s"):format(H.q(train_csv), H.q(train_csv)))
    assert.are.equal(2, status, out)
    H.has(out, "predict.lua: ")
  end)

  it("predict.lua matches columns by name: a file with them in another order predicts the same", function()
    if not io.open(dir .. "/reg.ckpt") then
      H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --epochs 40 --every 0 --save %s")
        :format(H.q(train_csv), H.q(dir .. "/reg.ckpt")))
    end
    -- the same rows, the columns swapped and one extra column
    local swapped = { "colour,extra,x2,x1" }
    for i, line in ipairs(read_csv_file(new_csv)) do
      if i > 1 then
        local x1, x2, c = line:match("^([^,]+),([^,]+),([^,]+)$")
        swapped[#swapped + 1] = table.concat({ c, "7", x2, x1 }, ",")
      end
    end
    local f = assert(io.open(dir .. "/swapped.csv", "w"))
    f:write(table.concat(swapped, "\n"), "\n")
    f:close()
    for _, name in ipairs { "new", "swapped" } do
      local out = H.ok(("scripts/predict.lua --model %s --data %s --out %s --seed 3"):format(H.q(dir .. "/reg.ckpt"),
        H.q(dir .. "/" .. name .. ".csv"), H.q(dir .. "/p_" .. name .. ".csv")), "40 rows")
      if name == "swapped" then H.has(out, "left out: extra") end
    end
    assert.are.same(read_csv_file(dir .. "/p_new.csv"), read_csv_file(dir .. "/p_swapped.csv"))
  end)

  it("fit.lua reads a column of numbers with a stray cell only when named categorical", function()
    local lines = read_csv_file(train_csv)
    lines[2] = lines[2]:gsub("^[^,]+", "12.5x")   -- x1 of the first row
    local f = assert(io.open(dir .. "/stray.csv", "w"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    local status, out = H.run(("scripts/fit.lua --tune off --data %s --target y --ignore label --epochs 2 --every 0")
      :format(H.q(dir .. "/stray.csv")))
    assert.are.equal(2, status, out)
    H.has(out, "column 1 ('x1') holds numbers in 299 rows, but row 1 holds '12.5x'")
    H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --epochs 2 --every 0 --categorical x2")
      :format(H.q(train_csv)), "regression of 'y'")
  end)

  it("an incomplete first row stops neither fit.lua --test nor predict.lua with --missing drop", function()
    local lines, g = { "y,a,b" }, bbb.Generator(4)
    local u = bbb.rand({ 200, 2 }, 0, 1, g):totable()
    for i = 1, 200 do
      lines[#lines + 1] = ("%.6f,%s,%.6f"):format(u[i][1] + 2 * u[i][2], i == 1 and "" or ("%.6f"):format(u[i][1]), u[i][2])
    end
    local f = assert(io.open(dir .. "/gap.csv", "w"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    local gap = H.q(dir .. "/gap.csv")
    H.ok(("scripts/fit.lua --tune off --data %s --test %s --target y --missing drop --epochs 3 --every 0 --save %s")
      :format(gap, gap, H.q(dir .. "/gap.ckpt")), "test ")
    H.ok(("scripts/predict.lua --model %s --data %s --missing drop --out %s"):format(H.q(dir .. "/gap.ckpt"), gap,
      H.q(dir .. "/gap_pred.csv")))
    assert.are.equal(200, #read_csv_file(dir .. "/gap_pred.csv"))   -- the header and 199 rows
  end)

  it("predict.lua refuses a checkpoint whose preprocessing was edited into nonsense", function()
    if not io.open(dir .. "/reg.ckpt") then
      H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --epochs 40 --every 0 --save %s")
        :format(H.q(train_csv), H.q(dir .. "/reg.ckpt")))
    end
    local edits = {
      { function(t) t.prep.x_std[1] = 0 end, "the saved scaling of feature 'x1' is not a finite mean and a positive scale" },
      { function(t) t.noise_sigma = -1 end, "the saved noise sigma is not a positive number (-1" },
      { function(t) t.prep.y_std = 0 end, "the saved target scaling is not a finite mean and a positive scale" },
      { function(t) t.prep.x_mean = { 1 } end, "does not have one mean and one scale for each of the" },
      { function(t) t.task = "ranking" end, "the saved task is not regression or classification" },
      { function(t) t.df = 2.5 end, "the saved Student-t degrees of freedom are not a whole number" },
      { function(t) t.df, t.noise = 4, "hetero" end, "the saved Student-t degrees of freedom are not a whole number" },
    }
    for i, e in ipairs(edits) do
      local tensors, meta = bbb.checkpoint.read(dir .. "/reg.ckpt")
      e[1](meta.state.tabular)
      local path = ("%s/edited%d.ckpt"):format(dir, i)
      bbb.checkpoint.write(path, tensors, meta)
      local status, out = H.run(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(path), H.q(new_csv),
        H.q(dir .. "/edited.csv")))
      assert.are.equal(2, status, out)
      H.has(out, e[2])
    end
  end)

  it("uci.lua runs the protocol on tiny settings and writes its table", function()
    local out = H.ok(("scripts/uci.lua --sets boston --methods bbb-local,mlp --splits 2 --epochs 3 --test-samples 5 --out %s")
      :format(H.q(dir .. "/uci")), "ours bbb-local", "ours mlp", "pub. VI", "4.32 +- 0.29", "wrote ")
    local f = assert(io.open(dir .. "/uci.json"))
    local doc = bbb.json.decode(f:read("a"))
    f:close()
    assert.are.equal(2, #doc.rows)
    assert.are.equal(2, doc.rows[1].splits)
    assert.is_true(doc.rows[1].rmse > 0 and doc.rows[1].ll < 0)
    H.has(doc.command, "--splits 2")
    local status, err = H.run("scripts/uci.lua --methods nope")
    assert.are.equal(2, status)
    H.has(err, "uci.lua: --methods: expected one of bbb-weight")
  end)

  it("answers --help without side effects", function()
    H.ok("scripts/uci.lua --help", "--splits", "--methods")
    H.ok("scripts/bench_csv.lua --help", "--rows", "--cols")
    H.ok("scripts/fit.lua --help", "--target", "--save")
    H.ok("scripts/predict.lua --help", "--model", "--out")
  end)
end)

describe("bbb.app.tabular", function()
  it("standardises with the training rows' statistics, kept in the model", function()
    local x = bbb.tensor { { 1, 10 }, { 3, 10 }, { 5, 10 } }
    local mean, std = tab.scaler(x)
    assert.are.same({ 3, 10 }, mean)
    assert.near(math.sqrt(8 / 3), std[1], 1e-6)
    assert.are.equal(1, std[2])   -- a constant column is left unscaled
    local z = tab.scale(x, mean, std):totable()
    assert.near(-math.sqrt(3 / 2), z[1][1], 1e-6)
  end)

  it("splits into disjoint parts covering every row", function()
    local tr, va, te = tab.split(100, { val = 0.1, test = 0.2 }, bbb.Generator(4))
    assert.are.same({ 72, 8, 20 }, { tr:numel(), va:numel(), te:numel() })
    local seen = {}
    for _, part in ipairs { tr, va, te } do
      for _, i in ipairs(part:totable()) do
        assert.is_nil(seen[i])
        seen[i] = true
      end
    end
    H.errors_with(function() tab.split(3, { val = 0.5, test = 0.5 }) end, "too few to split")
  end)

  it("scores a known predictive: the log-likelihood of one Gaussian", function()
    local ds = { target = { name = "y", categorical = false }, columns = { { name = "x" } }, feature_names = { "x" } }
    local x, y = bbb.tensor { { 0 }, { 1 } }, bbb.tensor { 1, 3 }
    local m = tab.new(ds, x, y, "mlp", { hidden = { 2 }, generator = bbb.Generator(1) })
    m.noise_sigma = 0.5
    local s, p = tab.score(m, { x = x, y = y, n = 2 })
    local mu, sig = p.mean:totable(), 0.5 * m.prep.y_std
    local want = 0
    for i, yi in ipairs { 1, 3 } do
      want = want + (-0.5 * math.log(2 * math.pi * sig ^ 2) - (yi - mu[i]) ^ 2 / (2 * sig ^ 2)) / 2
    end
    assert.near(want, s.ll, 1e-4)
    -- a plain net: the closed-form CRPS is that of N(mean, sig^2) row by row
    local many = {}
    for i = 1, 2 do many[i] = bbb.metrics.crps_gaussian({ mu[i] }, { sig }, { ({ 1, 3 })[i] }) end
    assert.near((many[1] + many[2]) / 2, s.crps, 1e-6)
    -- many rows: the CRPS of the noisy draws approaches the closed form
    local xr, yr = {}, {}
    for i = 1, 1000 do xr[i], yr[i] = { i % 2 }, 3 - 2 * (i % 2) end
    local r, p = tab.score(m, { x = bbb.tensor(xr), y = bbb.tensor(yr), n = 1000 })
    assert.near(r.crps, tab.crps_mc(m, p, bbb.tensor(yr), 1), 0.05 * r.crps)
  end)
end)

describe("fit.lua's calibration and protocol", function()
  local json = require "bbb.json"
  local function fit(flags, summary)
    H.ok(("scripts/fit.lua --tune off --data %s --every 0 --summary %s %s"):format(H.q(train_csv),
      H.q(summary), flags))
    return json.decode(H.read(summary))
  end

  it("--save-split writes disjoint parts covering every row, and --split scores on the same rows", function()
    local a = fit(("--target y --ignore label --epochs 5 --min-epochs 0 --save-split %s"):format(H.q(dir .. "/split.json")), dir .. "/a.json")
    local s = json.decode(H.read(dir .. "/split.json"))
    assert.are.equal(300, s.rows)
    local seen = 0
    local mark = {}
    for _, k in ipairs { "train", "validation", "test" } do
      for _, i in ipairs(s[k]) do
        assert.is_nil(mark[i], "row " .. i .. " in two parts")
        mark[i], seen = true, seen + 1
      end
    end
    assert.are.equal(300, seen)
    assert.are.same({ a.rows.train, a.rows.validation, a.rows.test }, { #s.train, #s.validation, #s.test })
    -- another seed draws other rows, unless the split is given
    local b = fit(("--target y --ignore label --epochs 5 --min-epochs 0 --seed 9 --split %s --save-split %s"):format(
      H.q(dir .. "/split.json"), H.q(dir .. "/split2.json")), dir .. "/b.json")
    assert.are.same(s, json.decode(H.read(dir .. "/split2.json")))
    assert.are.same(a.rows, b.rows)
    H.write(dir .. "/bad_split.json", '{"rows": 300, "train": [1, 2, 301], "validation": [], "test": []}')
    local status, out = H.run(("scripts/fit.lua --tune off --data %s --target y --split %s"):format(H.q(train_csv),
      H.q(dir .. "/bad_split.json")))
    assert.are.equal(2, status, out)
  end)

  it("stops no earlier than --min-epochs, and refits on training and validation rows", function()
    local a = fit("--target y --ignore label --epochs 60 --patience 1 --min-epochs 30", dir .. "/c.json")
    assert.is_true(a.trained_epochs >= 30, a.trained_epochs)
    assert.are.equal(a.rows.train + a.rows.validation, a.refit.rows)
    assert.are.equal(math.max(1, a.epochs), a.refit.epochs)
    local b = fit("--target y --ignore label --epochs 20 --no-refit", dir .. "/d.json")
    assert.is_nil(b.refit)
  end)

  it("--conformal multipliers are the ceil((n+1) level)-th normalised residual of the validation rows", function()
    local ds = tab.read(train_csv, { target = "y", ignore = { "label" } })
    local tr, va = tab.split(ds.n, { val = 0.3 }, bbb.Generator(3))
    local trs, vas = tab.subset(ds, tr), tab.subset(ds, va)
    -- a plain net predicts without draws, so the residuals can be recomputed
    local m = tab.new(ds, trs.x, trs.y, "mlp", { hidden = { 8 }, generator = bbb.Generator(3) })
    tab.train(m, trs, vas, { epochs = 10, generator = bbb.Generator(3) })
    local q = tab.conformal(m, vas)
    local p = tab.predict(m, vas.x)
    local r = ((p.mean - vas.y:reshape(-1)):abs() / p.std):totable()
    table.sort(r)
    for _, lv in ipairs { 0.5, 0.9, 0.95 } do
      local k = math.ceil((#r + 1) * lv)
      assert.near(r[k], q[tostring(lv)], 1e-6)
      -- by construction the calibration rows are covered at least at the level
      local inside = 0
      for _, v in ipairs(r) do if v <= q[tostring(lv)] then inside = inside + 1 end end
      assert.is_true(inside / #r >= lv)
    end
    local s = fit("--target y --ignore label --epochs 30 --conformal", dir .. "/e.json")
    assert.is_true(s.conformal["0.95"] > 0)
    assert.is_number(s.test.conformal95)
  end)

  it("a calibrated model is the net its calibration was fitted to: no refit", function()
    -- a plain net has no draws: its multipliers recomputed from the saved
    -- validation rows are the saved ones only if the saved net made them
    local ckpt = dir .. "/conf.ckpt"
    local s = fit(("--target y --ignore label --model mlp --epochs 30 --conformal --save %s"):format(H.q(ckpt)), dir .. "/g.json")
    assert.is_nil(s.refit)
    local m = tab.load(ckpt)
    local ds = tab.read(train_csv, { target = "y", ignore = { "label" } })
    local q = tab.conformal(m, tab.subset(ds, bbb.tensor(m.extra.split.validation)))
    for _, lv in ipairs { "0.5", "0.9", "0.95" } do assert.near(m.conformal[lv], q[lv], 1e-9) end
    assert.is_nil(fit("--target label --ignore y --epochs 20", dir .. "/h.json").refit)
    assert.is_table(fit("--target y --ignore label --epochs 20", dir .. "/i.json").refit)
  end)

  it("a classifier's temperature is fitted on the validation rows, saved, and used by predict", function()
    local ckpt = dir .. "/cls_t.ckpt"
    local s = fit(("--target label --ignore y --epochs 30 --save %s"):format(H.q(ckpt)), dir .. "/f.json")
    assert.is_true(s.temperature > 0.01 and s.temperature < 100, s.temperature)
    local m = tab.load(ckpt)
    assert.near(s.temperature, m.temperature, 1e-9)
    -- the checkpoint holds the rows of each part
    assert.are.same({ s.rows.train, s.rows.validation, s.rows.test },
      { #m.extra.split.train, #m.extra.split.validation, #m.extra.split.test })
    local x = tab.read_for(m, new_csv, {}).x
    bbb.manual_seed(2)
    local with = tab.predict(m, x, 10).probs
    m.temperature = nil
    bbb.manual_seed(2)
    local without = tab.predict(m, x, 10).probs
    local want = bbb.calibration.apply(without:clamp(1e-12, 1):log(), s.temperature)
    assert.is_true((with - want):abs():max():item() < 1e-5)
  end)
end)

describe("a classifier whose validation rows are all right", function()
  local json = require "bbb.json"
  -- two classes far apart: every validation row right, the NLL falls for ever as T -> 0
  local function separable(path, n)
    local g = bbb.Generator(21)
    local x = bbb.randn({ n, 2 }, 0, 0.5, g):totable()
    local lines = { "a,b,class" }
    for i = 1, n do
      local c = i % 2 == 0 and 1 or -1
      lines[#lines + 1] = ("%.4f,%.4f,%s"):format(x[i][1] + 3 * c, x[i][2], c > 0 and "up" or "down")
    end
    H.write(path, table.concat(lines, "\n") .. "\n")
  end

  it("keeps a temperature the rows can show, and predict's entropy is that of its p_ columns", function()
    local path, ckpt, s_path = dir .. "/sep.csv", dir .. "/sep.ckpt", dir .. "/sep.json"
    separable(path, 300)
    H.ok(("scripts/fit.lua --tune off --data %s --target class --epochs 60 --every 0 --save %s --summary %s")
      :format(H.q(path), H.q(ckpt), H.q(s_path)))
    local s = json.decode(H.read(s_path))
    assert.are.equal(1, s.validation.accuracy)
    assert.are.equal(0, s.temperature_fit.errors)
    assert.is_true(s.temperature_fit.bound)
    assert.near(s.temperature_fit.floor, s.temperature, 1e-9)
    local out = dir .. "/sep_pred.csv"
    H.ok(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(ckpt), H.q(path), H.q(out)))
    local rows = {}
    for line in io.lines(out) do rows[#rows + 1] = line end
    local head = {}
    for w in rows[1]:gmatch("[^,]+") do head[#head + 1] = w end
    for i = 2, #rows do
      local v = {}
      for w in rows[i]:gmatch("[^,]+") do v[#v + 1] = tonumber(w) or w end
      local p1, p2 = v[2], v[3]
      local h = 0
      for _, p in ipairs { p1, p2 } do if p > 0 then h = h - p * math.log(p) end end
      assert.are.equal("entropy", head[4])
      assert.near(h, v[4], 1e-4, rows[i])
      assert.is_true(v[5] <= v[4] + 1e-6, rows[i])
    end
  end)
end)

describe("fit.lua refuses an identifier column as a feature", function()
  it("naming it and --ignore, unless declared with --categorical", function()
    local path = dir .. "/ids.csv"
    local lines = { "sample,x,y" }
    for i = 1, 120 do lines[#lines + 1] = ("s%03d,%.3f,%.3f"):format(i, math.sin(i), math.sin(i) * 2) end
    H.write(path, table.concat(lines, "\n") .. "\n")
    local status, out = H.run(("scripts/fit.lua --tune off --data %s --target y --epochs 2"):format(H.q(path)))
    assert.are.equal(2, status, out)
    H.has(out, "column 'sample' holds 120 distinct values in 120 rows")
    H.has(out, "--ignore sample")
    H.ok(("scripts/fit.lua --tune off --data %s --target y --epochs 2 --ignore sample"):format(H.q(path)))
    H.ok(("scripts/fit.lua --tune off --data %s --target y --epochs 2 --categorical sample"):format(H.q(path)))
  end)
end)

describe("fit.lua and predict.lua on the same checkpoint and rows", function()
  local json = require "bbb.json"
  it("print the same test scores: the same seeded draws", function()
    local test_csv, ckpt = dir .. "/test_rows.csv", dir .. "/same.ckpt"
    write_table(test_csv, 50, 7)
    for _, target in ipairs { "y", "label" } do
      local other = target == "y" and "label" or "y"
      H.ok(("scripts/fit.lua --tune off --data %s --test %s --target %s --ignore %s --epochs 20 --every 0 --save %s --summary %s")
        :format(H.q(train_csv), H.q(test_csv), target, other, H.q(ckpt), H.q(dir .. "/fit_s.json")))
      H.ok(("scripts/predict.lua --model %s --data %s --out %s --summary %s"):format(H.q(ckpt), H.q(test_csv),
        H.q(dir .. "/same.csv"), H.q(dir .. "/pred_s.json")))
      local a, b = json.decode(H.read(dir .. "/fit_s.json")), json.decode(H.read(dir .. "/pred_s.json"))
      assert.near(a.test.ll, b.scores.ll, 1e-5)
      if target == "y" then assert.near(a.test.crps_mc, b.scores.crps_mc, 1e-6 * a.test.crps_mc) end
    end
  end)
end)

describe("missing cells and unseen categories", function()
  local json = require "bbb.json"
  -- every 7th row lacks x1, every 11th its colour, every 13th its target
  local function holes(path, n, seed)
    write_table(path, n, seed)
    local lines = {}
    for line in io.lines(path) do lines[#lines + 1] = line end
    for i = 2, #lines do
      local f = {}
      for w in (lines[i] .. ","):gmatch("([^,]*),") do f[#f + 1] = w end
      if i % 7 == 0 then f[1] = "" end
      if i % 11 == 0 then f[3] = "NA" end
      if i % 13 == 0 then f[4] = "" end
      lines[i] = table.concat(f, ",")
    end
    H.write(path, table.concat(lines, "\n") .. "\n")
  end

  it("are imputed: every row with a target trains, every row gets one prediction", function()
    local path, ckpt = dir .. "/holes.csv", dir .. "/holes.ckpt"
    holes(path, 200, 11)
    local s_path = dir .. "/holes_s.json"
    H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --epochs 20 --every 0 --save %s --summary %s")
      :format(H.q(path), H.q(ckpt), H.q(s_path)))
    local s = json.decode(H.read(s_path))
    local without_target = 200 // 13
    assert.are.equal(200 - without_target, s.rows.train + s.rows.validation + s.rows.test)
    local m = tab.load(ckpt)
    assert.are.same({ 1 }, m.prep.impute.indicators)   -- x1 had holes; colour's are a row of zeros
    assert.is_true(#m.prep.x_mean == #m.prep.feature_names + 1)
    -- the median fills the hole, the indicator says so
    -- the summary says what was filled: x1's and colour's holes in rows with a target
    local holes_x1, holes_colour = 0, 0
    for i = 2, 201 do
      if i % 13 ~= 0 and i % 7 == 0 then holes_x1 = holes_x1 + 1 end
      if i % 13 ~= 0 and i % 11 == 0 then holes_colour = holes_colour + 1 end
    end
    assert.are.same({ numbers = holes_x1, categories = holes_colour, rows_dropped = 0 }, s.imputed)
    local x = bbb.tensor { { 0 / 0, 1, 1, 0, 0 }, { 2, 1, 1, 0, 0 } }
    local got = tab.impute(m.prep, x):totable()
    assert.are.equal(m.prep.impute.median[1], got[1][1])
    assert.are.same({ 1, 0 }, { got[1][6], got[2][6] })
    local out = dir .. "/holes_pred.csv"
    H.ok(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(ckpt), H.q(path), H.q(out)))
    local n = 0
    for _ in io.lines(out) do n = n + 1 end
    assert.are.equal(201, n)
    -- error refuses, drop leaves the rows out
    local status = H.run(("scripts/fit.lua --tune off --data %s --target y --ignore label --missing error"):format(H.q(path)))
    assert.are.equal(2, status)
  end)

  it("an unseen category reads as no level with a note, by default", function()
    local bad, out = dir .. "/purple.csv", dir .. "/purple_pred.csv"
    write_table(bad, 12, 3, { header = "x1,x2,colour", no_target = true, colours = { "red", "purple" } })
    H.ok(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(dir .. "/reg.ckpt"), H.q(bad), H.q(out)))
    local n = 0
    for _ in io.lines(out) do n = n + 1 end
    assert.are.equal(13, n)
    local ds = bbb.data.read_csv("c\nred\npurple\n", { text = true, levels = { c = { "red", "blue" } }, unseen = "ignore" })
    assert.are.same({ { 1, 0 }, { 0, 0 } }, ds.x:totable())
    assert.are.equal(1, ds.unseen.c)
  end)
end)

describe("predict.lua --id and --keep-columns", function()
  it("copy the columns as written beside one prediction per row", function()
    local path, out = dir .. "/ids.csv", dir .. "/ids_pred.csv"
    H.write(path, "id,x1,x2,colour\nr-07,0.5,,red\n0012,,1.5,blue\nz,1,2,\n")
    H.ok(("scripts/predict.lua --model %s --data %s --out %s --id id"):format(H.q(dir .. "/reg.ckpt"), H.q(path),
      H.q(out)))
    local first = {}
    for line in io.lines(out) do first[#first + 1] = line:match("^[^,]*") end
    assert.are.same({ "id", "r-07", "0012", "z" }, first)
    H.ok(("scripts/predict.lua --model %s --data %s --out %s --keep-columns")
      :format(H.q(dir .. "/reg.ckpt"), H.q(path), H.q(out)))
    local rows = {}
    for line in io.lines(out) do rows[#rows + 1] = line end
    assert.are.equal(4, #rows)
    assert.truthy(rows[1]:find("^id,x1,x2,colour,mean,"))
    assert.truthy(rows[2]:find("^r%-07,0%.5,,red,"))
    assert.truthy(rows[3]:find("^0012,,1%.5,blue,"))
    assert.truthy(rows[4]:find("^z,1,2,,"))
    local status = H.run(("scripts/predict.lua --model %s --data %s --out %s --id nope")
      :format(H.q(dir .. "/reg.ckpt"), H.q(path), H.q(out)))
    assert.are.equal(2, status)
  end)
end)

describe("fit.lua --noise", function()
  local json = require "bbb.json"
  it("auto keeps the heteroscedastic head when the noise grows with an input, and its sd tracks the true one", function()
    local path, ckpt, s_path = dir .. "/het.csv", dir .. "/het.ckpt", dir .. "/het_s.json"
    local g = bbb.Generator(3)
    local x, e = bbb.rand({ 600 }, -3, 3, g):totable(), bbb.randn({ 600 }, 0, 1, g):totable()
    local lines = { "x,y" }
    for i = 1, 600 do
      lines[#lines + 1] = ("%.5f,%.5f"):format(x[i], math.sin(x[i]) + (0.1 + 0.5 * math.abs(x[i])) * e[i])
    end
    H.write(path, table.concat(lines, "\n") .. "\n")
    H.ok(("scripts/fit.lua --tune off --data %s --target y --every 0 --save %s --summary %s"):format(H.q(path), H.q(ckpt), H.q(s_path)))
    assert.are.equal("hetero", json.decode(H.read(s_path)).noise)
    local m = tab.load(ckpt)
    local grid = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5 }
    local xs = {}
    for i, v in ipairs(grid) do xs[i] = { v } end
    local alea = tab.predict(m, bbb.tensor(xs), 50).aleatoric:totable()
    for i, v in ipairs(grid) do
      local truth = 0.1 + 0.5 * math.abs(v)
      assert.is_true(math.abs(alea[i] - truth) < 0.5 * truth, ("x %g: aleatoric sd %g, true %g"):format(v, alea[i], truth))
    end
    -- a homoscedastic fit gives one sd for every row
    H.ok(("scripts/fit.lua --tune off --data %s --target y --every 0 --noise homo --save %s"):format(H.q(path), H.q(ckpt)))
    local homo = tab.predict(tab.load(ckpt), bbb.tensor(xs), 10).aleatoric:totable()
    assert.near(homo[1], homo[3], 1e-6)
  end)
end)

describe("fit.lua --likelihood student-t", function()
  local json = require "bbb.json"
  it("on heavy-tailed noise scores better than the Gaussian, its intervals cover, predict.lua agrees", function()
    -- y = a - b / 2 + 0.3 t_3 noise: a few rows far off
    local path, ckpt = dir .. "/heavy.csv", dir .. "/heavy.ckpt"
    local g = bbb.Generator(5)
    local n = 1500
    local x = bbb.rand({ n, 2 }, -2, 2, g):totable()
    local z, chi = bbb.randn({ n }, 0, 1, g):totable(), bbb.randn({ n, 3 }, 0, 1, g):square():sum(2):totable()
    local lines = { "a,b,y" }
    for i = 1, n do
      local t3 = z[i] / math.sqrt(chi[i] / 3)
      lines[#lines + 1] = ("%.5f,%.5f,%.5f"):format(x[i][1], x[i][2], x[i][1] - x[i][2] / 2 + 0.3 * t3)
    end
    H.write(path, table.concat(lines, "\n") .. "\n")
    local base = ("scripts/fit.lua --tune off --data %s --target y --every 0 --test-fraction 0.4 --noise homo --seed 2 ")
      :format(H.q(path))
    local got = {}
    for _, lik in ipairs { "gaussian", "student-t" } do
      local s_path = dir .. "/heavy_" .. lik .. ".json"
      H.ok(base .. ("--likelihood %s --save %s --summary %s"):format(lik, H.q(ckpt), H.q(s_path))
        .. (lik == "student-t" and " --df 3" or ""))
      got[lik] = json.decode(H.read(s_path))
    end
    local t, gauss = got["student-t"], got.gaussian
    assert.are.same({ "student-t", 3 }, { t.likelihood, t.df })
    assert.is_true(t.test.ll > gauss.test.ll + 0.15, ("ll %g (t) vs %g (Gaussian)"):format(t.test.ll, gauss.test.ll))
    -- 600 test rows: the t's intervals cover near their level; the
    -- Gaussian's, stretched by the far rows, cover far more than half at 50%
    assert.is_true(t.test.cover95 > 0.93 and t.test.cover95 < 0.975, t.test.cover95)
    assert.is_true(t.test.cover50 > 0.44 and t.test.cover50 < 0.58, t.test.cover50)
    assert.is_true(gauss.test.cover50 > t.test.cover50 + 0.08, gauss.test.cover50)
    assert.is_true(t.test.crps_mc < gauss.test.crps_mc, t.test.crps_mc)
    -- the checkpoint keeps df; predict.lua's intervals are the t's
    local m = tab.load(ckpt)
    assert.are.equal(3, m.df)
    H.ok(("scripts/predict.lua --model %s --data %s --out %s --seed 2"):format(H.q(ckpt), H.q(path), H.q(dir .. "/heavy_p.csv")))
    local rows = read_csv_file(dir .. "/heavy_p.csv")
    local v = {}
    for w in rows[2]:gmatch("[^,]+") do v[#v + 1] = tonumber(w) end
    -- mean, std, epistemic, aleatoric, lo50, hi50, lo90, hi90, lo95, hi95
    local scale = math.sqrt(v[3] ^ 2 + v[4] ^ 2 * (m.df - 2) / m.df)
    assert.near(v[1] + bbb.metrics.interval_multiplier(0.95, 3) * scale, v[10], 1e-4 * (1 + math.abs(v[10])))
    assert.near(v[2], math.sqrt(v[3] ^ 2 + v[4] ^ 2), 1e-4 * v[2])
    -- refused before any work: student-t with a heteroscedastic head, --df without student-t
    for _, bad in ipairs { "--likelihood student-t --noise hetero", "--df 5", "--likelihood student-t --df 2" } do
      local status, out = H.run(base .. bad)
      assert.are.equal(2, status, out)
      assert.is_nil(out:find("trained", 1, true), out)
    end
  end)
end)

describe("fit.lua --model ensemble", function()
  it("trains members that differ and predicts with their mixture; predict.lua reads it back", function()
    local ckpt = dir .. "/ens.ckpt"
    H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --model ensemble --members 3 --noise homo --epochs 20 "
      .. "--every 0 --save %s"):format(H.q(train_csv), H.q(ckpt)))
    local m = tab.load(ckpt)
    assert.are.equal(3, #m.members)
    local x = tab.read_for(m, new_csv, {}).x
    local xs = tab.inputs(m, x)
    local outs = {}
    for i, net in ipairs(m.members) do outs[i] = net:forward(xs):reshape(-1) end
    assert.is_true((outs[1] - outs[2]):abs():max():item() > 1e-3)   -- different initialisations
    local p = tab.predict(m, x)
    local avg = (outs[1] + outs[2] + outs[3]) / 3 * m.prep.y_std + m.prep.y_mean
    assert.is_true((p.mean - avg):abs():max():item() < 1e-4 * m.prep.y_std)
    -- the aleatoric part is the members' noise, the epistemic their spread
    local s2 = 0
    for _, s in ipairs(m.member_sigma) do s2 = s2 + s * s end
    assert.near(math.sqrt(s2 / 3) * m.prep.y_std, p.aleatoric:totable()[1], 1e-4 * m.prep.y_std)
    H.ok(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(ckpt), H.q(new_csv), H.q(dir .. "/ens.csv")))
  end)
  it("trains the members in --threads processes at once, to the same members as one after another", function()
    local got = {}
    for _, threads in ipairs { 1, 2 } do
      local ckpt = ("%s/ens_t%d.ckpt"):format(dir, threads)
      H.ok(("scripts/fit.lua --tune off --data %s --target y --ignore label --model ensemble --members 3 --noise homo "
        .. "--epochs 20 --every 0 --threads %d --seed 7 --save %s"):format(H.q(train_csv), threads, H.q(ckpt)))
      got[threads] = tab.load(ckpt)
    end
    for i = 1, 3 do
      assert.are.equal(got[1].member_sigma[i], got[2].member_sigma[i])
      local a, b = got[1].members[i]:state_dict(), got[2].members[i]:state_dict()
      for name, t in pairs(a) do assert.are.equal(0, (t - b[name]):abs():max():item(), name) end
    end
    assert.is_true(got[1].member_sigma[1] ~= got[1].member_sigma[2])   -- members of their own
  end)
end)

describe("fit.lua --tune", function()
  local json = require "bbb.json"
  it("chooses among the settings not given, on the validation rows", function()
    local s_path = dir .. "/tune.json"
    H.ok(("scripts/fit.lua --data %s --target y --ignore label --tune on --epochs 15 --min-epochs 0 --every 0 --summary %s")
      :format(H.q(train_csv), H.q(s_path)))
    local t = json.decode(H.read(s_path)).tune
    assert.truthy(({ [0.001] = true, [0.003] = true, [0.01] = true })[t.lr], t.lr)
    assert.truthy(({ [50] = true, [100] = true })[t.hidden[1]])
    H.ok(("scripts/fit.lua --data %s --target y --ignore label --tune on --lr 0.002 --hidden 20 --epochs 15 --every 0 "
      .. "--summary %s"):format(H.q(train_csv), H.q(s_path)))
    t = json.decode(H.read(s_path)).tune
    assert.are.same({ 0.002, { 20 } }, { t.lr, t.hidden })
    H.ok(("scripts/fit.lua --data %s --target y --ignore label --tune off --epochs 5 --every 0 --summary %s")
      :format(H.q(train_csv), H.q(s_path)))
    assert.is_nil(json.decode(H.read(s_path)).tune)
  end)
end)

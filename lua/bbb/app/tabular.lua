--- bbb.app.tabular: a Bayesian MLP on a table of your own, and how sure it is.
-- What scripts/fit.lua, predict.lua and uci.lua share: loading a CSV or an
-- R data set, splitting, standardising (the statistics live in the model),
-- building and training a net (Bayes by Backprop, or the plain and
-- MC-dropout baselines) with early stopping on the validation
-- log-likelihood, predictive distributions split into their epistemic and
-- aleatoric parts, scores (RMSE or accuracy, log-likelihood, interval
-- coverage or ECE), checkpoints holding model and preprocessing, plots.
local bbb = require "bbb"
local core = require "bbb.core"

local M = {}

M.LEVELS = { 0.5, 0.9, 0.95 }
-- The heteroscedastic head's noise floor, in standardised target units:
-- sigma = floor + softplus(second output).
M.HETERO_FLOOR = 1e-3
-- Student-t noise: at least 3 degrees of freedom, so the noise has an sd
-- (the aleatoric column); past 100 it is the Gaussian to three digits.
M.DF_MIN, M.DF_MAX = 3, 100
M.LEVELS_BY_NAME = { ["0.5"] = true, ["0.9"] = true, ["0.95"] = true }
local Z = { [0.5] = 0.6744897501960817, [0.9] = 1.6448536269514722, [0.95] = 1.959963984540054 }

--- multiplier(model, level) -> z: a regression model's central level
-- interval is mean +- z scale (predict's p.scale): the normal's z, or with
-- Student-t noise the t's of the model's degrees of freedom.
function M.multiplier(m, level)
  if not m.df then return Z[level] end
  return bbb.metrics.interval_multiplier(level, m.df)
end
local LOG_2PI = math.log(2 * math.pi)

local function exists(path)
  return core.sys.kind(path, true) ~= nil   -- without opening it: a FIFO would block
end

-- A table file to read must be a regular file: a FIFO blocks, a device
-- (/dev/zero) never ends.
local function check_regular(path)
  local kind = core.sys.kind(path, true)
  if kind and kind ~= "file" then error(("%s is a %s, not a file"):format(path, kind == "fifo" and "FIFO" or kind), 0) end
end

-- A reader's error without its position: the scripts show it to the person
-- who gave the file, for whom "tabular.lua:314:" means nothing.
local function quiet(fn, ...)
  local r = table.pack(pcall(fn, ...))
  if not r[1] then error((tostring(r[2]):gsub("^[^\n]-:%d+: ", "")), 0) end
  return table.unpack(r, 2, r.n)
end

--- read(spec, {target, task, ignore, drop_missing, delimiter, levels,
-- categorical}) -> data set. spec: a CSV file, or FOLDER:NAME for data set
-- NAME of an R package folder (data/r/MASS:Boston). task = "classification"
-- reads a numeric target as classes; categorical lists CSV columns read as
-- categories, numbers or not.
function M.read(spec, o)
  o = o or {}
  local folder, name = spec:match("^(.+):([%w%._]+)$")
  local cat = o.categorical and table.move(o.categorical, 1, #o.categorical, 1, {}) or nil
  if o.task == "classification" and o.target then
    cat = cat or {}
    cat[#cat + 1] = o.target
  end
  if folder and not exists(spec) then
    if o.categorical then
      error(("%s: an R data set says itself which columns are factors: name categorical columns of CSV "
        .. "files only"):format(spec), 0)
    end
    if cat and not (o.levels and o.levels[o.target]) then
      local probe = quiet(bbb.data.load_r, folder, name, { target = o.target, ignore = o.ignore, drop_missing = o.drop_missing, keep_missing = o.keep_missing })
      if not probe.target.categorical then error(("%s: the target '%s' is numeric; use it for regression"):format(spec, o.target), 0) end
      return probe
    end
    return quiet(bbb.data.load_r, folder, name, { target = o.target, ignore = o.ignore, drop_missing = o.drop_missing, keep_missing = o.keep_missing, levels = o.levels,
      unseen = o.unseen })
  end
  check_regular(spec)
  return quiet(bbb.data.read_csv, spec, { target = o.target, ignore = o.ignore, drop_missing = o.drop_missing,
    keep_missing = o.keep_missing, unseen = o.unseen,
    delimiter = o.delimiter, levels = o.levels, categorical = cat })
end

--- write_split(path, parts, n [, left_out]) / read_split(path, n) -> train, val, test:
-- the row numbers (1-based, of the table as read) of each part, as JSON
-- {"rows": n, "train": [...], "validation": [...], "test": [...]}, so another
-- tool can be scored on the same rows. When left_out rows of the file were
-- not read (missing cells or target), the numbers count the rows kept, in
-- file order, and the file says so ("left_out").
function M.write_split(path, parts, n, left_out)
  local out = { rows = n, left_out = left_out and left_out > 0 and left_out or nil }
  for _, k in ipairs { "train", "validation", "test" } do
    local rows = parts[k] and parts[k]:totable() or {}
    for i, v in ipairs(rows) do rows[i] = math.tointeger(v) end
    out[k] = #rows > 0 and rows or require("bbb.json").empty_array
  end
  require("bbb.app.cli").write_file(path, require("bbb.json").encode(out) .. "\n")
end

function M.read_split(path, n)
  local f, err = io.open(path, "rb")
  if not f then error(("cannot read %s: %s"):format(path, err), 0) end
  local ok, s = pcall(require("bbb.json").decode, f:read("a"), path)
  f:close()
  if not ok or type(s) ~= "table" then error(("%s is not a split written by --save-split"):format(path), 0) end
  if s.rows ~= n then error(("%s splits %s rows, the table has %d"):format(path, tostring(s.rows), n), 0) end
  local seen, parts = {}, {}
  for _, k in ipairs { "train", "validation", "test" } do
    if type(s[k]) ~= "table" then error(("%s: no list of %s rows"):format(path, k), 0) end
    for j, v in ipairs(s[k]) do
      local i = math.tointeger(v)
      s[k][j] = i
      if not i or i < 1 or i > n or seen[i] then
        error(("%s: %s row %s is not a row of the table, or is in two parts"):format(path, k, tostring(v)), 0)
      end
      seen[i] = true
    end
    parts[k] = #s[k] > 0 and core.tensor(s[k]) or nil
  end
  if not parts.train then error(("%s: no training rows"):format(path), 0) end
  return parts.train, parts.validation, parts.test
end

--- subset(ds, idx) -> the rows idx (a tensor of 1-based indices) of ds.
function M.subset(ds, idx)
  return { x = ds.x:index_select(idx), y = ds.y and ds.y:index_select(idx), n = idx:numel() }
end

--- split(n, {test = 0.1, val = 0.1}, generator) -> train, val, test index tensors
-- (val or test nil when its fraction is 0), from one random permutation.
function M.split(n, fr, gen)
  local perm = bbb.data.permutation(n, gen)
  local n_test = math.floor((fr.test or 0) * n + 0.5)
  local n_val = math.floor((fr.val or 0) * (n - n_test) + 0.5)
  if n - n_test - n_val < 2 then error(("only %d rows: too few to split off validation and test rows"):format(n), 0) end
  local function part(a, len) return len > 0 and perm:narrow(1, a, len) or nil end
  return part(n_test + n_val + 1, n - n_test - n_val), part(n_test + 1, n_val), part(1, n_test)
end

--- scaler(x) -> mean, std: per-column lists (a constant column gets std 1).
function M.scaler(x)
  if x:dim() == 1 then x = x:reshape(-1, 1) end
  local mean = x:mean(1, true)
  local std = ((x - mean):square():mean(1, true)):sqrt():totable()[1]
  for j, s in ipairs(std) do if not (s > 1e-12) then std[j] = 1 end end
  return mean:totable()[1], std
end

local function row(list) return core.tensor(list):reshape(1, #list) end

--- scale(x, mean, std) -> (x - mean) / std, column by column.
function M.scale(x, mean, std) return (x - row(mean)) / row(std) end

--- build(kind, d_in, d_out, {hidden = {50}, estimator, prior_sigma = 1, rho_init = -5,
--        dropout = 0.05, generator}) -> net. kind: "bbb", "mlp" or "dropout".
function M.build(kind, d_in, d_out, o)
  local sizes = { d_in }
  for _, h in ipairs(o.hidden or { 50 }) do sizes[#sizes + 1] = h end
  sizes[#sizes + 1] = d_out
  if kind == "bbb" then
    return bbb.nn.bayes_mlp(sizes, { prior = bbb.prior.Gaussian { sigma = o.prior_sigma or 1 },
      estimator = o.estimator or "local", rho_init = o.rho_init or -5, generator = o.generator })
  end
  return bbb.nn.mlp(sizes, { generator = o.generator, dropout = kind == "dropout" and (o.dropout or 0.05) or nil })
end

-- Missing numbers in the training rows: each column's median fills its
-- holes, and a column that had any gets an indicator feature (1: was missing).
local function impute_stats(x)
  local rows, d = x:totable(), x:size(2)
  local median, indicators = {}, {}
  for j = 1, d do
    local vals, holes = {}, false
    for i = 1, #rows do
      local v = rows[i][j]
      if v ~= v then holes = true else vals[#vals + 1] = v end
    end
    table.sort(vals)
    median[j] = #vals > 0 and vals[(#vals + 1) // 2] or 0
    if holes then indicators[#indicators + 1] = j end
  end
  return { median = median, indicators = indicators }
end

--- identifier_column(ds, declared) -> name, levels | nil: the first
-- categorical feature whose values are (nearly) all distinct, as a sample
-- name or a row number read as text is: as one-hot features it only lets a
-- net memorise rows. Columns in the list `declared` (--categorical) are
-- the user's choice and pass.
function M.identifier_column(ds, declared)
  local ok = {}
  for _, name in ipairs(declared or {}) do ok[name] = true end
  if ds.n < 20 then return nil end
  for _, c in ipairs(ds.columns) do
    if c.categorical and not ok[c.name] and c.levels and #c.levels >= 0.5 * ds.n then
      return c.name, #c.levels
    end
  end
  return nil
end

--- missing_cells(ds) -> numbers, categories, columns: the numeric cells
-- of ds.x read as missing (NaN, to be imputed), the categorical cells read
-- as no level (an all-zero one-hot block), and the columns holding either.
function M.missing_cells(ds)
  local rows, nums, cats, cols = ds.x:totable(), 0, 0, {}
  for _, c in ipairs(ds.columns) do
    for i = 1, #rows do
      local r, hole = rows[i], false
      if c.categorical then
        hole = true
        for j = c.first, c.first + c.width - 1 do if r[j] ~= 0 then hole = false end end
        if hole then cats = cats + 1 end
      elseif r[c.first] ~= r[c.first] then
        hole, nums = true, nums + 1
      end
      if hole then cols[c.name] = true end
    end
  end
  local n = 0
  for _ in pairs(cols) do n = n + 1 end
  return nums, cats, n
end

--- new(ds, train_x, train_y, kind, opts) -> a model bundle {net, kind, task, prep}:
-- prep, the preprocessing: columns, levels, scaling statistics of the training rows.
function M.new(ds, train_x, train_y, kind, o)
  local task = ds.target.categorical and "classification" or "regression"
  local prep = { columns = ds.columns, feature_names = ds.feature_names, target = ds.target,
                 classes = ds.classes, task = task, y_offset = ds.y_offset }
  prep.impute = impute_stats(train_x)
  prep.x_mean, prep.x_std = M.scaler(M.impute(prep, train_x))
  if task == "regression" then
    local lo, hi = -(-train_y):max():item(), train_y:max():item()
    if lo == hi then
      error(("the target '%s' is %s in every training row: there is nothing to learn"):format(ds.target.name, ("%g"):format(lo)), 0)
    end
    local m, s = M.scaler(train_y)
    prep.y_mean, prep.y_std = m[1], s[1]
  end
  local hetero = task == "regression" and o.noise == "hetero"
  local d_out = task == "regression" and (hetero and 2 or 1) or #ds.classes
  local m = { kind = kind, task = task, prep = prep, noise_sigma = 1,
              noise = task == "regression" and (hetero and "hetero" or "homo") or nil,
              df = task == "regression" and o.df or nil }   -- Student-t noise with df degrees of freedom
  if kind ~= "ensemble" then
    m.net = M.build(kind, #prep.x_mean, d_out, o)
    return m
  end
  -- a deep ensemble: plain nets from different initialisations, kept as the
  -- layers of one Sequential (a container for the checkpoint, never run)
  m.members, m.member_sigma = {}, {}
  for i = 1, o.members or 5 do m.members[i], m.member_sigma[i] = M.build("mlp", #prep.x_mean, d_out, o), 1 end
  m.net = bbb.nn.Sequential(m.members)
  return m
end

-- A member of an ensemble as a model of its own (sharing the preprocessing).
local function member(m, i)
  return { net = m.members[i], kind = "mlp", task = m.task, prep = m.prep, noise = m.noise, df = m.df,
           noise_sigma = m.member_sigma[i] }
end

-- The (S, N, C) outputs of the net for the standardised inputs xs: S MC
-- draws, or one pass of each member of an ensemble; for a classifier, the
-- averaged probabilities too.
local function output_stack(m, xs, S, likelihood)
  if m.kind ~= "ensemble" then
    local a, b, c = m.net:predict(xs, { samples = S, likelihood = likelihood, keep_samples = "tensor" })
    if likelihood == "gaussian" then return c end
    return b, a
  end
  local parts = {}
  for i, net in ipairs(m.members) do
    local a, b, c = net:predict(xs, { samples = 1, likelihood = likelihood, keep_samples = "tensor" })
    parts[i] = likelihood == "gaussian" and c or b
  end
  local stack = bbb.cat(parts, 1)
  return stack, likelihood ~= "gaussian" and stack:mean(1) or nil
end

--- impute(prep, x) -> x with each missing number (NaN) replaced by its
-- column's training median, and one indicator column appended per column
-- that had missing values in the training rows.
function M.impute(prep, x)
  local imp = prep.impute
  if not imp or x:size(1) == 0 then return x end
  local total = x:sum():item()
  if #imp.indicators == 0 and total == total then return x end
  local rows = x:totable()
  for _, r in ipairs(rows) do
    for _, j in ipairs(imp.indicators) do r[#r + 1] = r[j] ~= r[j] and 1 or 0 end
    for j = 1, #imp.median do if r[j] ~= r[j] then r[j] = imp.median[j] end end
  end
  return core.tensor(rows)
end

-- Float32 holds a number of this size in steps of this many units.
local function float_step(magnitude)
  return magnitude > 0 and 2.0 ^ (math.floor(math.log(magnitude, 2)) - 23) or 0
end

--- centre_target(ds [, offset]) -> ds with its numeric target less offset:
-- a float keeps 7 digits, so a target far from zero next to its spread
-- (1e8 +- 3: steps of 8) is kept as its difference from an offset, taken
-- in double from the values as read (ds.y_exact). With no offset given,
-- one is chosen (the rounded mean) only when float32's step at the
-- target's size is over 1% of its spread; ds.y_offset records it.
function M.centre_target(ds, offset)
  local y = ds.y_exact
  if not y or #y == 0 then return ds end
  if offset == nil then
    local n, sum, sq, big = 0, 0, 0, 0
    for _, v in ipairs(y) do
      if v == v then n, sum, big = n + 1, sum + v, math.max(big, math.abs(v)) end
    end
    if n < 2 then return ds end
    local mean = sum / n
    for _, v in ipairs(y) do if v == v then sq = sq + (v - mean) ^ 2 end end
    if float_step(big) <= 0.01 * math.sqrt(sq / (n - 1)) then return ds end
    offset = math.floor(mean + 0.5)
  end
  if offset == 0 then return ds end
  local c = {}
  for i, v in ipairs(y) do c[i] = v - offset end
  ds.y, ds.y_offset = core.tensor(c), offset
  return ds
end

--- unscorable_target(ds) -> nil, or what keeps ds's target from being
-- scored: rows without a value, or values no float holds.
function M.unscorable_target(ds)
  local missing, first, huge = 0, nil, nil
  for i, v in ipairs(ds.y:reshape(-1):totable()) do
    if v ~= v then missing, first = missing + 1, first or i
    elseif (v == math.huge or v == -math.huge) and not huge then huge = i end
  end
  if missing > 0 then
    return ("%d rows have no value of '%s' (the first is data row %d): fill them, or leave those rows out")
      :format(missing, ds.target.name, first)
  end
  if huge then
    return ("data row %d: the value of '%s' is beyond float32's range (about 3.4e38)"):format(huge, ds.target.name)
  end
end

--- drop_missing_target(ds) -> ds without the rows whose target is missing, and their count.
function M.drop_missing_target(ds)
  if not ds.y then return ds, 0 end
  local keep = {}
  for i, v in ipairs(ds.y:reshape(-1):totable()) do if v == v then keep[#keep + 1] = i end end
  if #keep == ds.n then return ds, 0 end
  if #keep == 0 then error(("every row's target '%s' is missing"):format(ds.target.name), 0) end
  local idx = core.tensor(keep)
  local out = {}
  for k, v in pairs(ds) do out[k] = v end
  out.x, out.y, out.n = ds.x:index_select(idx), ds.y:index_select(idx), #keep
  if ds.y_exact then
    out.y_exact = {}
    for i, k in ipairs(keep) do out.y_exact[i] = ds.y_exact[k] end
  end
  return out, ds.n - #keep
end

--- inputs(model, x) / targets(model, y): the model's imputation and scaling applied.
function M.inputs(m, x) return M.scale(M.impute(m.prep, x), m.prep.x_mean, m.prep.x_std) end
function M.targets(m, y)
  if m.task ~= "regression" then return y end
  return (y - m.prep.y_mean) / m.prep.y_std
end

--- predict(model, x (raw inputs), samples) -> for regression {mean, std,
-- epistemic, aleatoric (tensors, in the target's units), scale (the unit of
-- the intervals mean +- multiplier scale: std for Gaussian noise, for
-- Student-t noise sqrt(epistemic^2 + the t's scale^2)), f = (S, N) samples
-- of the standardised mean, noise = (S, N) scales or nil (one, noise_sigma)};
-- for classification {probs, entropy, mutual_information, samples = (S, N, C)}.
function M.predict(m, x, S)
  local xs = M.inputs(m, x)
  S = m.kind == "mlp" and 1 or m.kind == "ensemble" and #m.members or (S or 50)
  if m.task == "regression" then
    local stack = output_stack(m, xs, S, "gaussian")
    local f, noise = stack:narrow(3, 1, 1):clone():reshape(S, -1), nil
    -- hetero: each draw's own noise sd per row, (S, N) in standardised units;
    -- an ensemble's members each have their own
    if m.noise == "hetero" then noise = stack:narrow(3, 2, 1):clone():reshape(S, -1):softplus() + M.HETERO_FLOOR
    elseif m.kind == "ensemble" then
      noise = bbb.tensor(m.member_sigma):reshape(S, 1) * bbb.ones(1, f:size(2))
    end
    local mean = f:mean(1)
    local epi = ((f - mean:reshape(1, -1)):square():mean(1)):sqrt()
    local s = m.prep.y_std
    local scale = noise and noise:square():mean(1):sqrt() * s or bbb.full(mean:size(), m.noise_sigma * s)
    local epi_s = epi * s
    -- the sd of a t of scale c is c sqrt(df / (df - 2)) (fit.lua takes df >= 3)
    local alea = m.df and scale * math.sqrt(m.df / (m.df - 2)) or scale
    local std = (epi_s:square() + alea:square()):sqrt()
    return { mean = mean * s + m.prep.y_mean, epistemic = epi_s, aleatoric = alea, std = std,
             scale = m.df and (epi_s:square() + scale:square()):sqrt() or std, f = f, noise = noise }
  end
  local stack, probs = output_stack(m, xs, S, "categorical")
  if not m.temperature then
    local u = bbb.metrics.uncertainty(stack)
    return { probs = probs, entropy = u.predictive, mutual_information = u.mutual_information, samples = stack }
  end
  -- calibrated: the entropy is the p_ columns' own, and what the draws
  -- agree on (their mean entropy) is taken from the draws tempered alike,
  -- so entropy = expected + mutual information holds on the printed numbers
  local T = m.temperature
  probs = bbb.calibration.apply(probs:clamp(1e-12, 1):log(), T)
  local s, n, c = stack:size(1), stack:size(2), stack:size(3)
  local tempered = bbb.calibration.apply(stack:clamp(1e-12, 1):log():reshape(s * n, c), T):reshape(s, n, c)
  local entropy = bbb.metrics.entropy(probs)
  local expected = bbb.metrics.entropy(tempered:reshape(s * n, c)):reshape(s, n):mean(1)
  return { probs = probs, entropy = entropy, mutual_information = (entropy - expected):maximum(0), samples = stack }
end

--- seeded(model, seed, fn, ...) -> fn(...) with every layer of the net
-- drawing from one generator seeded with seed: fit.lua's test scores and
-- predict.lua's on the same checkpoint and rows then use the same draws.
function M.seeded(m, seed, fn, ...)
  local g, saved = bbb.Generator(seed), {}
  m.net:apply(function(l) saved[l] = l.generator or false; l.generator = g end)
  local r = table.pack(pcall(fn, ...))
  m.net:apply(function(l) l.generator = saved[l] or nil end)
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- The (S, N) log-density of the standardised targets ys (1, N) under each
-- draw's noise: Gaussian, or Student-t with the model's df.
local function draw_logp(m, p, ys)
  local sig = p.noise or m.noise_sigma
  local log_sig = p.noise and p.noise:log() or math.log(sig)
  if m.df then
    local r2 = ((p.f - ys) / sig):square() / m.df
    return r2:log1p() * (-(m.df + 1) / 2) - log_sig + bbb.metrics.student_t_lognorm(m.df)
  end
  if p.noise then return (p.f - ys):square() / (p.noise:square() * -2) - log_sig - 0.5 * LOG_2PI end
  return (p.f - ys):square() * (-0.5 / sig ^ 2) - (0.5 * LOG_2PI + log_sig)
end

--- score(model, part, samples [, seed]) -> {rmse, ll, crps, cover50, cover90, cover95, ...} or
-- {accuracy, ll, ece}: ll is the mean test log-likelihood per row (for
-- regression, of the MC mixture of the draws' noise densities, in the
-- target's units); crps, of the moment-matched Gaussian, for Gaussian noise
-- only (crps_mc scores any predictive).
function M.score(m, part, S, seed)
  local p = seed and M.seeded(m, seed, M.predict, m, part.x, S) or M.predict(m, part.x, S)
  if m.task == "regression" then
    local y = part.y:reshape(-1)
    local err = p.mean - y
    local res = { rmse = math.sqrt(err:square():mean():item()),
                  crps = not m.df and bbb.metrics.crps_gaussian(p.mean, p.std, y) or nil }
    local mean_scale = p.scale:mean():item()   -- the widths: of the same intervals coverage counts
    for _, lv in ipairs(M.LEVELS) do res["width" .. math.floor(lv * 100)] = 2 * M.multiplier(m, lv) * mean_scale end
    local logp = draw_logp(m, p, M.targets(m, y):reshape(1, -1))
    local ll = logp:logsumexp(1) - math.log(logp:size(1)) - math.log(m.prep.y_std)
    res.ll = ll:mean():item()
    local z = err:abs() / p.scale
    for _, lv in ipairs(M.LEVELS) do
      res["cover" .. math.floor(lv * 100)] = z:lt(M.multiplier(m, lv)):mean():item()
      local q = m.conformal and m.conformal[tostring(lv)]
      if q then res["conformal" .. math.floor(lv * 100)] = z:lt(q * (1 + 1e-6)):mean():item() end
    end
    return res, p
  end
  local probs = p.probs
  return { accuracy = bbb.metrics.accuracy(probs, part.y), ll = -bbb.metrics.nll(probs, part.y),
           ece = bbb.metrics.ece(probs, part.y), brier = bbb.metrics.brier(probs, part.y) }, p
end

--- crps_mc(model, p, y [, seed]) -> the CRPS of a regression predictive p
-- (from predict) as the MC mixture it is, not its moment-matched Gaussian:
-- from noisy draws of y, at least 100 per row (each net draw repeated), as
-- few draws inflate the score. Kept out of score, which training calls
-- every epoch, for its cost.
function M.crps_mc(m, p, y, seed)
  local noise = p.noise or bbb.full(p.f:size(), m.noise_sigma)
  local fs, ns = {}, {}
  for r = 1, math.ceil(100 / p.f:size(1)) do fs[r], ns[r] = p.f, noise end
  fs, ns = bbb.cat(fs, 1), bbb.cat(ns, 1)
  local g = bbb.Generator(seed or 1)
  local eps = bbb.randn(fs:size(), 0, 1, g)
  if m.df then   -- a t draw: a normal over sqrt(chi-square / df), the chi-square a sum of df squared normals
    local chi2 = bbb.randn({ m.df, fs:numel() }, 0, 1, g):square():sum(1):reshape(fs:size())
    eps = eps / (chi2 / m.df):sqrt()
  end
  return bbb.metrics.crps_samples((fs + ns * eps) * m.prep.y_std + m.prep.y_mean, y:reshape(-1))
end

--- conformal(model, part, samples) -> {["0.5"] = q, ["0.9"] = q, ["0.95"] = q}:
-- split-conformal multipliers of the predictive std from held-out rows.
-- The residuals |y - mean| / std of the n calibration rows are sorted and the
-- ceil((n + 1) level)-th taken, so mean +- q std covers a new row drawn like
-- them with probability at least level, whatever the model got wrong. A
-- level that needs more rows than n has no multiplier.
function M.conformal(m, part, S)
  local p = M.predict(m, part.x, S)
  local r = ((p.mean - part.y:reshape(-1)):abs() / p.scale):totable()
  table.sort(r)
  local q = {}
  for _, lv in ipairs(M.LEVELS) do
    local k = math.ceil((#r + 1) * lv)
    q[tostring(lv)] = r[k]
  end
  return q
end

--- fit_temperature(model, part, samples): the temperature T that makes the
-- classifier's predictive probabilities p^(1/T) (renormalised) best on the
-- held-out rows (bbb.calibration); kept in the model and its checkpoint.
-- -> T, info (bbb.calibration's: errors, n, floor, bound).
function M.fit_temperature(m, part, S)
  m.temperature = nil
  local p = M.predict(m, part.x, S)
  local T, _, info = bbb.calibration.fit_temperature(p.probs:clamp(1e-12, 1):log(), part.y)
  m.temperature = T
  return T, info
end

local function clone_state(m, elbo)
  local sd = {}
  for k, v in pairs(m.net:state_dict()) do sd[k] = v:clone() end
  return { sd = sd, sigma = (elbo.likelihood == "gaussian" or elbo.likelihood == "student-t") and elbo:sigma() or 1 }
end

--- train(model, tr, va, {epochs = 1000, batch = 32, lr = 0.01, samples = 1,
--        patience = 100, weight_decay = 0, val_samples = 20, generator, quiet,
--        every = 0 (print every n epochs), kl_weight = "uniform" (each
--        minibatch's complexity weight, as bbb.elbo.ELBO takes it: "uniform"
--        gives the ELBO, a number below 1 / batches a tempered posterior)})
-- -> {best_epoch, epochs, best_ll, status, signal (when status is "interrupted")}
-- tr and va hold raw rows. Trains through bbb.train.fit and keeps the
-- weights of the epoch with the best validation log-likelihood. An
-- ensemble's members train one after another, each stopping on its own;
-- its best_epoch is their median, best_ll the ensemble's on va.
function M.train(m, tr, va, o)
  if m.kind == "ensemble" then return M.train_ensemble(m, tr, va, o) end
  return M.train_one(m, tr, va, o)
end

-- The seed of one member's generator, drawn from the run's.
local function member_seed(g)
  return math.floor(bbb.rand({ 1 }, 0, 1, g):item() * 2 ^ 31)
end

-- o without what cannot leave the process (the generator), as JSON.
local function portable(o)
  local out = {}
  for k, v in pairs(o) do
    if type(v) == "number" or type(v) == "string" or type(v) == "boolean" then out[k] = v end
  end
  return out
end

-- x as a checkpoint holds it (finite values only): its missing cells as 0,
-- and a mask of them (nil when none is missing); with_missing undoes it.
local function finite_part(x)
  local rows, any = x:totable(), false
  local mask = {}
  for i, r in ipairs(rows) do
    mask[i] = {}
    for j, v in ipairs(r) do
      if v ~= v then r[j], mask[i][j], any = 0, 1, true else mask[i][j] = 0 end
    end
  end
  if not any then return x, nil end
  return bbb.tensor(rows), bbb.tensor(mask)
end

local function with_missing(x, mask)
  if not mask then return x end
  local rows, m = x:totable(), mask:totable()
  for i, r in ipairs(rows) do
    for j in ipairs(r) do if m[i][j] == 1 then r[j] = 0 / 0 end end
  end
  return bbb.tensor(rows)
end

-- Trains the members in o.jobs processes at once: the model and the rows
-- go to a temporary folder, each worker (bbblua -e, member_job) trains one
-- member there and writes its weights back. -> each member's
-- {sigma, best_epoch, epochs}, its weights loaded into m.members.
local function train_members_apart(m, tr, va, o, seeds)
  local sys = require "bbb.app.sys"
  -- a fresh folder only this user can enter, its files readable by no one else
  local dir = assert(sys.mkdtemp("bbb-ensemble-"))
  local files = { dir .. "/model.ckpt", dir .. "/rows.ckpt" }
  local function clean()
    for _, f in ipairs(files) do os.remove(f) end
    os.remove(dir)
  end
  local mask = sys.umask(tonumber("077", 8))
  local ok, res = pcall(function()
    M.save(files[1], m)
    local opts = portable(o)
    opts.threads = math.max(1, bbb.get_num_threads() // o.jobs)
    local rows = { tr_y = tr.y, va_y = va and va.y }
    rows.tr_x, rows.tr_missing = finite_part(tr.x)
    if va then rows.va_x, rows.va_missing = finite_part(va.x) end
    bbb.checkpoint.write(files[2], rows, { options = opts, seeds = seeds })
    local tasks = {}
    for i = 1, #m.members do
      tasks[i] = { stdout = "/dev/null", argv = sys.bbblua_argv("-e",
        ("require('bbb.app.tabular').member_job(%q, %d, %d)"):format(dir, i, sys.pid())) }
      files[#files + 1] = ("%s/member%d.ckpt"):format(dir, i)
    end
    local ran = require("bbb.app.jobs").run(tasks, { jobs = o.jobs, on_stop = clean })
    local out = {}
    for i, r in ipairs(ran) do
      if not r.ok then error(("ensemble member %d: its worker ended with %s %s"):format(i, r.how, tostring(r.code)), 0) end
      local sd, meta = bbb.checkpoint.read(files[2 + i])
      m.members[i]:load_state_dict(sd)
      out[i] = meta
    end
    return out
  end)
  sys.umask(mask)
  clean()
  if not ok then error(res, 0) end
  return res
end

-- Removes what train_members_apart put in dir and dir itself: a worker's
-- task when the parent died without cleaning up (SIGKILL leaves it no say).
local function remove_job_folder(dir, members)
  os.remove(dir .. "/model.ckpt")
  os.remove(dir .. "/rows.ckpt")
  for k = 1, members do os.remove(("%s/member%d.ckpt"):format(dir, k)) end
  os.remove(dir)
end

--- member_job(folder, i, parent): trains member i of the ensemble that
-- train_ensemble left in folder and writes its weights there; what each
-- worker process runs. Exits the process: 0 when done, 1 on an error,
-- 128 + the signal when stopped. parent is the process that started it:
-- once that is gone (the worker gets SIGTERM then) the worker removes the
-- folder, so no rows are left behind.
function M.member_job(dir, i, parent)
  local sys = require "bbb.app.sys"
  sys.umask(tonumber("077", 8))
  local members = 0
  local function orphan() return parent ~= nil and sys.ppid() ~= parent end
  local ok, err = pcall(function()
    local m = M.load(dir .. "/model.ckpt")
    local t, meta = bbb.checkpoint.read(dir .. "/rows.ckpt")
    members = #meta.seeds
    local o = meta.options
    for k, v in pairs(o) do o[k] = math.tointeger(v) or v end   -- JSON gives 32 back as 32.0
    o.progress, o.every = "off", 0
    bbb.set_num_threads(o.threads)
    o.generator = bbb.Generator(meta.seeds[i])
    local tr = { x = with_missing(t.tr_x, t.tr_missing), y = t.tr_y, n = t.tr_x:size(1) }
    local va = t.va_x and { x = with_missing(t.va_x, t.va_missing), y = t.va_y, n = t.va_x:size(1) }
    local one = member(m, i)
    if orphan() then return "orphan" end
    local info = M.train_one(one, tr, va, o)
    if info.status == "interrupted" then return info.signal or 2 end
    bbb.checkpoint.write(("%s/member%d.ckpt"):format(dir, i), one.net:state_dict(),
      { sigma = one.noise_sigma, best_epoch = info.best_epoch, epochs = info.epochs })
  end)
  if orphan() then
    remove_job_folder(dir, members)
    os.exit(128 + 15)
  end
  if not ok then
    io.stderr:write(("ensemble member %d: %s\n"):format(i, tostring(err)))
    os.exit(1)
  end
  if err ~= nil then os.exit(128 + err) end
  os.exit(0)
end

-- Each member trains with a generator of its own, seeded from the run's up
-- front: the members come out the same one after another (o.jobs 1) as in
-- o.jobs processes at once.
function M.train_ensemble(m, tr, va, o)
  local seeds = {}
  for i = 1, #m.members do seeds[i] = member_seed(o.generator or bbb.Generator(1)) end
  local apart = (o.jobs or 1) > 1 and train_members_apart(m, tr, va, o, seeds)
  local epochs, total = {}, 0
  for i = 1, #m.members do
    local info = apart and apart[i]
    if not info then
      local one, oi = member(m, i), portable(o)
      oi.generator = bbb.Generator(seeds[i])
      info = M.train_one(one, tr, va, oi)
      if info.status == "interrupted" then return info end
      info.sigma = one.noise_sigma
    end
    m.member_sigma[i], epochs[i], total = info.sigma, info.best_epoch, total + info.epochs
  end
  table.sort(epochs)
  local info = { best_epoch = epochs[(#epochs + 1) // 2], epochs = total, status = "done", best_ll = -math.huge }
  if va then info.best_ll = bbb.no_grad(function() return M.score(m, va).ll end) end
  return info
end

function M.train_one(m, tr, va, o)
  local x, y = M.inputs(m, tr.x), M.targets(m, tr.y)
  local train_set = { x = x, y = y, n = tr.n }
  local reg = m.task == "regression"
  local n_batches = bbb.data.num_batches(tr.n, o.batch or 32)
  local hetero = m.noise == "hetero"
  local elbo = bbb.elbo.ELBO { n_data = tr.n, batch_size = o.batch or 32,
    likelihood = hetero and "heteroscedastic" or m.df and "student-t" or reg and "gaussian" or "categorical", df = m.df,
    learn_sigma = reg and not hetero, sigma = hetero and M.HETERO_FLOOR or 0.5,
    samples = m.kind == "bbb" and (o.samples or 1) or 1,
    kl_weight = o.kl_weight or "uniform" }
  local params = m.net:named_parameters()
  for _, p in ipairs(elbo:named_parameters()) do params[#params + 1] = p end
  local opt = bbb.optim.Adam(params, { lr = o.lr or 0.01, weight_decay = o.weight_decay or 0 })
  local best = { ll = -math.huge, epoch = 0 }
  local every = o.every or 0
  -- the validation score is noisy (MC draws, few rows): the choice of epoch
  -- and the patience go by its moving average, and never before min_epochs
  local smooth, min_epochs = nil, o.min_epochs or 0
  local res = bbb.train.fit {
    model = m.net, optimizer = opt, elbo = elbo, data = train_set, batch_size = o.batch or 32,
    epochs = o.epochs or 1000, generator = o.generator, quiet = true, progress = o.progress or "off",
    on_epoch = function(rec, ctx)
      if not va then
        best.state, best.epoch = nil, ctx.epoch
        return
      end
      m.noise_sigma = reg and elbo:sigma() or 1
      local s = bbb.no_grad(function() return M.score(m, va, o.val_samples or 20) end)
      rec.val_ll = s.ll
      smooth = smooth and (0.8 * smooth + 0.2 * s.ll) or s.ll
      if smooth > best.ll then best.ll, best.epoch, best.state = smooth, ctx.epoch, clone_state(m, elbo) end
      if every > 0 and ctx.epoch % every == 0 then
        print(("  epoch %4d  nll/ex %.4f  val ll %.4f  %s %.4f  best %.4f (epoch %d)"):format(ctx.epoch,
          rec.nll_per_example, s.ll, reg and "val rmse" or "val acc", reg and s.rmse or s.accuracy, best.ll, best.epoch))
        io.stdout:flush()
      end
      if ctx.epoch >= min_epochs and ctx.epoch - best.epoch >= (o.patience or 100) then return "stop" end
    end,
  }
  if best.state then
    m.net:load_state_dict(best.state.sd)
    m.noise_sigma = best.state.sigma
  else
    m.noise_sigma = reg and elbo:sigma() or 1
  end
  m.net:evaluate()
  return { best_epoch = best.epoch, epochs = #res.history, best_ll = best.ll, status = res.status, signal = res.signal }
end

--- save(path, model [, extra]) / load(path) -> model: one checkpoint with the
-- net and its preprocessing (in the checkpoint's state.tabular).
function M.save(path, m, extra)
  local meta = { kind = m.kind, task = m.task, prep = m.prep, noise_sigma = m.noise_sigma, noise = m.noise, df = m.df, extra = extra,
                 member_sigma = m.member_sigma,
                 temperature = m.temperature, conformal = m.conformal }
  bbb.save(path, { model = m.net, state = { tabular = meta } })
end

function M.load(path)
  local ok, net, info = pcall(bbb.load, path)
  if not ok then error((tostring(net):gsub("^[^\n]-:%d+: ", "")), 0) end
  local t = info.meta and info.meta.state and info.meta.state.tabular
  if type(t) ~= "table" or type(t.prep) ~= "table" then
    error(("%s is not a model saved by scripts/fit.lua (no preprocessing in it)"):format(path), 0)
  end
  local m = { net = net, kind = t.kind, task = t.task, prep = t.prep, noise_sigma = t.noise_sigma, noise = t.noise, df = t.df,
              extra = t.extra, member_sigma = t.member_sigma, members = t.kind == "ensemble" and net.layers or nil,
              temperature = t.temperature, conformal = t.conformal }
  local ok, err = pcall(M.check_saved, m)
  if not ok then error(("%s: %s"):format(path, err), 0) end
  return m
end

local function positive(v) return type(v) == "number" and v > 0 and v < math.huge end
local function finite(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge end

local function strings(list, what)
  if type(list) ~= "table" or #list == 0 then error(("the saved %s are not a list"):format(what), 0) end
  for i, v in ipairs(list) do
    if type(v) ~= "string" then error(("the saved %s: entry %d is not a name"):format(what, i), 0) end
  end
end

--- check_impute(prep) -> the number of indicator features: the saved
-- imputation (absent in models saved before it) is one finite median per
-- feature and indicators naming features.
function M.check_impute(p)
  local imp = p.impute
  if imp == nil then return 0 end
  if type(imp) ~= "table" or type(imp.median) ~= "table" or #imp.median ~= #p.feature_names
      or type(imp.indicators) ~= "table" then
    error("the saved imputation does not have one median per feature", 0)
  end
  for j, v in ipairs(imp.median) do
    if not finite(v) then error(("the saved median of feature %d is not a finite number (%s)"):format(j, tostring(v)), 0) end
  end
  for _, j in ipairs(imp.indicators) do
    if math.type(j) ~= "integer" and not (type(j) == "number" and j == math.floor(j)) or j < 1 or j > #p.feature_names then
      error(("the saved imputation names feature %s, which the model does not have"):format(tostring(j)), 0)
    end
  end
  return #imp.indicators
end

--- check_saved(model): what a checkpoint says of its preprocessing, checked
-- as user input is: a file may be edited or damaged, and a zero scale or a
-- negative noise would turn every prediction into NaN or nonsense.
function M.check_saved(m)
  local p = m.prep
  if m.task ~= "regression" and m.task ~= "classification" then error("the saved task is not regression or classification", 0) end
  if m.kind ~= "bbb" and m.kind ~= "mlp" and m.kind ~= "dropout" and m.kind ~= "ensemble" then
    error("the saved model kind is not bbb, mlp, dropout or ensemble", 0)
  end
  if m.kind == "ensemble" then
    if type(m.members) ~= "table" or #m.members < 1 or type(m.member_sigma) ~= "table" or #m.member_sigma ~= #m.members then
      error("the saved ensemble does not have one noise sd per member", 0)
    end
    for i, v in ipairs(m.member_sigma) do
      if not positive(v) then error(("the saved noise sd of member %d is not a positive number (%s)"):format(i, tostring(v)), 0) end
    end
  end
  strings(p.feature_names, "feature names")
  local n_ind = M.check_impute(p)
  if type(p.x_mean) ~= "table" or type(p.x_std) ~= "table" or #p.x_mean ~= #p.feature_names + n_ind
      or #p.x_std ~= #p.x_mean then
    error(("the saved input scaling does not have one mean and one scale for each of the %d features")
      :format(#p.feature_names + n_ind), 0)
  end
  for j = 1, #p.x_mean do
    if not finite(p.x_mean[j]) or not positive(p.x_std[j]) then
      error(("the saved scaling of feature '%s' is not a finite mean and a positive scale (%s, %s)")
        :format(p.feature_names[j] or ("indicator " .. j), tostring(p.x_mean[j]), tostring(p.x_std[j])), 0)
    end
  end
  if m.temperature ~= nil and not positive(m.temperature) then
    error(("the saved temperature is not a positive number (%s)"):format(tostring(m.temperature)), 0)
  end
  if m.conformal ~= nil then
    if type(m.conformal) ~= "table" then error("the saved conformal multipliers are not a table", 0) end
    for k, v in pairs(m.conformal) do
      if not (M.LEVELS_BY_NAME[k] and positive(v)) then
        error(("the saved conformal multiplier %s = %s is not a level's positive number"):format(tostring(k), tostring(v)), 0)
      end
    end
  end
  if type(p.columns) ~= "table" or type(p.target) ~= "table" or type(p.target.name) ~= "string" then
    error("the saved columns or target are missing", 0)
  end
  if m.task == "regression" then
    if p.y_offset ~= nil and not finite(p.y_offset) then
      error(("the saved target offset is not a finite number (%s)"):format(tostring(p.y_offset)), 0)
    end
    if not finite(p.y_mean) or not positive(p.y_std) then
      error(("the saved target scaling is not a finite mean and a positive scale (%s, %s)")
        :format(tostring(p.y_mean), tostring(p.y_std)), 0)
    end
    if m.noise ~= nil and m.noise ~= "homo" and m.noise ~= "hetero" then
      error(("the saved noise model is not homo or hetero (%s)"):format(tostring(m.noise)), 0)
    end
    if not positive(m.noise_sigma) then
      error(("the saved noise sigma is not a positive number (%s)"):format(tostring(m.noise_sigma)), 0)
    end
    if m.df ~= nil and not (type(m.df) == "number" and m.df == math.floor(m.df) and m.df >= M.DF_MIN and m.df <= M.DF_MAX
        and m.noise ~= "hetero") then
      error(("the saved Student-t degrees of freedom are not a whole number from %d to %d with one noise sd (%s)")
        :format(M.DF_MIN, M.DF_MAX, tostring(m.df)), 0)
    end
    m.df = m.df and math.tointeger(m.df)
  else
    strings(p.classes, "classes")
  end
end

--- read_for(model, spec, opts) -> the rows of a file as the model reads them:
-- its columns (a missing one is an error naming it), its levels (an unseen
-- category is an error naming it). The target is read when present.
function M.read_for(m, spec, o)
  local levels = {}
  for _, c in ipairs(m.prep.columns) do if c.categorical then levels[c.name] = c.levels end end
  local tname = m.prep.target.name
  if m.prep.target.categorical then levels[tname] = m.prep.classes end
  local header = M.header(spec, o.delimiter)
  local have, want, ignore = {}, {}, {}
  for _, h in ipairs(header) do have[h] = true end
  for _, c in ipairs(m.prep.columns) do
    want[c.name] = true
    if not have[c.name] then error(("column '%s' (used by the model) is not in %s"):format(c.name, spec), 0) end
  end
  for _, h in ipairs(header) do if not want[h] and h ~= tname then ignore[#ignore + 1] = h end end
  if not have[tname] then levels[tname] = nil end
  local ds = M.read(spec, { target = have[tname] and tname or nil, ignore = ignore, levels = levels,
    delimiter = o.delimiter, drop_missing = o.drop_missing, keep_missing = o.keep_missing, unseen = o.unseen,
    task = m.task })
  if m.task == "regression" and ds.y then M.centre_target(ds, m.prep.y_offset or 0) end
  if m.task == "regression" and ds.target and ds.target.categorical then
    error(("column '%s' holds text (%s, ...), and the model predicts numbers"):format(tname,
      tostring(ds.target.levels and ds.target.levels[1] or ds.classes and ds.classes[1])), 0)
  end
  ds.ignored = ignore
  return M.in_model_order(m, ds)
end

--- in_model_order(model, ds) -> ds with its feature columns in the order
-- the model was trained on, matched by name (a file may hold the columns in
-- any order); an error names a feature the model needs that ds lacks.
function M.in_model_order(m, ds)
  local at, idx, same = {}, {}, true
  for j, name in ipairs(ds.feature_names) do at[name] = j end
  local kind = {}
  for _, c in ipairs(ds.columns) do kind[c.name] = c end
  for j, name in ipairs(m.prep.feature_names) do
    if not at[name] then
      local col = name:match("^(.-)=") or name
      local c = kind[col]
      if c and c.categorical and not name:find("=", 1, true) then
        error(("column '%s' holds text now (%s, ...); the model was trained on its numbers"):format(col,
          tostring(c.levels and c.levels[1])), 0)
      elseif c and not c.categorical and name:find("=", 1, true) then
        error(("column '%s' holds numbers now; the model was trained on its categories"):format(col), 0)
      end
      error(("feature '%s' (used by the model) is not in the rows"):format(name), 0)
    end
    idx[j] = at[name]
    same = same and idx[j] == j
  end
  if same and #idx == #ds.feature_names then return ds end
  ds.x = ds.x:t():index_select(core.tensor(idx)):t():clone()
  ds.feature_names = m.prep.feature_names
  return ds
end

--- header(spec [, delimiter]) -> the column names of a CSV file or an R data set.
function M.header(spec, delimiter)
  local folder, name = spec:match("^(.+):([%w%._]+)$")
  local ds
  if folder and not exists(spec) then ds = quiet(bbb.data.load_r, folder, name, { drop_missing = true })
  else
    check_regular(spec)
    local f = io.open(spec, "rb")
    if not f then error(("cannot open %s"):format(spec), 0) end
    local line = f:read("L")
    f:close()
    -- the header line read as its own data row: its names, whatever the
    -- first row of data holds (an incomplete one is no reason to fail here)
    ds = quiet(bbb.data.read_csv, (line or "") .. (line and not line:find("\n$") and "\n" or "") .. (line or ""),
      { text = true, delimiter = delimiter })
  end
  local names = {}
  for j, c in ipairs(ds.columns) do names[j] = c.name end
  return names
end

--- mean_se(list) -> mean, standard error of the mean (sd / sqrt(n), sd with n - 1).
function M.mean_se(xs)
  local n, sum, sq = #xs, 0, 0
  for _, x in ipairs(xs) do sum = sum + x end
  local mean = sum / n
  for _, x in ipairs(xs) do sq = sq + (x - mean) ^ 2 end
  return mean, n > 1 and math.sqrt(sq / (n - 1) / n) or 0
end

--- bench_lines(rows, published) -> the lines of a benchmark table: each
-- set's rows (mean +- standard error over the splits), then its published
-- {rmse, se, ll, se} rows.
function M.bench_lines(rows, published)
  local lines, seen = {}, {}
  for _, r in ipairs(rows) do
    if not seen[r.set] then
      seen[r.set] = true
      local reg = r.rmse ~= nil
      lines[#lines + 1] = reg and ("%-12s %-20s %15s %16s %8s %7s %6s"):format("data", "method", "test RMSE", "test LL",
        "cover95", "epochs", "s") or ("%-12s %-20s %15s %16s %15s %7s %6s"):format("data", "method", "accuracy %",
        "test LL", "ECE", "epochs", "s")
      for _, q in ipairs(rows) do
        if q.set == r.set and reg then
          lines[#lines + 1] = ("%-12s %-20s %7.2f +- %4.2f %8.2f +- %4.2f %7.1f%% %7.0f %6.0f"):format(q.set,
            "ours " .. q.method, q.rmse, q.rmse_se, q.ll, q.ll_se, 100 * q.cover95, q.best_epoch, q.seconds)
        elseif q.set == r.set then
          lines[#lines + 1] = ("%-12s %-20s %7.2f +- %4.2f %8.3f +- %4.3f %7.3f +- %4.3f %7.0f %6.0f"):format(q.set,
            "ours " .. q.method, 100 * q.accuracy, 100 * q.accuracy_se, q.ll, q.ll_se, q.ece, q.ece_se, q.best_epoch, q.seconds)
        end
      end
      for _, name in ipairs { "VI", "PBP", "MC dropout", "deep ensembles" } do
        local p = (published[r.set] or {})[name]
        if p then lines[#lines + 1] = ("%-12s %-20s %7.2f +- %4.2f %8.2f +- %4.2f"):format(r.set, "pub. " .. name, table.unpack(p)) end
      end
    end
  end
  return lines
end

local function csv_field(s)
  s = tostring(s)
  if s:find('[,"\r\n]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- The shortest text that reads back as v: every digit the number holds.
local function num(v)
  for digits = 9, 17 do
    local text = ("%." .. digits .. "g"):format(v)
    if tonumber(text) == v then return text end
  end
  return ("%.17g"):format(v)
end

--- kept_columns(spec, names, delimiter) -> {{name =, values = {text per row}}}:
-- columns of the file as written (numbers too), a missing cell as "", to
-- copy beside the predictions so each row can be joined back.
function M.kept_columns(spec, names, delimiter)
  local header, wanted = M.header(spec, delimiter), {}
  for _, n in ipairs(names) do wanted[n] = true end
  local ignore, have = {}, {}
  for _, h in ipairs(header) do
    have[h] = true
    if not wanted[h] then ignore[#ignore + 1] = h end
  end
  for _, n in ipairs(names) do
    if not have[n] then error(("column '%s' is not in %s"):format(n, spec), 0) end
  end
  local folder, name = spec:match("^(.+):([%w%._]+)$")
  local ds
  if folder and not exists(spec) then
    ds = quiet(bbb.data.load_r, folder, name, { ignore = ignore, keep_missing = true })
  else
    -- ids are as many as the rows: no cap on their distinct values
    ds = quiet(bbb.data.read_csv, spec, { ignore = ignore, categorical = names, keep_missing = true, delimiter = delimiter,
      max_levels = 1000000 })
  end
  local x, out = ds.x:totable(), {}
  for _, c in ipairs(ds.columns) do
    local values = {}
    for i = 1, ds.n do
      if c.categorical then
        local v = ""
        for k = 1, c.width do if x[i][c.first + k - 1] == 1 then v = c.levels[k] end end
        values[i] = v
      else
        local v = x[i][c.first]
        values[i] = v == v and v or ""
      end
    end
    out[#out + 1] = { name = c.name, values = values }
  end
  return out
end

--- rows(model, pred [, observed [, kept]]) -> the lines of a predictions CSV,
-- the kept columns (kept_columns) first.
function M.rows(m, p, observed, kept)
  local head, cols = {}, {}
  for _, k in ipairs(kept or {}) do head[#head + 1], cols[#cols + 1] = k.name, k.values end
  local obs = observed and observed:reshape(-1):totable()
  if m.task == "regression" then
    local mean, std, scale = p.mean:totable(), p.std:totable(), p.scale:totable()
    local off = m.prep.y_offset or 0   -- added in double: the printed numbers keep every digit
    for i = 1, #mean do mean[i] = mean[i] + off end
    if obs then for i = 1, #obs do obs[i] = obs[i] + off end end
    for _, h in ipairs { "mean", "std", "epistemic_std", "aleatoric_std" } do head[#head + 1] = h end
    for _, c in ipairs { mean, std, p.epistemic:totable(), p.aleatoric:totable() } do cols[#cols + 1] = c end
    for _, lv in ipairs(M.LEVELS) do
      local k = math.floor(lv * 100)
      head[#head + 1], head[#head + 2] = "lo" .. k, "hi" .. k
      local lo, hi = {}, {}
      local z = M.multiplier(m, lv)
      for i = 1, #mean do lo[i], hi[i] = mean[i] - z * scale[i], mean[i] + z * scale[i] end
      cols[#cols + 1], cols[#cols + 2] = lo, hi
    end
    -- the split-conformal intervals, when fit.lua --conformal calibrated them
    for _, lv in ipairs(M.LEVELS) do
      local q = m.conformal and m.conformal[tostring(lv)]
      if q then
        local k = math.floor(lv * 100)
        head[#head + 1], head[#head + 2] = "conformal_lo" .. k, "conformal_hi" .. k
        local lo, hi = {}, {}
        for i = 1, #mean do lo[i], hi[i] = mean[i] - q * scale[i], mean[i] + q * scale[i] end
        cols[#cols + 1], cols[#cols + 2] = lo, hi
      end
    end
  else
    head[#head + 1] = "predicted"
    local probs = p.probs:totable()
    local pred = p.probs:argmax(2):totable()
    local names = {}
    for i, k in ipairs(pred) do names[i] = m.prep.classes[k] end
    cols[#cols + 1] = names
    for c, name in ipairs(m.prep.classes) do
      head[#head + 1] = "p_" .. name
      local col = {}
      for i = 1, #probs do col[i] = probs[i][c] end
      cols[#cols + 1] = col
    end
    head[#head + 1], head[#head + 2] = "entropy", "mutual_information"
    cols[#cols + 1], cols[#cols + 2] = p.entropy:totable(), p.mutual_information:totable()
  end
  if obs then
    head[#head + 1] = "observed"
    if m.task ~= "regression" then
      local named = {}
      for i, k in ipairs(obs) do named[i] = m.prep.classes[k] end
      obs = named
    end
    cols[#cols + 1] = obs
  end
  local lines = {}
  for j, h in ipairs(head) do head[j] = csv_field(h) end
  lines[1] = table.concat(head, ",")
  for i = 1, #cols[1] do
    local r = {}
    for j, col in ipairs(cols) do r[j] = type(col[i]) == "number" and num(col[i]) or csv_field(col[i]) end
    lines[i + 1] = table.concat(r, ",")
  end
  return lines
end

--- plot(model, pred, observed, file, title) -> file: predicted against observed
-- with 95% interval bars (regression), or the reliability diagram (classification).
function M.plot(m, p, observed, file, title)
  if m.task == "regression" then
    local y, mu, sd = observed:reshape(-1):totable(), p.mean:totable(), p.scale:totable()
    local lo, hi = {}, {}
    local a, b, z = math.huge, -math.huge, M.multiplier(m, 0.95)
    for i = 1, #y do
      y[i], mu[i] = y[i] + (m.prep.y_offset or 0), mu[i] + (m.prep.y_offset or 0)
      lo[i], hi[i] = mu[i] - z * sd[i], mu[i] + z * sd[i]
      a, b = math.min(a, y[i], lo[i]), math.max(b, y[i], hi[i])
    end
    return require("bbb.app.plot").lines { file = file, title = title, xlabel = "observed", ylabel = "predicted (mean, 95% interval)",
      series = { { x = { a, b }, y = { a, b }, title = "predicted = observed", color = "#888888", width = 1, dash = 2 },
                 { x = y, y = mu, lo = lo, hi = hi, style = "errorbars", title = "prediction", color = "#1f77b4",
                   width = 1, pointsize = 0.6, pointtype = 7 } } }
  end
  local bins = bbb.metrics.reliability(p.probs, observed, 10)
  local xs, ys = {}, {}
  for _, bin in ipairs(bins) do
    if bin.count > 0 then xs[#xs + 1], ys[#ys + 1] = bin.confidence, bin.accuracy end
  end
  return require("bbb.app.plot").lines { file = file, title = title, xlabel = "confidence (top class probability)", ylabel = "accuracy",
    xrange = { 0, 1 }, yrange = { 0, 1 },
    series = { { x = { 0, 1 }, y = { 0, 1 }, title = "perfect calibration", color = "#888888", width = 1, dash = 2 },
               { x = xs, y = ys, style = "linespoints", title = "model (10 bins)", color = "#d62728" } } }
end

return M

--- bbb.app.tabular.model: the model bundle {net, kind, task, prep} and its
-- predictive distribution. Building a net (Bayes by Backprop, a plain or
-- MC-dropout MLP, a deep ensemble) around the preprocessing of
-- bbb.app.tabular.data, predicting with the epistemic and aleatoric parts
-- apart, and the checkpoint: saving, loading, and checking what a loaded
-- file claims. Training (bbb.app.tabular.train) and scoring
-- (bbb.app.tabular.score) build on it.
local bbb = require "bbb"
local data = require "bbb.app.tabular.data"

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

--- new(ds, train_x, train_y, kind, opts) -> a model bundle {net, kind, task, prep}:
-- prep, the preprocessing: columns, levels, scaling statistics of the training rows.
function M.new(ds, train_x, train_y, kind, o)
  local task = ds.target.categorical and "classification" or "regression"
  local prep = { columns = ds.columns, feature_names = ds.feature_names, target = ds.target,
                 classes = ds.classes, task = task, y_offset = ds.y_offset }
  prep.impute = data.impute_stats(train_x)
  prep.x_mean, prep.x_std = data.scaler(data.impute(prep, train_x))
  if task == "regression" then
    local lo, hi = -(-train_y):max():item(), train_y:max():item()
    if lo == hi then
      error(("the target '%s' is %s in every training row: there is nothing to learn"):format(ds.target.name, ("%g"):format(lo)), 0)
    end
    local m, s = data.scaler(train_y)
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

--- inputs(model, x) / targets(model, y): the model's imputation and scaling applied.
function M.inputs(m, x) return data.scale(data.impute(m.prep, x), m.prep.x_mean, m.prep.x_std) end
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

return M

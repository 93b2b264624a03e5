--- bbb.app.tabular.score: how good a model's predictive distribution is,
-- and what is written of it. Scores (RMSE or accuracy, log-likelihood,
-- interval coverage, CRPS, ECE), the calibrations fitted on held-out rows
-- (split-conformal multipliers, a classifier's temperature), the
-- predictions CSV, the plots and the benchmark tables. It needs a model
-- (bbb.app.tabular.model) and no training, so training can score its
-- validation rows with it.
local bbb = require "bbb"
local model = require "bbb.app.tabular.model"

local M = {}

local LOG_2PI = math.log(2 * math.pi)

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
  local p = seed and model.seeded(m, seed, model.predict, m, part.x, S) or model.predict(m, part.x, S)
  if m.task == "regression" then
    local y = part.y:reshape(-1)
    local err = p.mean - y
    local res = { rmse = math.sqrt(err:square():mean():item()),
                  crps = not m.df and bbb.metrics.crps_gaussian(p.mean, p.std, y) or nil }
    local mean_scale = p.scale:mean():item()   -- the widths: of the same intervals coverage counts
    for _, lv in ipairs(model.LEVELS) do res["width" .. math.floor(lv * 100)] = 2 * model.multiplier(m, lv) * mean_scale end
    local logp = draw_logp(m, p, model.targets(m, y):reshape(1, -1))
    local ll = logp:logsumexp(1) - math.log(logp:size(1)) - math.log(m.prep.y_std)
    res.ll = ll:mean():item()
    local z = err:abs() / p.scale
    for _, lv in ipairs(model.LEVELS) do
      res["cover" .. math.floor(lv * 100)] = z:lt(model.multiplier(m, lv)):mean():item()
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
  local p = model.predict(m, part.x, S)
  local r = ((p.mean - part.y:reshape(-1)):abs() / p.scale):totable()
  table.sort(r)
  local q = {}
  for _, lv in ipairs(model.LEVELS) do
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
  local p = model.predict(m, part.x, S)
  local T, _, info = bbb.calibration.fit_temperature(p.probs:clamp(1e-12, 1):log(), part.y)
  m.temperature = T
  return T, info
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
    for _, lv in ipairs(model.LEVELS) do
      local k = math.floor(lv * 100)
      head[#head + 1], head[#head + 2] = "lo" .. k, "hi" .. k
      local lo, hi = {}, {}
      local z = model.multiplier(m, lv)
      for i = 1, #mean do lo[i], hi[i] = mean[i] - z * scale[i], mean[i] + z * scale[i] end
      cols[#cols + 1], cols[#cols + 2] = lo, hi
    end
    -- the split-conformal intervals, when fit.lua --conformal calibrated them
    for _, lv in ipairs(model.LEVELS) do
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
    local a, b, z = math.huge, -math.huge, model.multiplier(m, 0.95)
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

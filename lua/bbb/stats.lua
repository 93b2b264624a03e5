--- bbb.stats: is one method better than another on the same seeds, splits
-- or rows? A paired interval on the mean difference answers it, where two
-- means each with its own error bar do not: what the runs share (a hard
-- split, a lucky seed) cancels in the difference.
--
--   local d = bbb.stats.paired(bbb_ll, gp_ll)         -- one number per split, same splits
--   print(d.mean, d.lo, d.hi, d.verdict)             -- "above": a beats b on every plausible reading
--   bbb.stats.paired(a, b, { method = "corrected", n_train = 450, n_test = 50 })
local metrics = require "bbb.metrics"

local stats = {}

local METHODS = { t = true, bootstrap = true, corrected = true }
local BOOTSTRAP_DRAWS = 10000

-- A list of finite numbers, checked; what names the argument in errors.
local function numbers(v, what)
  if type(v) ~= "table" then error(("paired: %s must be a list of numbers, got %s"):format(what, type(v)), 3) end
  for i = 1, #v do
    local x = v[i]
    if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then
      error(("paired: %s[%d] is %s, not a finite number"):format(what, i, tostring(x)), 3)
    end
  end
  return v
end

local function check_options(o, n)
  local level = o.level or 0.95
  if type(level) ~= "number" or not (level > 0 and level < 1) then
    error(("paired: level must be in (0, 1), got %s"):format(tostring(level)), 3)
  end
  local method = o.method or "t"
  if not METHODS[method] then
    error(("paired: method must be t, bootstrap or corrected, got %s"):format(tostring(method)), 3)
  end
  if method == "corrected" then
    for _, k in ipairs { "n_train", "n_test" } do
      local v = o[k]
      if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) or v < 1 then
        error(("paired: method corrected needs %s, the rows each split trains or tests on, got %s")
          :format(k, tostring(v)), 3)
      end
    end
  end
  if n < 2 then error(("paired: need at least 2 pairs for an interval, got %d"):format(n), 3) end
  return level, method
end

-- Mean and sample variance (n - 1) of d.
local function mean_var(d)
  local n, sum = #d, 0
  for i = 1, n do sum = sum + d[i] end
  local mean, ss = sum / n, 0
  for i = 1, n do ss = ss + (d[i] - mean) ^ 2 end
  return mean, ss / (n - 1)
end

-- The percentile interval of the mean of d over resamples with
-- replacement, drawn from a generator seeded with `seed`: the same lists
-- give the same interval.
local function bootstrap(d, level, seed)
  local core = require "bbb.core"
  local n = #d
  local u = core.rand({ BOOTSTRAP_DRAWS, n }, 0, 1, core.Generator(seed)):totable()
  local means = {}
  for b = 1, BOOTSTRAP_DRAWS do
    local row, sum = u[b], 0
    for i = 1, n do sum = sum + d[math.min(n, 1 + math.floor(row[i] * n))] end
    means[b] = sum / n
  end
  table.sort(means)
  local tail = (1 - level) / 2
  local lo = means[math.max(1, math.floor(tail * BOOTSTRAP_DRAWS))]
  local hi = means[math.min(BOOTSTRAP_DRAWS, math.ceil((1 - tail) * BOOTSTRAP_DRAWS))]
  return lo, hi
end

--- paired(a, b [, {level = 0.95, method = "t"|"bootstrap"|"corrected",
-- n_train =, n_test =, seed = 1}]) -> {mean, lo, hi, verdict, n, method, level}:
-- the level interval of the mean of a[i] - b[i] over the pairs.
-- * "t": mean +- t_{n-1} sd / sqrt(n), the paired t interval.
-- * "bootstrap": the percentile interval of the mean over 10,000 resamples
--   of the pairs (seeded: the same lists give the same interval).
-- * "corrected": the corrected resampled t of Nadeau and Bengio (2003) for
--   n repeated random splits of one data set, each training on n_train rows
--   and testing on n_test: the variance sd^2 (1/n + n_test/n_train), since
--   splits that share rows give correlated differences the plain t ignores.
-- verdict: "above" when the interval lies above 0 (a's mean is larger),
-- "below" when it lies below, "tie" when it holds 0.
-- @raise paired: a and b hold 3 and 4 numbers: they must pair one to one
-- @usage
--   local d = bbb.stats.paired({ 3, 4, 5, 6 }, { 1, 2, 4, 4 })
--   assert(d.mean == 1.75 and d.verdict == "above")
function stats.paired(a, b, o)
  numbers(a, "a")
  numbers(b, "b")
  if #a ~= #b then
    error(("paired: a and b hold %d and %d numbers: they must pair one to one"):format(#a, #b), 2)
  end
  o = o or {}
  if type(o) ~= "table" then error(("paired: options must be a table, got %s"):format(type(o)), 2) end
  local level, method = check_options(o, #a)
  local d = {}
  for i = 1, #a do d[i] = a[i] - b[i] end
  local n = #d
  local mean, var = mean_var(d)
  local lo, hi
  if method == "bootstrap" then
    lo, hi = bootstrap(d, level, o.seed or 1)
  else
    local scale = method == "corrected" and (1 / n + o.n_test / o.n_train) or 1 / n
    local half = metrics.interval_multiplier(level, n - 1) * math.sqrt(var * scale)
    lo, hi = mean - half, mean + half
  end
  local verdict = lo > 0 and "above" or hi < 0 and "below" or "tie"
  return { mean = mean, lo = lo, hi = hi, verdict = verdict, n = n, method = method, level = level }
end

--- format(d [, digits = 3]) -> "0.052 [0.011, 0.093]": a paired result as a
-- table cell, the mean and its interval.
function stats.format(d, digits)
  local f = ("%%.%df"):format(digits or 3)
  return (f .. " [" .. f .. ", " .. f .. "]"):format(d.mean, d.lo, d.hi)
end

return stats

--- bbb.calibration: post-hoc calibration of a classifier's logits.
-- Temperature scaling (Guo et al. 2017): one number T > 0 divides every
-- logit; T is fitted on held-out rows to minimise the NLL of
-- softmax(logits / T), so the predicted class never changes, only how
-- sure the model says it is.
--
--   local T = bbb.calibration.fit_temperature(val_logits, val_labels)
--   local probs = bbb.calibration.apply(test_logits, T)
local core = require "bbb.core"

local calibration = {}

-- The search interval of log T: T from 1/100 to 100. The NLL is convex in
-- 1/T, so it has one minimum on the interval (or at its lower end when the
-- rows are separable: fit_temperature's floor is for that case).
local LOG_T_MIN, LOG_T_MAX = math.log(1e-2), math.log(1e2)
local TOL = 1e-7   -- on log T: far below any difference a probability shows

-- The logits as Lua rows and the labels as an array, checked.
local function check(logits, labels, what)
  if not core.is_tensor(logits) or logits:dim() ~= 2 then
    error(("%s: logits must be a (N, C) tensor, got %s"):format(what,
      core.is_tensor(logits) and table.concat(logits:size(), "x") or type(logits)), 3)
  end
  local n, c = logits:size(1), logits:size(2)
  if n == 0 or c < 2 then error(("%s: need rows and at least 2 classes, got %dx%d"):format(what, n, c), 3) end
  local rows = logits:detach():totable()
  for i = 1, n do
    for k = 1, c do
      local v = rows[i][k]
      if v ~= v or v == math.huge or v == -math.huge then
        error(("%s: logit (%d, %d) is %s"):format(what, i, k, tostring(v)), 3)
      end
    end
  end
  local y = core.is_tensor(labels) and labels:reshape(-1):totable() or labels
  if type(y) ~= "table" or #y ~= n then
    error(("%s: labels must be %d classes (a tensor or Lua array), got %s"):format(what, n,
      type(y) == "table" and tostring(#y) or type(y)), 3)
  end
  for i = 1, n do
    if math.tointeger(y[i]) == nil or y[i] < 1 or y[i] > c then
      error(("%s: label %d is %s, expected a class in 1..%d"):format(what, i, tostring(y[i]), c), 3)
    end
  end
  return rows, y
end

-- Mean NLL of softmax(z * beta) in double precision (beta = 1 / T).
local function mean_nll(rows, y, beta)
  local total = 0
  for i = 1, #rows do
    local z, top = rows[i], -math.huge
    for k = 1, #z do top = math.max(top, z[k] * beta) end
    local sum = 0
    for k = 1, #z do sum = sum + math.exp(z[k] * beta - top) end
    total = total + top + math.log(sum) - z[y[i]] * beta
  end
  return total / #rows
end

--- nll(logits, labels, T = 1) -> the mean negative log-likelihood (nats)
-- of softmax(logits / T) at the labels (classes 1..C).
function calibration.nll(logits, labels, T)
  T = T or 1
  if type(T) ~= "number" or not (T > 0 and T < math.huge) then
    error(("nll: T must be a positive number, got %s"):format(tostring(T)), 2)
  end
  local rows, y = check(logits, labels, "nll")
  return mean_nll(rows, y, 1 / T)
end

-- Mean over rows of 1 - max_k softmax(z * beta)_k: the error rate the
-- model claims on these rows. It falls as beta grows (T shrinks).
local function mean_doubt(rows, beta)
  local total = 0
  for i = 1, #rows do
    local z, top = rows[i], -math.huge
    for k = 1, #z do top = math.max(top, z[k] * beta) end
    local sum = 0
    for k = 1, #z do sum = sum + math.exp(z[k] * beta - top) end
    total = total + 1 - 1 / sum
  end
  return total / #rows
end

-- The smallest T at which the claimed error rate on the rows is still
-- `floor`, by bisection on log T (the claim rises with T); LOG_T_MIN when
-- even T = 1/100 claims more.
local function floor_log_t(rows, floor)
  local function doubt(log_t) return mean_doubt(rows, math.exp(-log_t)) end
  if doubt(LOG_T_MIN) >= floor then return LOG_T_MIN end
  if doubt(LOG_T_MAX) < floor then return LOG_T_MAX end
  local a, b = LOG_T_MIN, LOG_T_MAX
  while b - a > TOL do
    local mid = (a + b) / 2
    if doubt(mid) < floor then a = mid else b = mid end
  end
  return b
end

-- Golden-section search for the log T minimising f on [LOG_T_MIN, LOG_T_MAX].
local function argmin_log_t(f)
  local g = (math.sqrt(5) - 1) / 2
  local a, b = LOG_T_MIN, LOG_T_MAX
  local c, d = b - g * (b - a), a + g * (b - a)
  local fc, fd = f(c), f(d)
  while b - a > TOL do
    if fc <= fd then
      b, d, fd = d, c, fc
      c = b - g * (b - a)
      fc = f(c)
    else
      a, c, fc = c, d, fd
      d = a + g * (b - a)
      fd = f(d)
    end
  end
  return (a + b) / 2
end

--- fit_temperature(logits, labels) -> T, nll, info: the temperature in
-- [0.01, 100] minimising the mean NLL of softmax(logits / T) on these rows
-- (golden-section search on log T, deterministic), and that NLL. Fit it on
-- rows the model was not trained on.
--
-- n rows cannot show an error rate below 1 / (n + 2) (Laplace's rule of
-- succession with no error seen): when every row is right the NLL keeps
-- falling as T -> 0 and would make every answer certain, a wrong one on
-- new rows included. So T never goes below the value at which the model
-- still claims that error rate on the rows. info = {errors, n, floor = that
-- T, bound = true when it decided T}.
function calibration.fit_temperature(logits, labels)
  local rows, y = check(logits, labels, "fit_temperature")
  local function f(log_t) return mean_nll(rows, y, math.exp(-log_t)) end
  local best = argmin_log_t(f)
  -- T = 1 (no scaling) is kept when the search cannot beat it
  if f(0) <= f(best) then best = 0 end
  local errors = 0
  for i = 1, #rows do
    local z, arg = rows[i], 1
    for k = 2, #z do if z[k] > z[arg] then arg = k end end
    if arg ~= y[i] then errors = errors + 1 end
  end
  local low = floor_log_t(rows, 1 / (#rows + 2))
  local info = { errors = errors, n = #rows, floor = math.exp(low), bound = best < low }
  if info.bound then best = low end
  return math.exp(best), f(best), info
end

-- Past this factor a multiplication is split: 2^100 fits float32 while a
-- 1 / T from a T below 3e-39 does not.
local STEP = 2.0 ^ 100
local FLOAT_MAX = 3.4028234663852886e38

-- softmax(z * s) for finite float32 logits z and any s = 1 / T > 0, with
-- no intermediate that overflows. While z * s stays in range, softmax
-- takes out the maximum itself. Otherwise the row's maximum comes out
-- first, so the top logit is exactly 0 and every other is negative:
-- scaling can only send those to -inf (probability 0), never make
-- inf - inf, and s is applied in factors float32 holds.
local function tempered(z, s)
  if s <= STEP and s * z:abs():max():item() < FLOAT_MAX / 4 then return core.softmax(z * s, 2) end
  z = z - z:max(2, true)
  while s > STEP do
    z = z * STEP
    s = s / STEP
  end
  return core.softmax(z * s, 2)
end

--- apply(logits, T) -> (N, C) tensor of probabilities softmax(logits / T),
-- for finite logits and any positive finite T (T -> 0 tends to the one-hot
-- argmax, T -> inf to the uniform distribution).
-- @raise apply: logit (ROW, COLUMN) is ... (NaN or inf)
function calibration.apply(logits, T)
  if not core.is_tensor(logits) or logits:dim() ~= 2 then
    error("apply: logits must be a (N, C) tensor", 2)
  end
  if type(T) ~= "number" or not (T > 0 and T < math.huge) then
    error(("apply: T must be a positive number, got %s"):format(tostring(T)), 2)
  end
  local z = logits:detach()
  if z:numel() == 0 then return core.softmax(z, 2) end
  if (z - z):sum():item() ~= 0 then   -- x - x is NaN for NaN and inf alone
    local rows = z:totable()
    for i = 1, #rows do
      for k, v in ipairs(rows[i]) do
        if v ~= v or v == math.huge or v == -math.huge then
          error(("apply: logit (%d, %d) is %s"):format(i, k, v ~= v and "NaN" or tostring(v)), 2)
        end
      end
    end
  end
  return tempered(z, 1 / T)
end

return calibration

--- bbb.metrics: scores of predictive distributions.
-- probs are (N, C) tensors of class probabilities (e.g. the MC average from
-- net:predict), labels are (N) tensors or Lua arrays of classes 1..C.
-- Scalar metrics return Lua numbers; per-example ones return (N) tensors.
local core = require "bbb.core"

local metrics = {}

local TINY = 1e-12   -- keeps log(0) finite: a confident miss costs ~27.6 nats

local function shape_str(t)
  return table.concat(t:size(), "x")
end

-- Metrics never need gradients; detach (a free view) so none are recorded.
local function check_probs(probs, what)
  if not core.is_tensor(probs) or probs:dim() ~= 2 then
    error(("%s: probs must be a (N, C) tensor, got %s"):format(what,
      core.is_tensor(probs) and shape_str(probs) or type(probs)), 3)
  end
  local n, c = probs:size()[1], probs:size()[2]
  if n == 0 or c == 0 then
    error(("%s: empty input (%dx%d)"):format(what, n, c), 3)
  end
  -- a NaN (from a NaN input, or a diverged net) would read as a class
  local total = probs:detach():sum():item()
  if total ~= total then
    error(("%s: probs hold NaN: the inputs or the model are not finite"):format(what), 3)
  end
  return probs:detach(), n, c
end

local function check_labels(labels, n, c, what)
  local list = core.is_tensor(labels) and labels:reshape(-1):totable() or labels
  if type(list) ~= "table" then
    error(("%s: labels must be a tensor or a Lua array, got %s"):format(what, type(labels)), 3)
  end
  if #list ~= n then
    error(("%s: %d labels for %d rows of probabilities"):format(what, #list, n), 3)
  end
  for i = 1, n do
    local y = list[i]
    if type(y) ~= "number" or y < 1 or y > c or y ~= math.floor(y) then
      error(("%s: label %d is %s, expected a class in 1..%d"):format(what, i, tostring(y), c), 3)
    end
  end
  return list
end

--- accuracy(probs, labels) -> fraction of rows whose argmax is the label.
function metrics.accuracy(probs, labels)
  local p, n, c = check_probs(probs, "accuracy")
  local y = check_labels(labels, n, c, "accuracy")
  local pred, hits = p:argmax(2):totable(), 0
  for i = 1, n do
    if pred[i] == y[i] then hits = hits + 1 end
  end
  return hits / n
end

--- nll(probs, labels) -> mean of -log p(true class), p clamped at 1e-12.
function metrics.nll(probs, labels)
  local p, n, c = check_probs(probs, "nll")
  local y = check_labels(labels, n, c, "nll")
  local rows, total = p:totable(), 0
  for i = 1, n do
    total = total - math.log(math.max(rows[i][y[i]], TINY))
  end
  return total / n
end

-- Entropies are in nats unless a base is given (2: bits).
local function check_base(base, what)
  if base == nil then return 1 end
  if type(base) ~= "number" or not (base > 1) or base == math.huge then
    error(("%s: base must be a number > 1 (2 for bits), got %s"):format(what, tostring(base)), 3)
  end
  return 1 / math.log(base)
end

local function plogp_sum(p, dim)
  return (p * p:clamp(TINY):log()):sum(dim):neg()
end

--- entropy(probs [, base]) -> (N) tensor of entropies -sum_c p log p, in
-- nats (base 2: bits); 0 log 0 counts as 0.
function metrics.entropy(probs, base)
  local k = check_base(base, "entropy")
  local p = check_probs(probs, "entropy")
  local h = plogp_sum(p, 2)
  return k == 1 and h or h * k
end

-- Per-pass probabilities as one (S, N, C) tensor: from net:predict(x,
-- {keep_samples = "tensor"}) or a list of S (N, C) tensors.
local function check_samples(samples, what)
  if core.is_tensor(samples) then
    if samples:dim() ~= 3 then
      error(("%s: samples must be a (S, N, C) tensor or a list of (N, C) tensors, got %s")
        :format(what, shape_str(samples)), 3)
    end
    local sz = samples:size()
    if sz[1] == 0 or sz[2] == 0 or sz[3] == 0 then
      error(("%s: empty input (%s)"):format(what, shape_str(samples)), 3)
    end
    return samples:detach()
  end
  if type(samples) ~= "table" or #samples == 0 then
    error(("%s: expects a (S, N, C) tensor or a non-empty list of (N, C) tensors"):format(what), 3)
  end
  local first = samples[1]
  if not core.is_tensor(first) or first:dim() ~= 2 then
    error(("%s: sample 1 must be a (N, C) tensor, got %s"):format(what,
      core.is_tensor(first) and shape_str(first) or type(first)), 3)
  end
  local rows = {}
  for s = 1, #samples do
    local p = samples[s]
    if not core.is_tensor(p) or shape_str(p) ~= shape_str(first) then
      error(("%s: sample %d is %s, sample 1 is %s"):format(what, s,
        core.is_tensor(p) and shape_str(p) or type(p), shape_str(first)), 3)
    end
    rows[s] = p:detach():reshape { 1, first:size(1), first:size(2) }
  end
  check_probs(first, what)
  return #rows == 1 and rows[1] or core.cat(rows, 1)
end

--- uncertainty(samples [, base]) -> {predictive, expected, mutual_information, mean}:
-- from S per-pass (N, C) probabilities (a (S, N, C) tensor or a list),
-- the entropy of the mean prediction (N), the mean entropy of the passes
-- (N, the aleatoric part), their difference (N, the epistemic part,
-- >= 0 by Jensen; float rounding below 0 is clamped) and the mean (N, C).
function metrics.uncertainty(samples, base)
  local k = check_base(base, "uncertainty")
  local p = check_samples(samples, "uncertainty")
  local mean = p:mean(1)
  local predictive = plogp_sum(mean, 2) * k
  local expected = plogp_sum(p, 3):mean(1) * k
  return { predictive = predictive, expected = expected,
           mutual_information = (predictive - expected):maximum(0), mean = mean }
end

--- mutual_information(samples [, base]) -> (N) tensor: H[mean_s p_s] - mean_s H[p_s],
-- the epistemic part of the predictive entropy, from a (S, N, C) tensor or
-- a list of S (N, C) tensors.
function metrics.mutual_information(samples, base)
  check_base(base, "mutual_information")
  check_samples(samples, "mutual_information")
  return metrics.uncertainty(samples, base).mutual_information
end

--- expected_entropy(samples [, base]) -> (N) tensor: mean_s H[p_s], the
-- aleatoric part of the predictive entropy.
function metrics.expected_entropy(samples, base)
  check_base(base, "expected_entropy")
  check_samples(samples, "expected_entropy")
  return metrics.uncertainty(samples, base).expected
end

--- reliability(probs, labels, n_bins = 15) -> list of n_bins bins
-- {lo, hi, count, accuracy, confidence}: rows grouped by their top
-- probability into equal-width bins (lo, hi] (a confidence of 0 joins the
-- first); accuracy and confidence are the bin's means (nil when empty).
function metrics.reliability(probs, labels, n_bins)
  n_bins = n_bins or 15
  if math.type(n_bins) ~= "integer" or n_bins < 1 or n_bins > 1e6 then
    error(("reliability: n_bins must be an integer in [1, 10^6], got %s"):format(tostring(n_bins)), 2)
  end
  local p, n, c = check_probs(probs, "reliability")
  local y = check_labels(labels, n, c, "reliability")
  local conf, pred = p:max(2)
  conf, pred = conf:totable(), pred:totable()
  local bins = {}
  for b = 1, n_bins do
    bins[b] = { lo = (b - 1) / n_bins, hi = b / n_bins, count = 0, hits = 0, conf_sum = 0 }
  end
  for i = 1, n do
    local bin = bins[math.min(n_bins, math.max(1, math.ceil(conf[i] * n_bins)))]
    bin.count = bin.count + 1
    bin.conf_sum = bin.conf_sum + conf[i]
    if pred[i] == y[i] then bin.hits = bin.hits + 1 end
  end
  for _, bin in ipairs(bins) do
    if bin.count > 0 then
      bin.accuracy, bin.confidence = bin.hits / bin.count, bin.conf_sum / bin.count
    end
  end
  return bins
end

--- ece(probs, labels, n_bins = 15) -> expected calibration error:
-- sum over equal-width confidence bins of |bin| / N * |accuracy - confidence|.
function metrics.ece(probs, labels, n_bins)
  if n_bins ~= nil and (math.type(n_bins) ~= "integer" or n_bins < 1 or n_bins > 1e6) then
    error(("ece: n_bins must be an integer in [1, 10^6], got %s"):format(tostring(n_bins)), 2)
  end
  check_probs(probs, "ece")
  local n = probs:size(1)
  check_labels(labels, n, probs:size(2), "ece")
  local total = 0
  for _, bin in ipairs(metrics.reliability(probs, labels, n_bins)) do
    total = total + math.abs(bin.hits - bin.conf_sum) / n
  end
  return total
end

local function sorted_scores(s, what)
  local list = core.is_tensor(s) and s:reshape(-1):totable() or s
  if type(list) ~= "table" then
    error(("auroc: %s scores must be a tensor or a Lua array, got %s"):format(what, type(s)), 3)
  end
  if #list == 0 then error(("auroc: no %s scores"):format(what), 3) end
  local copy = {}
  for i = 1, #list do
    local v = list[i]
    if type(v) ~= "number" or v ~= v then
      error(("auroc: %s score %d is %s"):format(what, i, tostring(v)), 3)
    end
    copy[i] = v
  end
  table.sort(copy)
  return copy
end

--- auroc(scores_pos, scores_neg) -> P(pos > neg) + P(pos = neg) / 2, the
-- Mann–Whitney statistic, from two sorted lists in one merge pass.
function metrics.auroc(scores_pos, scores_neg)
  local pos, neg = sorted_scores(scores_pos, "positive"), sorted_scores(scores_neg, "negative")
  local below, total, i = 1, 0, 1   -- neg[below..] are the negatives >= pos[i]
  while i <= #pos do
    local v, run = pos[i], i
    while run <= #pos and pos[run] == v do run = run + 1 end
    while below <= #neg and neg[below] < v do below = below + 1 end
    local tie = below
    while tie <= #neg and neg[tie] == v do tie = tie + 1 end
    total = total + (run - i) * ((below - 1) + 0.5 * (tie - below))
    i = run
  end
  return total / (#pos * #neg)
end

return metrics

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

--- entropy(probs) -> (N) tensor of predictive entropies in nats.
function metrics.entropy(probs)
  local p = check_probs(probs, "entropy")
  return (p * p:clamp(TINY):log()):sum(2):neg()
end

--- mutual_information(sample_probs) -> (N) tensor: H[mean_s p_s] - mean_s H[p_s],
-- the epistemic part of the predictive entropy, from a list of S (N, C) tensors.
function metrics.mutual_information(sample_probs)
  if type(sample_probs) ~= "table" or #sample_probs == 0 then
    error("mutual_information: expects a non-empty list of (N, C) tensors", 2)
  end
  local first = check_probs(sample_probs[1], "mutual_information")
  local mean, mean_entropy = first:clone(), metrics.entropy(first)
  for s = 2, #sample_probs do
    local p = check_probs(sample_probs[s], "mutual_information")
    if shape_str(p) ~= shape_str(first) then
      error(("mutual_information: sample %d is %s, sample 1 is %s")
        :format(s, shape_str(p), shape_str(first)), 2)
    end
    mean = mean + p
    mean_entropy = mean_entropy + metrics.entropy(p)
  end
  local k = 1 / #sample_probs
  -- Jensen makes it >= 0; float rounding can dip just below.
  return (metrics.entropy(mean * k) - mean_entropy * k):maximum(0)
end

--- ece(probs, labels, n_bins = 15) -> expected calibration error:
-- sum over equal-width confidence bins of |bin| / N * |accuracy - confidence|.
function metrics.ece(probs, labels, n_bins)
  n_bins = n_bins or 15
  if math.type(n_bins) ~= "integer" or n_bins < 1 then
    error(("ece: n_bins must be a positive integer, got %s"):format(tostring(n_bins)), 2)
  end
  local p, n, c = check_probs(probs, "ece")
  local y = check_labels(labels, n, c, "ece")
  local conf, pred = p:max(2)
  conf, pred = conf:totable(), pred:totable()
  local count, hits, conf_sum = {}, {}, {}
  for b = 1, n_bins do count[b], hits[b], conf_sum[b] = 0, 0, 0 end
  for i = 1, n do
    -- bins are (lo, hi]; a confidence of exactly 0 joins the first
    local b = math.min(n_bins, math.max(1, math.ceil(conf[i] * n_bins)))
    count[b] = count[b] + 1
    conf_sum[b] = conf_sum[b] + conf[i]
    if pred[i] == y[i] then hits[b] = hits[b] + 1 end
  end
  local total = 0
  for b = 1, n_bins do
    if count[b] > 0 then total = total + math.abs(hits[b] - conf_sum[b]) / n end
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

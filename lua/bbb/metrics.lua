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

-- How far a row's sum may stray from 1: float32 softmax rows and their
-- means over passes sum to 1 within 1e-6; logits or scores do not.
local SUM_TOL = 1e-3
-- How far above 1 an entry may round: a float32 mean of ones can.
local ENTRY_TOL = 1e-6

-- Refuses rows that are not probability distributions, naming the first.
-- p is (N, C), detached and free of NaN; with per given, its rows are S
-- samples of per rows each, and the sample is named too.
local function check_distributions(p, what, level, per)
  local sums, tops, lows = p:sum(2):totable(), p:max(2):totable(), p:neg():max(2):totable()
  for i = 1, #sums do
    local why
    if -lows[i] < 0 then why = ("holds %.6g, below 0"):format(-lows[i])
    elseif tops[i] > 1 + ENTRY_TOL then why = ("holds %.6g, above 1"):format(tops[i])
    elseif math.abs(sums[i] - 1) > SUM_TOL then why = ("sums to %.6g, not 1"):format(sums[i]) end
    if why then
      local row = per and ("sample %d row %d"):format((i - 1) // per + 1, (i - 1) % per + 1) or ("row " .. i)
      error(("%s: %s %s: pass probabilities (softmax), not logits"):format(what, row, why), level + 1)
    end
  end
end

-- Metrics never need gradients; detach (a free view) so none are recorded.
-- distributions: the rows must be probabilities (entries in [0, 1] summing
-- to 1), not any scores whose argmax is the class.
local function check_probs(probs, what, level, distributions)
  level = level or 3
  if not core.is_tensor(probs) or probs:dim() ~= 2 then
    error(("%s: probs must be a (N, C) tensor, got %s"):format(what,
      core.is_tensor(probs) and shape_str(probs) or type(probs)), level)
  end
  local n, c = probs:size()[1], probs:size()[2]
  if n == 0 or c == 0 then
    error(("%s: empty input (%dx%d)"):format(what, n, c), level)
  end
  local p = probs:detach()
  -- a NaN (from a NaN input, or a diverged net) would read as a class
  local total = p:sum():item()
  if total ~= total then
    for row, sum in ipairs(p:sum(2):totable()) do
      if sum ~= sum then
        error(("%s: row %d holds NaN: the inputs or the model are not finite"):format(what, row), level)
      end
    end
  end
  if distributions then check_distributions(p, what, level + 1) end
  return p, n, c
end

local function check_labels(labels, n, c, what, level)
  local list = core.is_tensor(labels) and labels:reshape(-1):totable() or labels
  if type(list) ~= "table" then
    error(("%s: labels must be a tensor or a Lua array, got %s"):format(what, type(labels)), level or 3)
  end
  if #list ~= n then
    error(("%s: %d labels for %d rows of probabilities"):format(what, #list, n), level or 3)
  end
  for i = 1, n do
    local y = list[i]
    if type(y) ~= "number" or y < 1 or y > c or y ~= math.floor(y) then
      error(("%s: label %d is %s, expected a class in 1..%d"):format(what, i, tostring(y), c), level or 3)
    end
  end
  return list
end

-- one frame below the public function: its errors name the caller's line
local function hits_of(probs, labels, what)
  local p, n, c = check_probs(probs, what, 4)
  local y = check_labels(labels, n, c, what, 4)
  local pred, hits = p:argmax(2):totable(), {}
  for i = 1, n do hits[i] = pred[i] == y[i] and 1 or 0 end
  return hits, n
end

--- correct(probs, labels) -> Lua array of 1 (argmax is the label) or 0 per
-- row: what risk_coverage and aurc take.
function metrics.correct(probs, labels)
  return (hits_of(probs, labels, "correct"))
end

--- accuracy(probs, labels) -> fraction of rows whose argmax is the label.
function metrics.accuracy(probs, labels)
  local hits, n, total = hits_of(probs, labels, "accuracy")
  total = 0
  for i = 1, n do total = total + hits[i] end
  return total / n
end

--- nll(probs, labels) -> mean of -log p(true class), p clamped at 1e-12.
-- probs must be probabilities: rows in [0, 1] that sum to 1.
-- @raise nll: row ... sums to ..., not 1: pass probabilities (softmax), not logits
function metrics.nll(probs, labels)
  local p, n, c = check_probs(probs, "nll", 3, true)
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
-- nats (base 2: bits); 0 log 0 counts as 0. probs must be probabilities:
-- rows in [0, 1] that sum to 1.
-- @raise entropy: row ... holds ..., below 0: pass probabilities (softmax), not logits
function metrics.entropy(probs, base)
  local k = check_base(base, "entropy")
  local p = check_probs(probs, "entropy", 3, true)
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
    local p = samples:detach()
    check_probs(p:reshape(sz[1] * sz[2], sz[3]), what, 4)
    check_distributions(p:reshape(sz[1] * sz[2], sz[3]), what, 3, sz[2])
    return p
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
  local p = #rows == 1 and rows[1] or core.cat(rows, 1)
  local flat = p:reshape(#rows * first:size(1), first:size(2))
  check_probs(flat, what, 4)
  check_distributions(flat, what, 3, first:size(1))
  return p
end

--- uncertainty(samples [, base]) -> {predictive, expected, mutual_information, mean}:
-- from S per-pass (N, C) probabilities (a (S, N, C) tensor or a list; each
-- row in [0, 1], summing to 1),
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

local function check_bins(n_bins, what)
  if n_bins ~= nil and (math.type(n_bins) ~= "integer" or n_bins < 1 or n_bins > 1e6) then
    error(("%s: n_bins must be an integer in [1, 10^6], got %s"):format(what, tostring(n_bins)), 3)
  end
  return n_bins or 15
end

-- The bins of reliability() from checked probabilities p and labels y.
local function bins_of(p, y, n, n_bins)
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

--- reliability(probs, labels, n_bins = 15) -> list of n_bins bins
-- {lo, hi, count, accuracy, confidence}: rows grouped by their top
-- probability into equal-width bins (lo, hi] (a confidence of 0 joins the
-- first); accuracy and confidence are the bin's means (nil when empty).
-- @raise reliability: row ... sums to ..., not 1: pass probabilities (softmax), not logits
function metrics.reliability(probs, labels, n_bins)
  n_bins = check_bins(n_bins, "reliability")
  local p, n, c = check_probs(probs, "reliability", 3, true)
  local y = check_labels(labels, n, c, "reliability")
  return bins_of(p, y, n, n_bins)
end

--- ece(probs, labels, n_bins = 15) -> expected calibration error:
-- sum over equal-width confidence bins of |bin| / N * |accuracy - confidence|.
-- probs must be probabilities: rows in [0, 1] that sum to 1.
-- @raise ece: row ... sums to ..., not 1: pass probabilities (softmax), not logits
function metrics.ece(probs, labels, n_bins)
  n_bins = check_bins(n_bins, "ece")
  local p, n, c = check_probs(probs, "ece", 3, true)
  local y = check_labels(labels, n, c, "ece")
  local total = 0
  for _, bin in ipairs(bins_of(p, y, n, n_bins)) do
    total = total + math.abs(bin.hits - bin.conf_sum) / n
  end
  return total
end

--------------------------------------------------------------------------
-- Classification scores: ranking, detection and selective prediction.
-- Binary metrics take (scores, labels) as sklearn's roc_auc_score does:
-- labels 1/0 or true/false, 1 the positive class, a higher score meaning
-- "more likely positive". Tied scores share one threshold.

-- level: of the error, as error() counts it from here (3: the caller of
-- the public function that called this).
local function number_list(v, what, name, level)
  local list = core.is_tensor(v) and v:reshape(-1):totable() or v
  if type(list) ~= "table" then
    error(("%s: %s must be a tensor or a Lua array, got %s"):format(what, name, type(v)), level or 3)
  end
  return list
end

-- The scores and 1/0 labels as Lua arrays, with the counts of each class;
-- refuses what has no answer (one class only, NaN, lengths that differ).
local function binary_inputs(scores, labels, what)
  local s, l = number_list(scores, what, "scores", 4), number_list(labels, what, "labels", 4)
  if #s ~= #l then error(("%s: %d scores for %d labels"):format(what, #s, #l), 3) end
  local y, n_pos = {}, 0
  for i = 1, #s do
    local v = s[i]
    if type(v) ~= "number" or v ~= v then
      error(("%s: score %d is %s"):format(what, i, tostring(v)), 3)
    end
    local lab = l[i]
    if lab == true or lab == 1 then y[i] = 1
    elseif lab == false or lab == 0 then y[i] = 0
    else error(("%s: label %d is %s, expected 1/0 or true/false"):format(what, i, tostring(lab)), 3) end
    n_pos = n_pos + y[i]
  end
  if n_pos == 0 or n_pos == #s then
    error(("%s: labels hold one class only (%d positive of %d): the score is undefined")
      :format(what, n_pos, #s), 3)
  end
  return s, y, n_pos, #s - n_pos
end

-- Indices 1..n ordered by score, descending (ascending when asc).
local function order_by(s, asc)
  local idx = {}
  for i = 1, #s do idx[i] = i end
  table.sort(idx, function(a, b)
    if s[a] ~= s[b] then
      if asc then return s[a] < s[b] else return s[a] > s[b] end
    end
    return a < b
  end)
  return idx
end

-- Calls fn(tp, fp) after each group of tied scores, from the highest
-- score down: the ROC and precision-recall curves' points.
local function each_threshold(s, y, fn)
  local idx, tp, fp, i = order_by(s), 0, 0, 1
  while i <= #idx do
    local v = s[idx[i]]
    while i <= #idx and s[idx[i]] == v do
      if y[idx[i]] == 1 then tp = tp + 1 else fp = fp + 1 end
      i = i + 1
    end
    fn(tp, fp)
  end
end

--- auroc(scores, labels) -> the area under the ROC curve: P(score of a
-- positive > score of a negative) + P(tie) / 2 (the Mann-Whitney statistic,
-- from average ranks), as sklearn's roc_auc_score.
function metrics.auroc(scores, labels)
  local s, y, n_pos, n_neg = binary_inputs(scores, labels, "auroc")
  local idx, rank_sum, i = order_by(s, true), 0, 1
  while i <= #idx do
    local j, pos = i, 0
    while j <= #idx and s[idx[j]] == s[idx[i]] do
      pos = pos + y[idx[j]]
      j = j + 1
    end
    rank_sum = rank_sum + pos * (i + j - 1) / 2   -- ranks i..j-1 share their mean
    i = j
  end
  return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
end

--- aupr(scores, labels) -> average precision, sum_k (R_k - R_{k-1}) P_k over
-- the distinct thresholds, as sklearn's average_precision_score.
function metrics.aupr(scores, labels)
  local s, y, n_pos = binary_inputs(scores, labels, "aupr")
  local ap, last_recall = 0, 0
  each_threshold(s, y, function(tp, fp)
    local recall = tp / n_pos
    ap = ap + (recall - last_recall) * tp / (tp + fp)
    last_recall = recall
  end)
  return ap
end

--- fpr_at_tpr(scores, labels, level = 0.95) -> the false-positive rate at
-- the highest threshold whose true-positive rate reaches level (FPR95).
function metrics.fpr_at_tpr(scores, labels, level)
  level = level or 0.95
  if type(level) ~= "number" or not (level > 0 and level <= 1) then
    error(("fpr_at_tpr: level must be a number in (0, 1], got %s"):format(tostring(level)), 2)
  end
  local s, y, n_pos, n_neg = binary_inputs(scores, labels, "fpr_at_tpr")
  local found
  each_threshold(s, y, function(tp, fp)
    if not found and tp >= level * n_pos - 1e-9 * n_pos then found = fp / n_neg end
  end)
  return found
end

--- detection(in_scores, out_scores) -> {auroc, aupr_in, aupr_out, fpr95}:
-- how well a score (higher: more likely out of distribution) tells two sets
-- apart. auroc, aupr_out and fpr95 take the out set as positive; aupr_in
-- takes the in set as positive with the scores negated.
function metrics.detection(in_scores, out_scores)
  local a, b = number_list(in_scores, "detection", "in_scores"), number_list(out_scores, "detection", "out_scores")
  if #a == 0 or #b == 0 then
    error(("detection: %d in-distribution and %d out-of-distribution scores: both sets are needed")
      :format(#a, #b), 2)
  end
  for _, set in ipairs { { "in_scores", a }, { "out_scores", b } } do
    for i, v in ipairs(set[2]) do
      if type(v) ~= "number" or v ~= v then
        error(("detection: %s[%d] is %s"):format(set[1], i, tostring(v)), 2)
      end
    end
  end
  local s, y, neg = {}, {}, {}
  for i = 1, #a do s[i], y[i] = a[i], 0 end
  for i = 1, #b do s[#a + i], y[#a + i] = b[i], 1 end
  local flipped = {}
  for i = 1, #s do neg[i], flipped[i] = -s[i], 1 - y[i] end
  return { auroc = metrics.auroc(s, y), aupr_out = metrics.aupr(s, y), aupr_in = metrics.aupr(neg, flipped),
           fpr95 = metrics.fpr_at_tpr(s, y, 0.95) }
end

--- brier(probs, labels) -> the Brier score: the mean over rows of
-- sum_c (p_c - [c = label])^2 (0 for sure and right, 2 for sure and wrong).
-- probs must be probabilities: rows in [0, 1] that sum to 1.
function metrics.brier(probs, labels)
  local p, n, c = check_probs(probs, "brier", 3, true)
  local y = check_labels(labels, n, c, "brier")
  local rows, total = p:totable(), 0
  for i = 1, n do
    local row = rows[i]
    for k = 1, c do
      local d = row[k] - (k == y[i] and 1 or 0)
      total = total + d * d
    end
  end
  return total / n
end

-- The confidences and 1/0 correctness as Lua arrays, checked.
local function selective_inputs(confidence, correct, what)
  local s, l = number_list(confidence, what, "confidence", 4), number_list(correct, what, "correct", 4)
  if #s ~= #l then error(("%s: %d confidences for %d correctness flags"):format(what, #s, #l), 3) end
  if #s == 0 then error(("%s: empty input"):format(what), 3) end
  local ok = {}
  for i = 1, #s do
    if type(s[i]) ~= "number" or s[i] ~= s[i] then
      error(("%s: confidence %d is %s"):format(what, i, tostring(s[i])), 3)
    end
    local c = l[i]
    if c == true or c == 1 then ok[i] = 1
    elseif c == false or c == 0 then ok[i] = 0
    else error(("%s: correct %d is %s, expected 1/0 or true/false"):format(what, i, tostring(c)), 3) end
  end
  return s, ok
end

--- risk_coverage(confidence, correct) -> {coverage = {...}, risk = {...}}:
-- keeping the examples at or above each distinct confidence (highest
-- first), the fraction kept and the error rate among them.
function metrics.risk_coverage(confidence, correct)
  local s, ok = selective_inputs(confidence, correct, "risk_coverage")
  local curve = { coverage = {}, risk = {} }
  each_threshold(s, ok, function(right, wrong)
    local k = right + wrong
    curve.coverage[#curve.coverage + 1] = k / #s
    curve.risk[#curve.risk + 1] = wrong / k
  end)
  return curve
end

--- aurc(confidence, correct) -> the area under the risk-coverage curve:
-- the mean over k = 1..n of the error rate among the k most confident
-- (Geifman et al. 2019); inside a group of tied confidences the errors are
-- spread evenly, the expectation over the group's orders.
function metrics.aurc(confidence, correct)
  local s, ok = selective_inputs(confidence, correct, "aurc")
  local total, done, errors = 0, 0, 0
  each_threshold(s, ok, function(right, wrong)
    local m, e = right + wrong - done, wrong - errors   -- this group's size and errors
    for j = 1, m do total = total + (errors + j * e / m) / (done + j) end
    done, errors = right + wrong, wrong
  end)
  return total / #s
end

-- Regression: scores of Gaussian predictive distributions.

local function column(v, what, name, level)
  level = level or 3
  local list = (type(v) == "table" or core.is_tensor(v)) and number_list(v, what, name, level + 1) or nil
  if type(list) ~= "table" or #list == 0 then
    error(("%s: %s must be a non-empty tensor or Lua array"):format(what, name), level)
  end
  for i, x in ipairs(list) do
    if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then
      error(("%s: %s[%d] is %s, not a finite number"):format(what, name, i, tostring(x)), level)
    end
  end
  return list
end

local function gaussian_inputs(mean, std, y, what)
  local m, s, t = column(mean, what, "mean", 4), column(std, what, "std", 4), column(y, what, "y", 4)
  if #m ~= #s or #m ~= #t then
    error(("%s: %d means, %d standard deviations and %d targets"):format(what, #m, #s, #t), 3)
  end
  for i, v in ipairs(s) do
    if not (v > 0) then error(("%s: std[%d] is %s, not positive"):format(what, i, tostring(v)), 3) end
  end
  return m, s, t
end

-- erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
local function erf(x)
  local sign = x < 0 and -1 or 1
  x = math.abs(x)
  local t = 1 / (1 + 0.3275911 * x)
  local poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
  return sign * (1 - poly * math.exp(-x * x))
end

--- crps_gaussian(mean, std, y) -> the mean continuous ranked probability
-- score of N(mean, std^2) predictions (lower is better, in y's units):
-- std (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)), z = (y - mean) / std
-- (Gneiting and Raftery 2007). Tensors or Lua arrays of equal length.
function metrics.crps_gaussian(mean, std, y)
  local m, s, t = gaussian_inputs(mean, std, y, "crps_gaussian")
  local total = 0
  for i = 1, #m do
    local z = (t[i] - m[i]) / s[i]
    local cdf, pdf = 0.5 * (1 + erf(z / math.sqrt(2))), math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    total = total + s[i] * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))
  end
  return total / #m
end

-- Student's t with an integer number of degrees of freedom df: the
-- distribution of heavy-tailed noise (bbb.elbo's "student-t" likelihood).

local function check_df(df, what)
  if math.type(df) ~= "integer" and not (type(df) == "number" and df == math.floor(df) and df < 2^31) or df < 1 then
    error(("%s: df must be a positive integer, got %s"):format(what, tostring(df)), 3)
  end
  return math.tointeger(df)
end

-- log Gamma(k / 2) for a positive integer k, exactly as a sum of logs:
-- Gamma(1) = 1, Gamma(1/2) = sqrt(pi), Gamma(x + 1) = x Gamma(x).
local function lgamma_half(k)
  local x, sum = k / 2, 0
  local base = k % 2 == 1 and 0.5 or 1
  while x > base do
    x = x - 1
    sum = sum + math.log(x)
  end
  return sum + (base == 0.5 and 0.5 * math.log(math.pi) or 0)
end

--- student_t_lognorm(df) -> log of the t density's normaliser,
-- log Gamma((df + 1) / 2) - log Gamma(df / 2) - log(df pi) / 2: the density
-- of the standard t is exp(that - (df + 1) / 2 log(1 + t^2 / df)).
-- @raise student_t_lognorm: df must be a positive integer, got ...
function metrics.student_t_lognorm(df)
  df = check_df(df, "student_t_lognorm")
  return lgamma_half(df + 1) - lgamma_half(df) - 0.5 * math.log(df * math.pi)
end

-- P(|T| < t) of the standard t with df degrees of freedom, in closed form
-- (Abramowitz and Stegun 26.7.3), from theta = atan(t / sqrt(df)).
local function t_central(theta, df)
  local s, c = math.sin(theta), math.cos(theta)
  local c2, term, sum = c * c, 1, 1
  if df % 2 == 0 then
    for k = 2, df - 2, 2 do term = term * c2 * (k - 1) / k; sum = sum + term end
    return s * sum
  end
  if df == 1 then return 2 * theta / math.pi end
  for k = 3, df - 2, 2 do term = term * c2 * (k - 1) / k; sum = sum + term end
  return 2 / math.pi * (theta + s * c * sum)
end

--- student_t_cdf(t, df) -> P(T <= t) of the standard Student's t with df
-- (a positive integer) degrees of freedom.
-- @raise student_t_cdf: df must be a positive integer, got ...
function metrics.student_t_cdf(t, df)
  df = check_df(df, "student_t_cdf")
  if type(t) ~= "number" or t ~= t then error(("student_t_cdf: t must be a number, got %s"):format(tostring(t)), 2) end
  local a = t_central(math.atan(math.abs(t) / math.sqrt(df)), df)
  return t < 0 and 0.5 - 0.5 * a or 0.5 + 0.5 * a
end

-- Past this df the closed form's series (df / 2 terms, each bisection
-- step) gives way to the expansion below, exact there to double precision.
local T_SERIES_MAX_DF = 1000

-- The t quantile from the normal one z, by the Cornish-Fisher expansion in
-- 1/df (Abramowitz and Stegun 26.7.5); its first omitted term is O(df^-5).
local function t_from_normal(z, df)
  local z2 = z * z
  local g1 = (z2 + 1) * z / 4
  local g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
  local g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
  local g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
  return z + g1 / df + g2 / df ^ 2 + g3 / df ^ 3 + g4 / df ^ 4
end

-- The multiplier z of the central level interval +- z: of the standard
-- normal (df nil, by bisection on erf, accurate to its 1.5e-7) or of the
-- standard t (by bisection on theta, where the closed form is exact).
local function central_multiplier(level, df)
  if df == nil then
    local lo, hi = 0, 10
    for _ = 1, 60 do
      local mid = (lo + hi) / 2
      if erf(mid / math.sqrt(2)) < level then lo = mid else hi = mid end
    end
    return (lo + hi) / 2
  end
  if df > T_SERIES_MAX_DF then return t_from_normal(central_multiplier(level), df) end
  local lo, hi = 0, math.pi / 2
  for _ = 1, 100 do
    local mid = (lo + hi) / 2
    if t_central(mid, df) < level then lo = mid else hi = mid end
  end
  return math.sqrt(df) * math.tan((lo + hi) / 2)
end

local function check_level(level, what)
  if type(level) ~= "number" or not (level > 0 and level < 1) then
    error(("%s: level must be in (0, 1), got %s"):format(what, tostring(level)), 3)
  end
end

--- interval_multiplier(level [, df]) -> z: the central level interval of
-- N(0, 1) is +- z, or of the standard t with df degrees of freedom.
-- @raise interval_multiplier: level must be in (0, 1), got ...
-- @usage
--   assert(math.abs(bbb.metrics.interval_multiplier(0.95, 1) - 12.7062) < 1e-4)
function metrics.interval_multiplier(level, df)
  check_level(level, "interval_multiplier")
  if df ~= nil then df = check_df(df, "interval_multiplier") end
  return central_multiplier(level, df)
end

--- interval(mean, scale, y, level [, df]) -> {coverage, width}: the fraction
-- of y inside the central level interval mean +- z scale of N(mean, scale^2),
-- or of mean + scale T with T a standard t of df degrees of freedom, and the
-- interval's mean width.
function metrics.interval(mean, std, y, level, df)
  local m, s, t = gaussian_inputs(mean, std, y, "interval")
  check_level(level, "interval")
  if df ~= nil then df = check_df(df, "interval") end
  local z, inside, width = central_multiplier(level, df), 0, 0
  for i = 1, #m do
    if math.abs(t[i] - m[i]) <= z * s[i] then inside = inside + 1 end
    width = width + 2 * z * s[i]
  end
  return { coverage = inside / #m, width = width / #m }
end

-- Regression: scores of sampled predictive distributions.

--- crps_samples(samples, y) -> the mean CRPS of the empirical distributions
-- of S draws per row: mean_s |x_s - y| - 1/(2 S^2) sum_{s,s'} |x_s - x_s'|
-- (Gneiting and Raftery 2007, eq. 21), for predictives with no closed form
-- such as MC mixtures. samples: an (S, N) tensor or S Lua arrays of N draws;
-- y: N targets. With one draw per row it is the absolute error.
function metrics.crps_samples(samples, y)
  local t = column(y, "crps_samples", "y")
  local rows = core.is_tensor(samples) and samples:dim() == 2 and samples:totable() or samples
  if type(rows) ~= "table" or #rows == 0 then
    error("crps_samples: samples must be an (S, N) tensor or a non-empty array of S arrays", 2)
  end
  local draws = {}
  for s, r in ipairs(rows) do
    draws[s] = column(r, "crps_samples", ("samples[%d]"):format(s))
    if #draws[s] ~= #t then
      error(("crps_samples: samples[%d] holds %d draws for %d targets"):format(s, #draws[s], #t), 2)
    end
  end
  local S, total = #draws, 0
  for i = 1, #t do
    local x, near = {}, 0
    for s = 1, S do x[s] = draws[s][i]; near = near + math.abs(x[s] - t[i]) end
    -- sum over ordered pairs of |x_s - x_s'| from the sorted draws: 2 sum_k (2k - S - 1) x_(k)
    table.sort(x)
    local spread = 0
    for k = 1, S do spread = spread + (2 * k - S - 1) * x[k] end
    total = total + near / S - spread / (S * S)
  end
  return total / #t
end

return metrics

-- bbb.metrics: hand-computed values for every metric, and the errors.
local bbb = require "bbb"
local metrics = require "bbb.metrics"

local function close(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-6) * math.max(1, math.abs(b))
end

local function assert_close(got, expected, tol)
  assert(close(got, expected, tol), ("got %.9g, expected %.9g"):format(got, expected))
end

local probs = bbb.tensor {
  { 0.7, 0.2, 0.1 },   -- label 1: right
  { 0.1, 0.8, 0.1 },   -- label 2: right
  { 0.3, 0.3, 0.4 },   -- label 1: wrong (argmax 3)
  { 0.5, 0.25, 0.25 }, -- label 3: wrong (argmax 1)
}
local labels = bbb.tensor { 1, 2, 1, 3 }

describe("accuracy and nll", function()
  it("accuracy counts argmax hits, from tensors or Lua arrays", function()
    assert.are.equal(0.5, metrics.accuracy(probs, labels))
    assert.are.equal(0.5, metrics.accuracy(probs, { 1, 2, 1, 3 }))
    assert.are.equal(1, metrics.accuracy(probs, { 1, 2, 3, 1 }))
  end)
  it("nll is the mean -log p of the true class", function()
    local expect = -(math.log(0.7) + math.log(0.8) + math.log(0.3) + math.log(0.25)) / 4
    assert_close(metrics.nll(probs, labels), expect)
  end)
  it("nll stays finite for a zero probability", function()
    assert_close(metrics.nll(bbb.tensor { { 1, 0 } }, { 2 }), -math.log(1e-12))
  end)
end)

describe("entropy and mutual information", function()
  it("entropy in nats per row", function()
    local h = metrics.entropy(bbb.tensor { { 0.5, 0.5, 0, 0 }, { 1, 0, 0, 0 }, { 0.25, 0.25, 0.25, 0.25 } })
    assert.are.same({ 3 }, h:size())
    assert_close(h[1], math.log(2))
    assert_close(h[2], 0)
    assert_close(h[3], math.log(4))
  end)
  it("mutual information is the entropy of the mean minus the mean entropy", function()
    local a = bbb.tensor { { 1, 0 }, { 0.5, 0.5 }, { 0.9, 0.1 } }
    local b = bbb.tensor { { 0, 1 }, { 0.5, 0.5 }, { 0.9, 0.1 } }
    local mi = metrics.mutual_information { a, b }
    assert.are.same({ 3 }, mi:size())
    assert_close(mi[1], math.log(2))   -- confident, disagreeing samples
    assert_close(mi[2], 0)             -- agreeing, uncertain samples
    assert_close(mi[3], 0)
    local c = bbb.tensor { { 0.8, 0.2 } }
    local d = bbb.tensor { { 0.4, 0.6 } }
    local function h(p) return -(p * math.log(p) + (1 - p) * math.log(1 - p)) end
    assert_close(metrics.mutual_information { c, d }[1], h(0.6) - (h(0.8) + h(0.4)) / 2, 1e-5)
  end)
  it("mutual information of one sample is zero", function()
    assert_close(metrics.mutual_information { probs }:sum():item(), 0)
  end)
end)

describe("entropies in bits and per-pass samples", function()
  it("uniform over C classes is log2 C bits, one-hot is 0", function()
    local h = metrics.entropy(bbb.tensor { { 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1 },
                                          { 0, 0, 1, 0, 0, 0, 0, 0, 0, 0 },
                                          { 0.5, 0.5, 0, 0, 0, 0, 0, 0, 0, 0 } }, 2)
    assert_close(h[1], math.log(10, 2), 1e-6)
    assert_close(h[2], 0)
    assert_close(h[3], 1, 1e-6)
  end)
  it("MI of identical samples is 0 and the expected entropy is their entropy", function()
    local p = bbb.tensor { { 0.6, 0.3, 0.1 }, { 0.25, 0.25, 0.5 } }
    local u = metrics.uncertainty({ p, p, p }, 2)
    for i = 1, 2 do
      assert_close(u.mutual_information[i], 0, 1e-6)
      local row = p[i]:totable()
      local h = 0
      for _, v in ipairs(row) do h = h - v * math.log(v, 2) end
      assert_close(u.expected[i], h, 1e-6)
      assert_close(u.predictive[i], h, 1e-6)
    end
  end)
  it("two confident passes that disagree carry 1 bit of MI and no aleatoric part", function()
    local s = bbb.tensor { { { 1, 0 }, { 0.9, 0.1 } }, { { 0, 1 }, { 0.1, 0.9 } } }   -- (S=2, N=2, C=2)
    local u = metrics.uncertainty(s, 2)
    assert_close(u.predictive[1], 1, 1e-6)
    assert_close(u.expected[1], 0, 1e-6)
    assert_close(u.mutual_information[1], 1, 1e-6)
    local function h2(q) return -(q * math.log(q, 2) + (1 - q) * math.log(1 - q, 2)) end
    assert_close(u.expected[2], h2(0.9), 1e-6)
    assert_close(u.mutual_information[2], 1 - h2(0.9), 1e-5)
    assert_close(metrics.mutual_information(s, 2)[2], 1 - h2(0.9), 1e-5)
    assert_close(metrics.expected_entropy(s)[2], h2(0.9) * math.log(2), 1e-6)   -- nats by default
    assert_close(u.mean[2][1], 0.5, 1e-7)
  end)
  it("predict gives the per-pass probabilities as one (S, N, C) tensor", function()
    local gen = bbb.Generator(5)
    local net = bbb.nn.bayes_mlp({ 3, 6, 4 }, { rho_init = -1, generator = gen })
    local x = bbb.randn({ 5, 3 }, 0, 1, gen)
    gen:set_state(77, 0)
    local p, list = net:predict(x, { samples = 6, keep_samples = true })
    gen:set_state(77, 0)
    local p2, stack = net:predict(x, { samples = 6, keep_samples = "tensor" })
    assert.are.same({ 6, 5, 4 }, stack:size())
    assert.are.equal(0, (p - p2):abs():max():item())
    for s = 1, 6 do
      assert.are.equal(0, (stack[s] - list[s]):abs():max():item())
    end
    assert((stack:mean(1) - p):abs():max():item() < 1e-6)
    local a = metrics.uncertainty(stack).mutual_information
    local b = metrics.mutual_information(list)
    assert(((a - b):abs():max():item()) < 1e-6)
    assert.has_error(function() net:predict(x, { keep_samples = "list" }) end,
      'predict: keep_samples must be true, false or "tensor", got list')
  end)
end)

describe("MC dropout through predict", function()
  it("samples dropout layers whose mode is sample, and mode = mean turns them off", function()
    local gen = bbb.Generator(9)
    local net = bbb.nn.mlp({ 4, 16, 3 }, { dropout = 0.5, generator = gen })
    local x = bbb.randn({ 6, 4 }, 0, 1, gen)
    local _, plain = net:predict(x, { samples = 5, keep_samples = "tensor" })
    assert.are.equal(0, metrics.uncertainty(plain).mutual_information:max():item())
    net:apply(function(m) if m.__name == "Dropout" then m.mode = "sample" end end)
    local _, mc = net:predict(x, { samples = 5, keep_samples = "tensor" })
    assert(metrics.uncertainty(mc).mutual_information:max():item() > 1e-4)
    assert.are.equal(0, (net:predict(x, { mode = "mean" }) - plain[1]):abs():max():item())
    assert.are.equal("sample", net:children()[3].mode)   -- restored after predict
  end)
end)

describe("entropy at the extremes against float64", function()
  it("stays finite and non-negative for probabilities near 0 and 1", function()
    local tiny = { 1e-30, 1e-8, 1e-4 }
    for _, e in ipairs(tiny) do
      local got = metrics.entropy(bbb.tensor { { 1 - e, e } }, 2)[1]
      local q = e   -- float64 reference with the float32 value of 1 - e
      local one = bbb.tensor { 1 - e }[1]
      local want = 0
      if one > 0 then want = want - one * math.log(one, 2) end
      want = want - q * math.log(math.max(q, 1e-12), 2)
      assert(got >= 0 and got == got, tostring(got))
      assert(math.abs(got - want) <= 1e-6 + 1e-4 * want, ("e=%g got %.9g want %.9g"):format(e, got, want))
    end
    local u = metrics.uncertainty(bbb.tensor { { { 1 - 1e-7, 1e-7 } }, { { 1 - 2e-7, 2e-7 } } }, 2)
    assert(u.mutual_information[1] >= 0)
    assert(u.mutual_information[1] < 1e-6)
  end)
end)

describe("reliability bins", function()
  it("group rows by confidence and give each bin's accuracy and confidence", function()
    local p = bbb.tensor { { 0.95, 0.05 }, { 0.05, 0.95 }, { 0.55, 0.45 }, { 0.6, 0.4 } }
    local bins = metrics.reliability(p, { 1, 1, 2, 1 }, 10)
    assert.are.equal(10, #bins)
    assert.are.equal(2, bins[10].count)
    assert_close(bins[10].accuracy, 0.5)
    assert_close(bins[10].confidence, 0.95, 1e-6)
    assert.are.equal(1, bins[6].count)   -- 0.55 in (0.5, 0.6]
    assert.are.equal(0, bins[6].accuracy)
    assert.are.equal(1, bins[7].count)   -- 0.6 in float32 is just above 0.6
    assert.is_nil(bins[1].accuracy)
    assert_close(bins[3].lo, 0.2)
    assert_close(bins[3].hi, 0.3)
  end)
  it("ECE with 15 bins is 0 for a calibrated toy and the weighted gap otherwise", function()
    -- 10 rows at confidence 0.8 of which 8 right: calibrated
    local rows, ys = {}, {}
    for i = 1, 10 do rows[i] = { 0.8, 0.2 }; ys[i] = i <= 8 and 1 or 2 end
    assert_close(metrics.ece(bbb.tensor(rows), ys), 0, 1e-6)
    -- all right at 0.8: a gap of 0.2 in every row
    for i = 1, 10 do ys[i] = 1 end
    assert_close(metrics.ece(bbb.tensor(rows), ys), 0.2, 1e-6)
  end)
end)

describe("ece", function()
  it("is zero for a perfectly calibrated toy", function()
    local p = bbb.tensor { { 0.75, 0.25 }, { 0.75, 0.25 }, { 0.75, 0.25 }, { 0.75, 0.25 } }
    assert_close(metrics.ece(p, { 1, 1, 1, 2 }), 0)
  end)
  it("weights each bin's gap by its share of the rows", function()
    -- conf 0.9 right, conf 0.6 wrong, in different bins: (0.1 + 0.6) / 2
    local p = bbb.tensor { { 0.9, 0.1 }, { 0.6, 0.4 } }
    assert_close(metrics.ece(p, { 1, 2 }, 10), 0.35, 1e-6)
    -- one bin: |accuracy - mean confidence| = |0.5 - 0.75|
    assert_close(metrics.ece(p, { 1, 2 }, 1), 0.25, 1e-6)
    assert_close(metrics.ece(probs, labels, 1), math.abs(0.5 - (0.7 + 0.8 + 0.4 + 0.5) / 4), 1e-6)
  end)
end)

-- O(n^2) definition to check the ranks against.
local function auroc_pairs(pos, neg)
  local total = 0
  for _, a in ipairs(pos) do
    for _, b in ipairs(neg) do
      total = total + (a > b and 1 or a == b and 0.5 or 0)
    end
  end
  return total / (#pos * #neg)
end

-- Positives' and negatives' scores as one (scores, labels) pair.
local function labelled(pos, neg)
  local s, y = {}, {}
  for _, v in ipairs(pos) do s[#s + 1], y[#y + 1] = v, 1 end
  for _, v in ipairs(neg) do s[#s + 1], y[#y + 1] = v, 0 end
  return s, y
end

describe("auroc", function()
  it("is 1 when separated, 0 when reversed, 0.5 when all tied", function()
    assert.are.equal(1, metrics.auroc({ 0.9, 0.8, 0.1, 0.2 }, { 1, 1, 0, 0 }))
    assert.are.equal(0, metrics.auroc({ 0.1, 0.2, 0.9, 0.8 }, { 1, 1, 0, 0 }))
    assert.are.equal(0.5, metrics.auroc({ 3, 3, 3, 3, 3 }, { 1, 1, 1, 0, 0 }))
  end)
  it("takes booleans for labels, the positive class true", function()
    assert.are.equal(1, metrics.auroc({ 0.9, 0.1 }, { true, false }))
    assert.are.equal(0, metrics.auroc({ 0.9, 0.1 }, { false, true }))
  end)
  it("counts ties as half", function()
    assert.are.equal(0.5, metrics.auroc(labelled({ 1, 2, 3 }, { 2 })))
    assert.are.equal(3.5 / 6, metrics.auroc(labelled({ 0.8, 0.4 }, { 0.4, 0.1, 0.9 })))
  end)
  it("gives sklearn's documented example: y 0,0,1,1 and scores 0.1,0.4,0.35,0.8 -> 0.75", function()
    assert.are.equal(0.75, metrics.auroc({ 0.1, 0.4, 0.35, 0.8 }, { 0, 0, 1, 1 }))
  end)
  it("takes tensors", function()
    assert_close(metrics.auroc(bbb.tensor { 0.8, 0.4, 0.4, 0.1, 0.9 }, bbb.tensor { 1, 1, 0, 0, 0 }), 3.5 / 6)
  end)
  it("matches the pairwise definition on random scores with ties", function()
    local g = bbb.Generator(3)
    for trial = 1, 20 do
      local pos = bbb.rand({ trial + 3 }, 0, 5, g):totable()
      local neg = bbb.rand({ 2 * trial + 1 }, 0, 5, g):totable()
      for i, v in ipairs(pos) do pos[i] = math.floor(v) end
      for i, v in ipairs(neg) do neg[i] = math.floor(v) end
      assert_close(metrics.auroc(labelled(pos, neg)), auroc_pairs(pos, neg), 1e-12)
    end
  end)
end)

describe("aupr", function()
  it("gives sklearn's documented example: y 0,0,1,1 and scores 0.1,0.4,0.35,0.8 -> 5/6", function()
    -- thresholds 0.8 (P 1, R 1/2), 0.4 (P 1/2), 0.35 (P 2/3, R 1): 1/2 + 1/2 * 2/3
    assert_close(metrics.aupr({ 0.1, 0.4, 0.35, 0.8 }, { 0, 0, 1, 1 }), 5 / 6, 1e-12)
  end)
  it("puts tied scores at one threshold", function()
    -- 0.9: P 1, R 1/2; 0.5 (one positive, one negative): P 2/3, R 1
    assert_close(metrics.aupr({ 0.9, 0.5, 0.5, 0.1 }, { 1, 1, 0, 0 }), 5 / 6, 1e-12)
    -- all tied: one threshold, precision = the positives' share
    assert_close(metrics.aupr({ 2, 2, 2, 2 }, { 1, 0, 0, 0 }), 0.25, 1e-12)
  end)
  it("is 1 when the positives come first", function()
    assert.are.equal(1, metrics.aupr({ 5, 4, 1 }, { true, true, false }))
  end)
end)

describe("fpr_at_tpr", function()
  it("takes the highest threshold whose TPR reaches the level", function()
    local s, y = { 0.9, 0.8, 0.7, 0.6, 0.5 }, { 1, 0, 1, 0, 1 }
    assert.are.equal(1, metrics.fpr_at_tpr(s, y, 0.95))    -- all three positives: threshold 0.5
    assert.are.equal(1, metrics.fpr_at_tpr(s, y))          -- 0.95 by default
    assert.are.equal(0.5, metrics.fpr_at_tpr(s, y, 0.6))   -- two positives: threshold 0.7
    assert.are.equal(0, metrics.fpr_at_tpr(s, y, 1 / 3))   -- one: threshold 0.9
  end)
  it("puts tied scores at one threshold", function()
    assert.are.equal(0.5, metrics.fpr_at_tpr({ 0.9, 0.5, 0.5, 0.1 }, { 1, 1, 0, 0 }, 0.95))
  end)
end)

describe("detection", function()
  it("scores an out-of-distribution set against an in-distribution one", function()
    -- out 0.3, 0.15 against in 0.1, 0.2: 3 of 4 pairs ordered
    local d = metrics.detection({ 0.1, 0.2 }, { 0.3, 0.15 })
    assert.are.equal(0.75, d.auroc)
    assert_close(d.aupr_out, 5 / 6, 1e-12)   -- 0.3: P 1, R 1/2; 0.15: P 2/3, R 1
    assert_close(d.aupr_in, 5 / 6, 1e-12)    -- negated: -0.1: P 1; -0.2: P 2/3
    assert.are.equal(0.5, d.fpr95)           -- both outs at 0.15 let 0.2 in
  end)
end)

describe("brier", function()
  it("is the mean squared distance to the one-hot label", function()
    -- rows: 0.09+0.04+0.01, 0.01+0.04+0.01, 0.49+0.09+0.16, 0.25+0.0625+0.5625
    assert_close(metrics.brier(probs, labels), (0.14 + 0.06 + 0.74 + 0.875) / 4, 1e-6)
    assert.are.equal(0, metrics.brier(bbb.tensor { { 1, 0 } }, { 1 }))
    assert.are.equal(2, metrics.brier(bbb.tensor { { 1, 0 } }, { 2 }))
  end)
end)

describe("risk_coverage and aurc", function()
  it("gives the error rate among the kept examples at each distinct confidence", function()
    local curve = metrics.risk_coverage({ 0.9, 0.8, 0.8, 0.3 }, { 1, 0, 1, 0 })
    assert.are.same({ 0.25, 0.75, 1 }, curve.coverage)
    assert.are.equal(0, curve.risk[1])
    assert_close(curve.risk[2], 1 / 3, 1e-12)
    assert.are.equal(0.5, curve.risk[3])
  end)
  it("aurc is the mean selective risk over k = 1..n", function()
    -- risks 0, 1/2, 1/3, 1/2
    assert_close(metrics.aurc({ 0.9, 0.8, 0.7, 0.3 }, { 1, 0, 1, 0 }), (0 + 0.5 + 1 / 3 + 0.5) / 4, 1e-12)
    assert.are.equal(0, metrics.aurc({ 0.9, 0.3 }, { true, true }))
  end)
  it("aurc spreads a tie group's errors evenly", function()
    -- 0.8 ties one right and one wrong: expected risks 0.5/2 and 1/3
    assert_close(metrics.aurc({ 0.9, 0.8, 0.8, 0.3 }, { 1, 0, 1, 0 }), (0 + 0.25 + 1 / 3 + 0.5) / 4, 1e-12)
  end)
end)

describe("errors name the function", function()
  local function assert_error_has(fn, text)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(text, 1, true), tostring(err))
  end
  it("for shapes", function()
    assert_error_has(function() metrics.accuracy(bbb.zeros(4), labels) end,
      "accuracy: probs must be a (N, C) tensor, got 4")
    assert_error_has(function() metrics.nll(probs, { 1, 2 }) end, "nll: 2 labels for 4 rows")
    assert_error_has(function() metrics.ece(probs, { 1, 2, 3, 4 }) end,
      "ece: label 4 is 4, expected a class in 1..3")
    assert_error_has(function() metrics.mutual_information { probs, bbb.zeros(4, 2) } end,
      "mutual_information: sample 2 is 4x2, sample 1 is 4x3")
    assert_error_has(function() metrics.entropy("x") end, "entropy: probs must be a (N, C) tensor, got string")
  end)
  it("for empty input", function()
    assert_error_has(function() metrics.accuracy(bbb.zeros(0, 3), {}) end, "accuracy: empty input (0x3)")
    assert_error_has(function() metrics.mutual_information {} end,
      "mutual_information: expects a (S, N, C) tensor or a non-empty list of (N, C) tensors")
    assert_error_has(function() metrics.uncertainty(bbb.zeros(2, 3)) end,
      "uncertainty: samples must be a (S, N, C) tensor or a list of (N, C) tensors, got 2x3")
    assert_error_has(function() metrics.entropy(probs, 1) end, "entropy: base must be a number > 1 (2 for bits), got 1")
    assert_error_has(function() metrics.reliability(probs, labels, 1.5) end,
      "reliability: n_bins must be an integer in [1, 10^6], got 1.5")
    assert_error_has(function() metrics.ece(probs, labels, 0) end, "ece: n_bins must be an integer in [1, 10^6]")
  end)
  it("for degenerate binary input", function()
    assert_error_has(function() metrics.auroc({ 0.1, 0.2 }, { 1, 1 }) end,
      "auroc: labels hold one class only (2 positive of 2)")
    assert_error_has(function() metrics.aupr({ 0.1, 0.2 }, { 0, 0 }) end, "aupr: labels hold one class only")
    assert_error_has(function() metrics.auroc({}, {}) end, "auroc: labels hold one class only (0 positive of 0)")
    assert_error_has(function() metrics.auroc({ 0.1, 0 / 0 }, { 1, 0 }) end, "auroc: score 2 is")
    assert_error_has(function() metrics.aupr({ 0.1, 0.2, 0.3 }, { 1, 0 }) end, "aupr: 3 scores for 2 labels")
    assert_error_has(function() metrics.fpr_at_tpr({ 0.1, 0.2 }, { 2, 0 }) end,
      "fpr_at_tpr: label 1 is 2, expected 1/0 or true/false")
    assert_error_has(function() metrics.fpr_at_tpr({ 0.1, 0.2 }, { 1, 0 }, 0) end,
      "fpr_at_tpr: level must be a number in (0, 1], got 0")
    assert_error_has(function() metrics.detection({}, { 1 }) end, "detection: 0 in-distribution and 1 out")
    assert_error_has(function() metrics.brier(probs, { 1, 2 }) end, "brier: 2 labels for 4 rows")
    assert_error_has(function() metrics.aurc({}, {}) end, "aurc: empty input")
    assert_error_has(function() metrics.aurc({ 0 / 0 }, { 1 }) end, "aurc: confidence 1 is")
    assert_error_has(function() metrics.risk_coverage({ 0.5 }, { 1, 0 }) end,
      "risk_coverage: 1 confidences for 2 correctness flags")
    assert_error_has(function() metrics.risk_coverage({ 0.5 }, { 0.5 }) end, "risk_coverage: correct 1 is 0.5")
  end)
end)

describe("probabilities that are not", function()
  local function message(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    return (tostring(err):gsub("^[^\n]-:%d+: ", ""))
  end
  local good = { { 0.2, 0.8 }, { 0.5, 0.5 }, { 1, 0 } }
  local function with_row(row)
    local rows = { good[1], good[2], row }
    return bbb.tensor(rows)
  end

  it("are refused by nll, brier, ece, reliability and entropy, naming the row and what is wrong", function()
    local calls = {
      nll = function(p) return metrics.nll(p, { 1, 2, 1 }) end,
      brier = function(p) return metrics.brier(p, { 1, 2, 1 }) end,
      ece = function(p) return metrics.ece(p, { 1, 2, 1 }) end,
      reliability = function(p) return metrics.reliability(p, { 1, 2, 1 }) end,
      entropy = function(p) return metrics.entropy(p) end,
    }
    for name, call in pairs(calls) do
      assert.are.equal(name .. ": row 3 sums to 1.7, not 1: pass probabilities (softmax), not logits",
        message(function() call(with_row { 0.9, 0.8 }) end))
      assert.are.equal(name .. ": row 3 holds -0.5, below 0: pass probabilities (softmax), not logits",
        message(function() call(with_row { 1.5, -0.5 }) end))
      assert.are.equal(name .. ": row 3 holds 3, above 1: pass probabilities (softmax), not logits",
        message(function() call(with_row { 3, 1 }) end))
      assert.are.equal(name .. ": row 3 holds inf, above 1: pass probabilities (softmax), not logits",
        message(function() call(with_row { math.huge, 0 }) end))
      assert.are.equal(name .. ": row 3 holds NaN: the inputs or the model are not finite",
        message(function() call(with_row { 0 / 0, 1 }) end))
      -- float32 rounding of a softmax or of a mean over passes is no reason
      assert.has_no.errors(function() call(with_row { 0.3 + 1e-6, 0.7 }) end)
      assert.has_no.errors(function() call(bbb.tensor(good)) end)
    end
  end)
  it("are refused in per-pass samples too, naming the sample and the row", function()
    local ok_pass = bbb.tensor(good)
    local bad_pass = bbb.tensor { good[1], { 0.5, 0.6 }, good[3] }
    for _, name in ipairs { "uncertainty", "mutual_information", "expected_entropy" } do
      assert.are.equal(name .. ": sample 2 row 2 sums to 1.1, not 1: pass probabilities (softmax), not logits",
        message(function() metrics[name] { ok_pass, bad_pass } end))
      local stacked = bbb.cat({ ok_pass:reshape(1, 3, 2), bad_pass:reshape(1, 3, 2) }, 1)
      assert.are.equal(name .. ": sample 2 row 2 sums to 1.1, not 1: pass probabilities (softmax), not logits",
        message(function() metrics[name](stacked) end))
    end
  end)
  it("logits, the mistake the check is for", function()
    local logits = bbb.tensor { { 2, -1, 0.5 }, { 0.1, 0.2, 3 } }
    assert.truthy(message(function() metrics.nll(logits, { 1, 3 }) end):find("nll: row 1 holds -1, below 0", 1, true))
    assert.is_true(metrics.nll(logits:softmax(2), { 1, 3 }) > 0)
  end)
  it("passes the MC average of many softmax passes", function()
    local g = bbb.Generator(2)
    local passes = {}
    for s = 1, 50 do passes[s] = bbb.randn({ 100, 10 }, 0, 3, g):softmax(2):reshape(1, 100, 10) end
    local mean = bbb.cat(passes, 1):mean(1)
    local labels = {}
    for i = 1, 100 do labels[i] = i % 10 + 1 end
    assert.is_true(metrics.ece(mean, labels) >= 0)
    assert.are.same({ 100 }, metrics.entropy(mean):size())
  end)
end)

describe("regression scores", function()
  it("crps_gaussian: hand-computed cases, scale and the far tail", function()
    -- z = 0: 2 phi(0) - 1/sqrt(pi) = (sqrt 2 - 1) / sqrt(pi)
    assert.near((math.sqrt(2) - 1) / math.sqrt(math.pi), metrics.crps_gaussian({ 0 }, { 1 }, { 0 }), 1e-7)
    -- far out, the score is the distance less std / sqrt(pi)
    assert.near(8 - 1 / math.sqrt(math.pi), metrics.crps_gaussian({ 0 }, { 1 }, { 8 }), 1e-6)
    -- CRPS(N(m, s^2), y) = s CRPS(N(0, 1), (y - m) / s): scipy's value in float64 is 0.6628070625097116
    assert.near(0.6628070625097116, metrics.crps_gaussian({ 0 }, { 2 }, { 1 }), 1e-6)
    assert.near(2 * metrics.crps_gaussian({ 0 }, { 1 }, { 0.5 }), metrics.crps_gaussian(bbb.tensor { 3 }, bbb.tensor { 2 }, bbb.tensor { 4 }), 1e-7)
    -- the mean over rows
    local a, b = metrics.crps_gaussian({ 0 }, { 1 }, { 0 }), metrics.crps_gaussian({ 0 }, { 1 }, { 8 })
    assert.near((a + b) / 2, metrics.crps_gaussian({ 0, 0 }, { 1, 1 }, { 0, 8 }), 1e-7)
  end)
  it("interval: coverage and width of the central interval", function()
    local r = metrics.interval({ 0, 0, 0 }, { 1, 1, 1 }, { 0, 1.9, 2.0 }, 0.95)
    assert.near(2 / 3, r.coverage, 1e-12)
    assert.near(2 * 1.959963984540054, r.width, 1e-5)
    assert.near(2 * 0.6744897501960817, metrics.interval({ 5 }, { 1 }, { 5 }, 0.5).width, 1e-5)
  end)
  it("Student's t: quantiles, CDF and normaliser against float64 references at the extremes", function()
    -- scipy.stats.t.ppf((1 + level) / 2, df) in float64
    for _, c in ipairs { { 0.95, 1, 12.706204736432095 }, { 0.95, 2, 4.302652729911275 }, { 0.95, 3, 3.182446305284263 },
                         { 0.95, 30, 2.0422724563012373 }, { 0.5, 4, 0.7406970840912249 }, { 0.9, 3, 2.3533634348018264 },
                         { 0.9999, 1, 6366.1976656379375 }, { 0.5, 1, 1 } } do
      assert.near(c[3], metrics.interval_multiplier(c[1], c[2]), 1e-8 * c[3])
    end
    -- many degrees of freedom approach the normal's 1.959964
    assert.near(1.959963984540054, metrics.interval_multiplier(0.95, 100000), 1e-4)
    assert.near(1.959963984540054, metrics.interval_multiplier(0.95), 1e-5)   -- erf to 1.5e-7
    -- scipy.stats.t.cdf(1.5, df) and math.lgamma((df+1)/2) - math.lgamma(df/2) - log(df pi)/2
    for _, c in ipairs { { 1, 0.8128329581890013, -1.1447298858494004 }, { 2, 0.8638034375544996, -1.039720770839918 },
                         { 5, 0.9030481598787634, -0.9686195890547249 }, { 100, 0.9316174709376556, -0.9214384915430309 } } do
      assert.near(c[2], metrics.student_t_cdf(1.5, c[1]), 1e-12)
      assert.near(1 - c[2], metrics.student_t_cdf(-1.5, c[1]), 1e-12)
      assert.near(c[3], metrics.student_t_lognorm(c[1]), 1e-12)
    end
    -- the far tail of the Cauchy (df 1): scipy 0.007956089912025812
    assert.near(0.007956089912025812, metrics.student_t_cdf(-40, 1), 1e-15)
    assert.near(0.5, metrics.student_t_cdf(0, 7), 1e-15)
    local r = metrics.interval({ 0, 0 }, { 1, 1 }, { 3, 3.3 }, 0.95, 3)
    assert.near(0.5, r.coverage, 1e-12)
    assert.near(2 * 3.182446305284263, r.width, 1e-8)
    require("helpers").errors_with(function() metrics.interval_multiplier(0.9, 2.5) end,
      "interval_multiplier: df must be a positive integer, got 2.5")
    require("helpers").errors_with(function() metrics.student_t_lognorm(0) end,
      "student_t_lognorm: df must be a positive integer, got 0")
  end)
  it("crps_samples: hand-computed cases; one draw is the absolute error; many approach the Gaussian", function()
    -- draws {0, 2}, y = 1: (1 + 1)/2 - (2 + 2)/(2 * 4) = 0.5
    assert.near(0.5, metrics.crps_samples({ { 0 }, { 2 } }, { 1 }), 1e-12)
    -- draws {0, 1, 2}, y = 0: (0 + 1 + 2)/3 - 2 (1 + 2 + 1)/(2 * 9) = 5/9
    assert.near(5 / 9, metrics.crps_samples(bbb.tensor { { 1 }, { 0 }, { 2 } }, { 0 }), 1e-12)
    assert.near(2, metrics.crps_samples({ { 3 } }, { 1 }), 1e-12)
    -- two rows: the mean of the rows' scores
    assert.near((0.5 + 2) / 2, metrics.crps_samples({ { 0, 3 }, { 2, 3 } }, { 1, 1 }), 1e-12)
    -- many draws of N(0.5, 2^2): near the closed form (its s.e. here is about 0.005)
    local draws = bbb.randn({ 20000, 1 }, 0, 1, bbb.Generator(3)) * 2 + 0.5
    assert.near(metrics.crps_gaussian({ 0.5 }, { 2 }, { 1.5 }), metrics.crps_samples(draws, { 1.5 }), 0.03)
    require("helpers").errors_with(function() metrics.crps_samples({ { 0, 1 } }, { 1 }) end,
      "crps_samples: samples[1] holds 2 draws for 1 targets")
  end)
  it("refuse degenerate input, naming the function", function()
    require("helpers").errors_with(function() metrics.crps_gaussian({ 0 }, { 0 }, { 1 }) end, "crps_gaussian: std[1] is 0")
    require("helpers").errors_with(function() metrics.crps_gaussian({ 0, 1 }, { 1 }, { 1 }) end, "crps_gaussian: 2 means, 1 standard")
    require("helpers").errors_with(function() metrics.crps_gaussian({ 0 / 0 }, { 1 }, { 1 }) end, "crps_gaussian: mean[1] is")
    require("helpers").errors_with(function() metrics.crps_gaussian({}, {}, {}) end, "crps_gaussian: mean must be a non-empty")
    require("helpers").errors_with(function() metrics.interval({ 0 }, { 1 }, { 0 }, 1) end, "interval: level must be in (0, 1)")
  end)
end)

-- bbb.nn.prune: which weights go, the masks, MC samples that respect them,
-- checkpoints that keep them, and bad input.
local bbb = require "bbb"

local function count(t) return t:sum():item() end

local function net_with(seed)
  local g = bbb.Generator(seed)
  local net = bbb.nn.bayes_mlp({ 7, 6, 4 }, { generator = g, rho_init = -3 })
  -- spread the sigmas so SNR and |mu| rank differently
  bbb.no_grad(function()
    for _, l in ipairs { net.children and net:children()[1], net:children()[3] } do
      l.weight_rho:copy(bbb.rand(l.weight_rho:size(), -6, 0, g))
      l.bias_rho:copy(bbb.rand(l.bias_rho:size(), -6, 0, g))
    end
  end)
  return net
end

-- every score in one flat list, computed here in float64 from the parameters
local function reference_scores(net, by)
  local out = {}
  for _, i in ipairs { 1, 3 } do
    local l = net:children()[i]
    for _, pair in ipairs { { l.weight_mu, l.weight_rho }, { l.bias_mu, l.bias_rho } } do
      local mu = pair[1]:reshape{ pair[1]:numel() }:totable()
      local rho = pair[2]:reshape{ pair[2]:numel() }:totable()
      for k = 1, #mu do
        local sigma = math.log(1 + math.exp(rho[k]))
        out[#out + 1] = by == "snr" and math.abs(mu[k]) / sigma or math.abs(mu[k])
      end
    end
  end
  return out
end

local function flat_masks(masks)
  local out = {}
  for _, m in ipairs(masks) do
    for _, t in ipairs { m.weight, m.bias } do
      for _, v in ipairs(t:reshape{ t:numel() }:totable()) do out[#out + 1] = v end
    end
  end
  return out
end

describe("bbb.nn.prune", function()
  it("removes exactly the requested fraction, lowest scores first, by SNR and by |mu|", function()
    for _, by in ipairs { "snr", "magnitude" } do
      for _, f in ipairs { 0, 0.1, 0.5, 0.9, 1 } do
        local net = net_with(3)
        local ref = reference_scores(net, by)
        local masks, info = bbb.nn.prune(net, { fraction = f, by = by })
        local N = 7 * 6 + 6 + 6 * 4 + 4
        assert.are.equal(N, info.total)
        assert.are.equal(math.floor(f * N + 0.5), info.removed)
        assert.are.equal(2, #masks)
        assert.are.same({ "1", "3" }, { masks[1].name, masks[2].name })
        local keep = flat_masks(masks)
        local kept, max_removed, min_kept = 0, -math.huge, math.huge
        for k, v in ipairs(keep) do
          if v == 1 then
            kept = kept + 1
            min_kept = math.min(min_kept, ref[k])
          else
            assert.are.equal(0, v)
            max_removed = math.max(max_removed, ref[k])
          end
        end
        assert.are.equal(N - info.removed, kept)
        -- every removed weight scores no higher than every kept one (float32
        -- against float64: a relative tolerance)
        if kept > 0 and kept < N then assert.is_true(max_removed <= min_kept * (1 + 1e-5), by .. " " .. f) end
      end
    end
  end)

  it("ranks by SNR differently from |mu| when the sigmas differ", function()
    local a, b = net_with(5), net_with(5)
    local ma = flat_masks((bbb.nn.prune(a, { fraction = 0.5, by = "snr" })))
    local mb = flat_masks((bbb.nn.prune(b, { fraction = 0.5, by = "magnitude" })))
    local differ = 0
    for k = 1, #ma do if ma[k] ~= mb[k] then differ = differ + 1 end end
    assert.is_true(differ > 0)
  end)

  it("sets the removed means to 0 and keeps them 0 in every MC sample and in every estimator", function()
    for _, est in ipairs { "weight", "local", "flipout" } do
      local g = bbb.Generator(11)
      local net = bbb.nn.bayes_mlp({ 5, 3 }, { generator = g, rho_init = 0, estimator = est })
      local l = net:children()[1]
      local masks = bbb.nn.prune(net, { fraction = 1 })
      assert.are.equal(0, count(masks[1].weight) + count(masks[1].bias))
      assert.are.equal(0, count(l.weight_mu:abs()) + count(l.bias_mu:abs()))
      -- sigma = softplus(0) ~ 0.69: without the mask the output would be noise
      local x = bbb.randn({ 8, 5 }, 0, 1, g)
      for _ = 1, 5 do
        local y = net:forward(x)
        if est == "local" then
          -- the local estimator's sqrt(var + 1e-16) floor: 1e-8 per unit noise
          assert.is_true(y:abs():max():item() < 1e-6, est)
        else
          assert.are.equal(0, count(y:abs()), est)
        end
      end
    end
  end)

  it("leaves the kept weights random in MC samples and their means untouched", function()
    local g = bbb.Generator(12)
    local net = bbb.nn.bayes_mlp({ 4, 2 }, { generator = g, rho_init = -1, bias = false })
    local l = net:children()[1]
    local before = l.weight_mu:clone()
    bbb.nn.prune(net, { fraction = 0.5 })
    local m = l.weight_mask
    assert.are.equal(4, count(m))
    assert.are.equal(0, count((l.weight_mu - before * m):abs()))
    -- the identity as input: the output rows are the sampled weight columns
    local eye = bbb.tensor{ { 1, 0, 0, 0 }, { 0, 1, 0, 0 }, { 0, 0, 1, 0 }, { 0, 0, 0, 1 } }
    local y1, y2 = net:forward(eye):t(), net:forward(eye):t()
    assert.are.equal(0, count((y1 * (1 - m)):abs()))
    assert.is_true(count(((y1 - y2) * m):abs()) > 0)
  end)

  it("a pruned model saved and loaded stays pruned, in mean and sample mode", function()
    local net = net_with(7)
    bbb.nn.prune(net, { fraction = 0.75 })
    local path = os.tmpname()
    bbb.save(path, net)
    local back = bbb.load(path)
    os.remove(path)
    local l0, l1 = net:children()[1], back:children()[1]
    assert.truthy(l1.weight_mask)
    assert.are.equal(0, count((l0.weight_mask - l1.weight_mask):abs()))
    assert.are.equal(0, count((l0.bias_mask - l1.bias_mask):abs()))
    local x = bbb.randn{ 6, 7 }
    local a = net:predict(x, { mode = "mean" })
    local b = back:predict(x, { mode = "mean" })
    assert.are.equal(0, count((a - b):abs()))
    -- a removed weight stays removed when sampling the loaded model: with
    -- no bias and the identity as input, the outputs are the sampled weights
    local nb = bbb.nn.bayes_mlp({ 7, 6 }, { bias = false, rho_init = -1, generator = bbb.Generator(4) })
    bbb.nn.prune(nb, { fraction = 0.5 })
    bbb.save(path, nb)
    local nb2 = bbb.load(path)
    os.remove(path)
    local m = nb2:children()[1].weight_mask
    assert.are.equal(21, count(m))
    local eye = bbb.zeros{ 7, 7 }
    for i = 1, 7 do eye:set(i, i, 1) end
    local _, _, samples = nb2:predict(eye, { samples = 4, keep_samples = true, likelihood = "gaussian" })
    for _, y in ipairs(samples) do
      assert.are.equal(0, count((y:t() * (1 - m)):abs()))
    end
    assert.is_true(count(((samples[1] - samples[2]):t() * m):abs()) > 0)
    -- the clone keeps the masks too
    local c = back:clone()
    assert.are.equal(0, count((c:children()[3].weight_mask - back:children()[3].weight_mask):abs()))
  end)

  it("pruning again at a larger fraction removes a superset", function()
    local net = net_with(9)
    local m1 = flat_masks((bbb.nn.prune(net, { fraction = 0.3 })))
    local m2 = flat_masks((bbb.nn.prune(net, { fraction = 0.6 })))
    for k = 1, #m1 do assert.is_true(m2[k] <= m1[k]) end
  end)

  it("refuses bad input with a message naming the argument", function()
    local net = net_with(1)
    for _, f in ipairs { -0.1, 1.5, 0 / 0, "half" } do
      local ok, err = pcall(bbb.nn.prune, net, { fraction = f })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("bbb.nn.prune: fraction must be a number in [0, 1], got " .. tostring(f), 1, true), err)
    end
    local ok, err = pcall(bbb.nn.prune, net, { fraction = 0.5, by = "size" })
    assert.is_false(ok)
    assert.truthy(err:find('by must be "snr" or "magnitude", got size', 1, true), err)
    ok, err = pcall(bbb.nn.prune, bbb.nn.mlp{ 4, 3, 2 }, { fraction = 0.5 })
    assert.is_false(ok)
    assert.truthy(err:find("the model has no Bayesian layers (BayesLinear) to prune", 1, true), err)
    ok, err = pcall(bbb.nn.prune, 42, { fraction = 0.5 })
    assert.is_false(ok)
    assert.truthy(err:find("net must be a module, got number", 1, true), err)
    ok, err = pcall(net:children()[1].set_mask, net:children()[1], bbb.ones{ 2, 2 }, bbb.ones{ 6 })
    assert.is_false(ok)
    assert.truthy(err:find("weight_mask must be a tensor of size 6x7, got 2x2", 1, true), err)
  end)
end)

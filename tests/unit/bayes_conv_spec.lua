-- Convolutional layers: BayesConv2d's gradients and estimator statistics,
-- Conv2d, pooling modules, lenet, bayesian (MOPED), pruning, checkpoints,
-- printing, help and bad input.
local bbb = require "bbb"
local nn = bbb.nn

local gen = bbb.Generator(31)
local function check(fn, inputs, opts)
  local ok, report = bbb.testing.gradcheck(fn, inputs, opts)
  assert(ok, report)
end
local function size(t) return table.concat(t:size(), "x") end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

describe("BayesConv2d", function()
  local function fixed_noise(layer, x, out)
    local B = x:size(1)
    return { w = bbb.randn(layer.weight_mu:size(), 0, 1, gen), b = bbb.randn({ layer.out_channels }, 0, 1, gen),
             out = bbb.randn(out:size(), 0, 1, gen),
             s_in = bbb.rand({ B, layer.in_channels, 1, 1 }, 0, 1, gen):lt(0.5) * 2 - 1,
             s_out = bbb.rand({ B, layer.out_channels, 1, 1 }, 0, 1, gen):lt(0.5) * 2 - 1 }
  end
  for _, est in ipairs { "weight", "local", "flipout" } do
    for _, kl in ipairs { "mc", "analytic" } do
      it("gradcheck, estimator " .. est .. ", kl " .. kl, function()
        local p = kl == "analytic" and bbb.prior.Gaussian{ sigma = 0.5 }
          or bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-1) }
        local layer = nn.BayesConv2d(2, 3, { 2, 3 }, { prior = p, estimator = est, kl = kl, rho_init = -1,
          stride = { 1, 2 }, padding = 1, generator = gen })
        local x = bbb.randn({ 2, 2, 4, 5 }, 0, 1, gen):requires_grad(true)
        layer.noise = fixed_noise(layer, x, layer:forward(x))
        local proj = bbb.rand(layer:forward(x):size(), 0.5, 1.5, gen)
        check(function() return (layer:forward(x) * proj):sum() + layer:kl() * 0.1 end,
          { x, layer.weight_mu, layer.weight_rho, layer.bias_mu, layer.bias_rho }, { atol = 3e-3, rtol = 2e-2 })
      end)
    end
  end

  -- Over S forwards each output's mean and variance must match its exact
  -- marginal: mean conv(x, mu) + b_mu, variance conv(x^2, sigma^2) + sigma_b^2,
  -- whatever the estimator.
  local function moments(est, S)
    local g = bbb.Generator(7)
    local layer = nn.BayesConv2d(2, 2, 3, { estimator = est, rho_init = -1, padding = 1, generator = g })
    local x = bbb.rand({ 2, 2, 4, 4 }, 0.2, 1, g)
    local sum, sq, cross
    bbb.no_grad(function()
      for _ = 1, S do
        local y = layer:forward(x)
        sum = sum and sum + y or y
        sq = sq and sq + y:square() or y:square()
        -- outputs at two positions of one image: a shared weight sample correlates them
        local a, b = y:narrow(3, 1, 1):narrow(4, 1, 1), y:narrow(3, 1, 1):narrow(4, 2, 1)
        cross = cross and cross + a * b or a * b
      end
    end)
    local mean = sum / S
    local var = sq / S - mean:square()
    local ref_mean, ref_var = bbb.no_grad(function()
      return bbb.conv2d(x, layer.weight_mu, layer.bias_mu, { padding = 1 }),
        bbb.conv2d(x:square(), layer.weight_rho:softplus():square(), layer.bias_rho:softplus():square(), { padding = 1 })
    end)
    local ma, mb = mean:narrow(3, 1, 1):narrow(4, 1, 1), mean:narrow(3, 1, 1):narrow(4, 2, 1)
    local cov = cross / S - ma * mb
    local va, vb = var:narrow(3, 1, 1):narrow(4, 1, 1), var:narrow(3, 1, 1):narrow(4, 2, 1)
    return mean, var, ref_mean, ref_var, (cov / (va * vb):sqrt()):mean():item()
  end

  for _, est in ipairs { "weight", "local", "flipout" } do
    it("estimator " .. est .. " is unbiased, with the exact marginal variance", function()
      local S = 2000
      local mean, var, ref_mean, ref_var = moments(est, S)
      local se = (ref_var / S):sqrt()
      local z = ((mean - ref_mean):abs() / se):max():item()
      assert(z < 5, ("mean off by %.2f standard errors"):format(z))
      -- the sample variance's relative standard error is about sqrt(2 / S)
      local rel = ((var - ref_var):abs() / ref_var):max():item()
      assert(rel < 5 * math.sqrt(2 / S), ("variance off by %.1f%%"):format(100 * rel))
    end)
  end
  it("local reparameterization drops the correlation between positions that weight sampling has", function()
    local _, _, _, _, r_weight = moments("weight", 1000)
    local _, _, _, _, r_local = moments("local", 1000)
    assert(r_weight > 0.3, ("weight sampling: correlation %.3f"):format(r_weight))
    assert(math.abs(r_local) < 0.1, ("local: correlation %.3f"):format(r_local))
  end)

  it("mode = mean is the convolution with the posterior means", function()
    local layer = nn.BayesConv2d(3, 4, 3, { mode = "mean", stride = 2, generator = gen }):evaluate()
    local x = bbb.randn({ 2, 3, 7, 7 }, 0, 1, gen)
    local ref = bbb.conv2d(x, layer.weight_mu, layer.bias_mu, { stride = 2 })
    assert.are.equal(0, (layer:forward(x) - ref):abs():max():item())
  end)

  it("prints, explains itself and rejects bad input naming the layer", function()
    local layer = nn.BayesConv2d(1, 6, 5, { padding = 2, prior = bbb.prior.Gaussian{ sigma = 0.1 }, estimator = "local" })
    assert.are.equal("BayesConv2d(1 -> 6, 5x5, padding 2, prior=Gaussian{sigma=0.1}, estimator=local)", tostring(layer))
    assert.truthy(require("bbb.help").text(layer):find("posterior over every weight of a convolution", 1, true))
    assert.has_error(function() layer:forward(bbb.zeros(2, 3, 28, 28)) end,
      "BayesConv2d: input of size 2x3x28x28 does not match the layer's 1 input channels (expected batch x 1 x height x width)")
    assert.has_error(function() nn.BayesConv2d(1, 6, 9):forward(bbb.zeros(1, 1, 4, 4)) end,
      "BayesConv2d(1 -> 6, 9x9): bbb.conv2d: kernel 9x9 (dilation 1x1) is larger than the padded input 4x4 "
      .. "(input (1, 1, 4, 4), padding 0x0): the output would be empty")
    assert.has_error(function() nn.BayesConv2d(3, 4, 3, { groups = 2 }) end,
      "BayesConv2d: in_channels 3 and out_channels 4 must be multiples of groups 2")
    assert.has_error(function() nn.BayesConv2d(3, 4, { 3, 0 }) end,
      "BayesConv2d: kernel_size must be an integer >= 1 or a pair of them, got {3, 0}")
    assert.has_error(function() nn.BayesConv2d(3, 4, 3, { estimator = "magic" }) end,
      'BayesConv2d: estimator must be one of "flipout", "local", "weight", got magic')
    assert.has_error(function() nn.BayesConv2d(3, 4, 3, { kl = "analytic" }) end,
      'BayesConv2d: kl = "analytic" needs a Gaussian prior, got ScaleMixture{pi=0.5, sigma1=1, sigma2=0.00247875}')
    local bad = nn.BayesConv2d(1, 2, 1, { prior = { log_prob = function(_, w) return w end } })
    assert.has_error(function() bad:forward(bbb.zeros(1, 1, 2, 2)) end,
      "BayesConv2d: the Lua prior's log_prob must return a one-element tensor, got a tensor of size 2x1x1x1")
  end)

  it("trains with a prior written in Lua and a Laplace prior", function()
    local student = { log_prob = function(_, w) return ((w:square() + 1):log() * -1):sum() end }
    for _, p in ipairs { student, bbb.prior.Laplace{ b = 0.5 } } do
      local layer = nn.BayesConv2d(1, 2, 3, { prior = p, generator = gen })
      local y = layer:forward(bbb.randn({ 2, 1, 5, 5 }, 0, 1, gen))
      local loss = y:square():sum() + layer:kl()
      loss:backward()
      assert.truthy(layer.weight_rho.grad and layer.weight_mu.grad)
    end
  end)
end)

describe("Conv2d and the pooling modules", function()
  it("compute conv2d and pooling, and print their geometry", function()
    local c = nn.Conv2d(2, 4, { 3, 2 }, { stride = 2, padding = { 1, 0 }, generator = gen })
    local x = bbb.randn({ 3, 2, 9, 8 }, 0, 1, gen)
    local ref = bbb.conv2d(x, c.weight, c.bias, { stride = 2, padding = { 1, 0 } })
    assert.are.equal(0, (c:forward(x) - ref):abs():max():item())
    assert.are.equal("Conv2d(2 -> 4, 3x2, stride 2, padding 1x0)", tostring(c))
    assert.are.equal("MaxPool2d(2x2)", tostring(nn.MaxPool2d(2)))
    assert.are.equal("AvgPool2d(3x3, stride 2x2, padding 1x1)", tostring(nn.AvgPool2d(3, { stride = 2, padding = 1 })))
    assert.are.equal("3x4x2x2", size(nn.MaxPool2d(2):forward(c:forward(x))))
    assert.has_error(function() nn.MaxPool2d(4):forward(bbb.zeros(1, 1, 2, 2)) end,
      "MaxPool2d(4x4): bbb.max_pool2d: kernel 4x4 (dilation 1x1) is larger than the padded input 2x2 "
      .. "(input (1, 1, 2, 2), padding 0x0): the output would be empty")
    assert.has_error(function() nn.View(1, 28, 28):forward(bbb.zeros(2, 783)) end,
      "View: input of size 2x783 does not hold batch x 1x28x28")
  end)
end)

describe("lenet", function()
  local x = bbb.rand({ 3, 784 }, 0, 1, gen)
  for _, est in ipairs { "weight", "local", "flipout" } do
    it("a Bayesian LeNet with estimator " .. est .. " saves, loads and predicts the same", function()
      local net = nn.lenet{ bayes = true, estimator = est, channels = { 4, 6 }, hidden = { 12 }, generator = gen }
      net:forward(x)
      local path = tmp .. "/lenet-" .. est .. ".st"
      bbb.save(path, net)
      local back = bbb.load(path)
      assert.are.equal(tostring(net), tostring(back))
      local a = net:predict(x, { mode = "mean" })
      local b = back:predict(x, { mode = "mean" })
      assert.are.equal(0, (a - b):abs():max():item())
    end)
  end
  it("plain and dropout variants; SNR pruning reaches the convolutions and survives a checkpoint", function()
    assert.truthy(tostring(nn.lenet{ bayes = false, dropout = 0.3 }):find("Dropout(0.3)", 1, true))
    local net = nn.lenet{ channels = { 4, 6 }, hidden = { 12 }, generator = gen }
    local snr = net.layers[2]:snr()
    assert.are.equal("4x1x5x5", size(snr))
    nn.prune(net, { fraction = 0.5 })
    local zeros = (net.layers[2].weight_mask:sum()):item()
    assert(zeros > 0 and zeros < 100, "the first convolution keeps some of its 100 weights")
    local path = tmp .. "/pruned.st"
    bbb.save(path, net)
    local back = bbb.load(path)
    assert.are.equal(0, (back.layers[2].weight_mask - net.layers[2].weight_mask):abs():max():item())
    local y = back:predict(x, { samples = 2 })
    assert.are.equal("3x10", size(y))
  end)
  it("rejects bad sizes", function()
    assert.has_error(function() nn.lenet{ channels = { 4 } } end, "nn.lenet: channels must list 2 sizes, got 1")
    assert.has_error(function() nn.lenet{ hidden = { 0 } } end, "nn.lenet: hidden[1] must be a positive integer, got 0")
  end)
end)

describe("bayesian (MOPED)", function()
  it("takes mu from the trained weights and sigma = delta |w|, leaving the model unchanged", function()
    local plain = nn.lenet{ bayes = false, channels = { 3, 4 }, hidden = { 8 }, generator = gen }
    local x = bbb.rand({ 2, 784 }, 0, 1, gen)
    local twin = nn.bayesian(plain, { delta = 0.05, estimator = "flipout" })
    assert.truthy(tostring(twin):find("BayesConv2d(1 -> 3, 5x5, padding 2", 1, true))
    assert.truthy(tostring(twin):find("BayesLinear(8 -> 10", 1, true))
    assert.are.equal("flipout", twin.layers[2].estimator)
    local y_plain = bbb.no_grad(function() return plain:forward(x) end)
    local y_mean = twin:predict(x, { mode = "mean" })
    assert(((y_mean - plain:predict(x, { mode = "mean" })):abs():max():item()) < 1e-6)
    local w = plain.layers[2].weight
    local sigma = twin.layers[2].weight_rho:softplus()
    local want = (w:abs() * 0.05):clamp(1e-6)
    assert(((sigma - want):abs() / want):max():item() < 1e-3, "sigma = delta |w|")
    assert.are.equal(0, (twin.layers[2].weight_mu - w):abs():max():item())
    assert.are.equal(0, (bbb.no_grad(function() return plain:forward(x) end) - y_plain):abs():max():item())
    assert.has_error(function() nn.bayesian(plain, { delta = 0 }) end,
      "nn.bayesian: delta must be a positive finite number, got 0")
  end)
end)

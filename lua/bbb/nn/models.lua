--- Ready-made networks: lenet (a LeNet-5-style CNN, Bayesian or plain) and
-- bayesian (the Bayesian twin of a trained plain model, MOPED-style).
local bbb = require "bbb"
local layers = require "bbb.nn.layers"
local conv = require "bbb.nn.conv"
local BayesLinear = require "bbb.nn.bayes_linear"

local M = {}

local function int_list(v, default, what)
  v = v or default
  if type(v) ~= "table" or #v == 0 then
    error(("nn.lenet: %s must be a list of positive integers, got %s"):format(what, tostring(v)), 4)
  end
  for i, n in ipairs(v) do
    if math.type(n) ~= "integer" or n < 1 then
      error(("nn.lenet: %s[%d] must be a positive integer, got %s"):format(what, i, tostring(n)), 4)
    end
  end
  return v
end

--- lenet{bayes = true, estimator =, prior =, kl =, rho_init =, mu_scale =,
-- dropout =, channels = {16, 32}, hidden = {256}, classes = 10,
-- generator =} -> Sequential
-- For flat batches of 1 x 28 x 28 images (B x 784, as bbb.data loads
-- them): View, two blocks of 5x5 convolution (the first padded to keep
-- 28 x 28), ReLU and 2x2 max pooling (28 -> 14 -> 5), then dense layers
-- with ReLU. bayes = true makes every convolution and dense layer
-- Bayesian (BayesConv2d, BayesLinear, with the other options); false a
-- plain network, with Dropout(p) after each pooling and hidden layer when
-- dropout = p.
-- @usage
--   local net = bbb.nn.lenet{ bayes = true, estimator = "local" }
--   assert(net(bbb.rand(2, 784)):size(2) == 10)
function M.lenet(opts)
  opts = opts or {}
  local ch = int_list(opts.channels, { 16, 32 }, "channels")
  local hidden = int_list(opts.hidden, { 256 }, "hidden")
  if #ch ~= 2 then error(("nn.lenet: channels must list 2 sizes, got %d"):format(#ch), 3) end
  local bayes, p = opts.bayes ~= false, opts.dropout
  local lopts = { generator = opts.generator }
  if bayes then
    lopts = { prior = opts.prior, estimator = opts.estimator, kl = opts.kl, rho_init = opts.rho_init,
              mu_scale = opts.mu_scale, generator = opts.generator }
  end
  local Conv, Dense = bayes and conv.BayesConv2d or conv.Conv2d, bayes and BayesLinear or layers.Linear
  local net = layers.Sequential{ conv.View(1, 28, 28) }
  local function dropout() if p and not bayes then net:add(layers.Dropout(p, opts)) end end
  net:add(Conv(1, ch[1], 5, setmetatable({ padding = 2 }, { __index = lopts })))
  net:add(layers.ReLU()):add(conv.MaxPool2d(2))
  dropout()
  net:add(Conv(ch[1], ch[2], 5, lopts)):add(layers.ReLU()):add(conv.MaxPool2d(2))
  dropout()
  net:add(conv.Flatten())
  local width = ch[2] * 5 * 5
  for _, h in ipairs(hidden) do
    net:add(Dense(width, h, lopts)):add(layers.ReLU())
    dropout()
    width = h
  end
  return net:add(Dense(width, opts.classes or 10, lopts))
end

-- rho with softplus(rho) = sigma, for sigma in (0, ~1]: log(expm1(s)) =
-- log(s) + s/2 + s^2/24 + O(s^4), with no cancellation for tiny sigma.
local function inverse_softplus(s)
  return s:log() + s * 0.5 + s:square() * (1 / 24)
end

-- mu = w and sigma = delta |w| (at least floor): MOPED's initialisation.
local function moped(layer, w, b, delta, floor)
  bbb.no_grad(function()
    layer.weight_mu:copy(w)
    layer.weight_rho:copy(inverse_softplus((w:abs() * delta):clamp(floor, 1)))
    if b and layer.bias_mu then
      layer.bias_mu:copy(b)
      layer.bias_rho:copy(inverse_softplus((b:abs() * delta):clamp(floor, 1)))
    end
  end)
  return layer
end

local function twin(m, o)
  local lopts = { prior = o.prior, estimator = o.estimator, kl = o.kl, mode = o.mode,
                  generator = o.generator, bias = nil }
  if m.__name == "Sequential" then
    local s = layers.Sequential{}
    for _, c in ipairs(m.layers) do s:add(twin(c, o)) end
    return s
  elseif m.__name == "Linear" then
    lopts.bias = m.bias ~= nil
    return moped(BayesLinear(m.n_in, m.n_out, lopts), m.weight, m.bias, o.delta, o.floor)
  elseif m.__name == "Conv2d" then
    lopts.bias = m.bias ~= nil
    for _, k in ipairs { "stride", "padding", "dilation", "groups" } do lopts[k] = m[k] end
    local l = conv.BayesConv2d(m.in_channels, m.out_channels, m.kernel, lopts)
    return moped(l, m.weight, m.bias, o.delta, o.floor)
  end
  return m:clone()   -- activations, pooling, dropout: no weights to turn
end

--- bayesian(model [, {delta = 0.1, floor = 1e-6, prior =, estimator =, kl =,
-- mode =, generator =}]) -> a new model with every Linear a BayesLinear and
-- every Conv2d a BayesConv2d: mu = the trained weights, sigma = delta |w|
-- (at least floor), MOPED's initialisation (Krishnan et al. 2020, as
-- bayesian-torch's dnn_to_bnn). The model itself is left unchanged.
-- @usage
--   local plain = bbb.nn.mlp({ 4, 8, 2 })
--   local twin = bbb.nn.bayesian(plain, { delta = 0.1 })
--   assert(twin.layers[1].__name == "BayesLinear")
function M.bayesian(model, opts)
  opts = opts or {}
  if type(model) ~= "table" or type(model.forward) ~= "function" then
    error(("nn.bayesian: argument 1 (model): expected a module, got %s"):format(type(model)), 2)
  end
  local o = { delta = opts.delta or 0.1, floor = opts.floor or 1e-6, prior = opts.prior,
              estimator = opts.estimator, kl = opts.kl, mode = opts.mode, generator = opts.generator }
  for _, k in ipairs { "delta", "floor" } do
    if type(o[k]) ~= "number" or not (o[k] > 0 and o[k] < math.huge) then
      error(("nn.bayesian: %s must be a positive finite number, got %s"):format(k, tostring(o[k])), 2)
    end
  end
  local ok, res = pcall(twin, model, o)
  if not ok then error(res, 2) end
  if not model.training then res:evaluate() end
  return res
end

return M

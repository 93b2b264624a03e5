--- bbb.nn: layers, batch-first (x is (batch, features)).
local layers = require "bbb.nn.layers"

local conv = require "bbb.nn.conv"

local nn = {
  Module = require "bbb.nn.module",
  BayesLinear = require "bbb.nn.bayes_linear",
}
for k, v in pairs(layers) do
  if k ~= "check_input" then nn[k] = v end
end
for k, v in pairs(conv) do
  if k ~= "builders" then nn[k] = v end
end

-- sizes: a list of at least two positive integers (inputs, ..., outputs).
local function check_sizes(sizes, what)
  if type(sizes) ~= "table" then
    error(("nn.%s: sizes must be a list of layer sizes, got %s"):format(what, type(sizes)), 3)
  end
  if #sizes < 2 then
    error(("nn.%s: sizes must list at least two sizes (inputs and outputs), got %d: {%s}")
      :format(what, #sizes, table.concat(sizes, ", ")), 3)
  end
  for i, n in ipairs(sizes) do
    if math.type(n) ~= "integer" or n < 1 then
      error(("nn.%s: sizes[%d] must be a positive integer, got %s"):format(what, i, tostring(n)), 3)
    end
    if i > 1 and sizes[i - 1] * n >= 1 << 31 then
      error(("nn.%s: layer %d would hold %d x %d weights, 2^31 or more"):format(what, i - 1, sizes[i - 1], n), 3)
    end
  end
end

--- bayes_mlp({784, 400, 400, 10}, {prior =, priors =, estimator =,
-- activation = nn.ReLU, rho_init =, mu_scale =, generator =}) -> an MLP of
-- BayesLinear layers with the activation between them (the options go to
-- every BayesLinear). priors = {p1, p2, ...}: layer i's prior, where given,
-- instead of `prior`.
-- @raise nn.bayes_mlp: sizes must list at least two sizes (inputs and outputs), got ...
-- @raise nn.bayes_mlp: sizes[i] must be a positive integer, got ...
-- @raise nn.bayes_mlp: priors must list at most one prior per layer (N), got ...
-- @usage
--   local net = bbb.nn.bayes_mlp({ 784, 400, 400, 10 }, { prior = bbb.prior.Gaussian{ sigma = 1 } })
--   local a, b = net(bbb.zeros(1, 784)), net(bbb.zeros(1, 784))   -- two weight draws
--   assert(a:size(2) == 10 and (a - b):abs():sum():item() > 0)
function nn.bayes_mlp(sizes, opts)
  check_sizes(sizes, "bayes_mlp")
  local priors = opts and opts.priors
  if priors ~= nil and (type(priors) ~= "table" or #priors > #sizes - 1) then
    error(("nn.bayes_mlp: priors must list at most one prior per layer (%d), got %s"):format(#sizes - 1,
      type(priors) == "table" and #priors or tostring(priors)), 2)
  end
  local net = nn.Sequential{}
  for i = 1, #sizes - 1 do
    local o = opts
    if priors and priors[i] then
      o = {}
      for k, v in pairs(opts) do o[k] = v end
      o.prior = priors[i]
    end
    net:add(nn.BayesLinear(sizes[i], sizes[i + 1], o))
    if i < #sizes - 1 then net:add((opts and opts.activation or nn.ReLU)()) end
  end
  return net
end

--- mlp({784, 400, 400, 10}, {activation = nn.ReLU, dropout = p, generator =})
-- -> the deterministic counterpart of bayes_mlp, with dropout after every
-- hidden activation when dropout is given.
-- @raise nn.mlp: sizes must list at least two sizes (inputs and outputs), got ...
-- @usage
--   local net = bbb.nn.mlp({ 4, 16, 3 }, { dropout = 0.5 })
--   assert(#net.layers == 4)   -- Linear, ReLU, Dropout, Linear
function nn.mlp(sizes, opts)
  check_sizes(sizes, "mlp")
  local net = nn.Sequential{}
  for i = 1, #sizes - 1 do
    net:add(nn.Linear(sizes[i], sizes[i + 1], opts))
    if i < #sizes - 1 then
      net:add((opts and opts.activation or nn.ReLU)())
      if opts and opts.dropout then net:add(nn.Dropout(opts.dropout, opts)) end
    end
  end
  return net
end

local models = require "bbb.nn.models"
--- lenet{bayes =, estimator =, prior =, dropout =, ...} -> a LeNet-5-style
-- network for 1 x 28 x 28 images (see bbb.nn.models)
nn.lenet = models.lenet
--- bayesian(model [, {delta =, prior =, estimator =, ...}]) -> the Bayesian
-- twin of a plain model, mu from its weights (see bbb.nn.models)
nn.bayesian = models.bayesian

local pruning = require "bbb.nn.prune"
--- prune(net, {fraction =, by = "snr" | "magnitude"}) -> masks, info (see bbb.nn.prune)
nn.prune = pruning.prune
--- prune_scores(net [, by]) -> the flat list of scores pruning ranks by
nn.prune_scores = pruning.scores

local ACTIVATIONS = { ReLU = true, Sigmoid = true, Tanh = true, Softplus = true }

local function build(c, opts, path, scratch)
  if type(c) ~= "table" then
    error(("nn.build: %s is a %s, not a layer configuration"):format(path, type(c)), 0)
  end
  local function int(key)
    local v = math.tointeger(c[key])
    if not v or v < 1 or v > 1 << 24 then
      error(("nn.build: %s.%s must be a positive integer, got %s"):format(path, key, tostring(c[key])), 0)
    end
    return v
  end
  local ty = c.type
  local m
  if ty == "Sequential" then
    if type(c.children) ~= "table" then
      error(("nn.build: %s.children must be a list"):format(path), 0)
    end
    m = nn.Sequential{}
    for i, cc in ipairs(c.children) do m:add(build(cc, opts, path .. "." .. i, scratch)) end
  elseif ty == "Linear" then
    m = nn.Linear(int("n_in"), int("n_out"), { bias = c.bias ~= false, generator = scratch })
  elseif ty == "BayesLinear" then
    local ok, p = pcall(require("bbb.prior").from_config, c.prior, opts.prior)
    if not ok then error(("nn.build: %s: %s"):format(path, p), 0) end
    m = nn.BayesLinear(int("n_in"), int("n_out"), { prior = p, estimator = c.estimator,
      kl = c.kl, mode = c.mode, bias = c.bias ~= false, masked = c.masked == true,
      generator = scratch })
    m.generator = opts.generator
  elseif conv.builders[ty] then
    local p
    if ty == "BayesConv2d" then
      local ok, pr = pcall(require("bbb.prior").from_config, c.prior, opts.prior)
      if not ok then error(("nn.build: %s: %s"):format(path, pr), 0) end
      p = pr
    end
    local ok, built = pcall(conv.builders[ty], c, int, opts, scratch, p)
    if not ok then error(("nn.build: %s: %s"):format(path, tostring(built):gsub("^[^\n]-:%d+: ", "")), 0) end
    m = built
  elseif ty == "Dropout" then
    m = nn.Dropout(c.p, { generator = opts.generator })
  elseif ACTIVATIONS[ty] then
    m = nn[ty]()
  else
    error(("nn.build: %s has an unknown layer type %s"):format(path, tostring(ty)), 0)
  end
  return m
end

--- The training step without the graph, for small ReLU MLPs: a plan
-- (bbb.nn.fused.plan) then elbo:fused_step(plan, x, y). See bbb.nn.fused.
nn.fused = require "bbb.nn.fused"

--- build(config [, {generator = g, prior = p}]) -> a module from the table
-- net:config() gave. Parameters are freshly initialised (from a private
-- generator, so building draws nothing from g); load a state_dict after.
-- generator: what the built layers sample with (default: the module's);
-- prior: the prior for layers saved with a prior written in Lua.
-- @raise nn.build: PATH has an unknown layer type ..., or a field that is not what the layer needs
-- @usage
--   local net = bbb.nn.bayes_mlp({ 3, 5, 1 })
--   local twin = bbb.nn.build(net:config())
--   twin:load_state_dict(net:state_dict())
function nn.build(config, opts)
  local ok, m = pcall(build, config, opts or {}, "config", require("bbb").Generator(0))
  if not ok then error(m, 2) end
  return m
end
nn.Module.build = nn.build

return nn

--- bbb.nn: layers, batch-first (x is (batch, features)).
local layers = require "bbb.nn.layers"

local nn = {
  Module = require "bbb.nn.module",
  BayesLinear = require "bbb.nn.bayes_linear",
}
for k, v in pairs(layers) do
  if k ~= "check_input" then nn[k] = v end
end

--- An MLP of BayesLinear layers with ReLU between: mlp{784, 400, 400, 10, prior=..., ...}
function nn.bayes_mlp(sizes, opts)
  local net = nn.Sequential{}
  for i = 1, #sizes - 1 do
    net:add(nn.BayesLinear(sizes[i], sizes[i + 1], opts))
    if i < #sizes - 1 then net:add((opts and opts.activation or nn.ReLU)()) end
  end
  return net
end

--- The deterministic counterpart, optionally with dropout.
function nn.mlp(sizes, opts)
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
  elseif ty == "Dropout" then
    m = nn.Dropout(c.p, { generator = opts.generator })
  elseif ACTIVATIONS[ty] then
    m = nn[ty]()
  else
    error(("nn.build: %s has an unknown layer type %s"):format(path, tostring(ty)), 0)
  end
  return m
end

--- build(config [, {generator = g, prior = p}]) -> a module from the table
-- net:config() gave. Parameters are freshly initialised (from a private
-- generator, so building draws nothing from g); load a state_dict after.
-- generator: what the built layers sample with (default: the module's);
-- prior: the prior for layers saved with a prior written in Lua.
function nn.build(config, opts)
  local ok, m = pcall(build, config, opts or {}, "config", require("bbb").Generator(0))
  if not ok then error(m, 2) end
  return m
end

return nn

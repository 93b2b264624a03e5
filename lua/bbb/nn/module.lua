--- The base of every layer: forward, parameters, train/evaluate, and a
-- class helper so a layer is constructed by calling its class.
local core = require "bbb.core"

--- Module: the base class of every layer (nn.Module.class makes one); its
-- methods below are every layer's.
local Module = {}

-- Module.build(config, opts) -> a module from its config: bbb.nn.build,
-- set by bbb.nn when it loads (every module is made through it), so this
-- file never requires bbb.nn, which requires it.
Module.build = nil
Module.__index = Module
Module.__name = "Module"

--- class(name [, parent]) -> a new class; Class(...) makes an object of it
-- and calls obj:init(...) on it
function Module.class(name, parent)
  parent = parent or Module
  local cls = setmetatable({}, {
    __index = parent,
    __call = function(c, ...)
      local obj = setmetatable({ training = true }, c)
      obj:init(...)
      return obj
    end,
  })
  cls.__index = cls
  cls.__name = name
  cls.__tostring = parent.__tostring
  cls.__call = parent.__call
  return cls
end

--- init(...): sets the layer up; Class(...) calls it on a new object.
function Module:init() end

--- forward(x) -> the layer's output for the batch x; net(x) calls it.
function Module:forward(x)
  error(self.__name .. ": forward is not implemented", 2)
end

function Module:__call(x) return self:forward(x) end

--- The direct sub-modules, in order (containers override it).
function Module:children() return {} end

--- Calls fn(m) on this module, then on every descendant, depth first
-- (Torch's apply): every tree walk goes through here.
-- @usage
--   local n = 0
--   bbb.nn.bayes_mlp({ 2, 4, 4, 1 }):apply(function() n = n + 1 end)
--   assert(n == 6)   -- the Sequential and its five layers
function Module:apply(fn)
  fn(self)
  for _, c in ipairs(self:children()) do c:apply(fn) end
  return self
end

--- This module's own parameters as {name, tensor} pairs (layers override).
function Module:own_parameters() return {} end

--- A list of {name, tensor} pairs over the whole tree: a child's names are
-- prefixed by its position ("2.weight_mu").
-- @usage
--   for _, p in ipairs(bbb.nn.BayesLinear(2, 1):named_parameters()) do print(p[1]) end
function Module:named_parameters()
  local out = {}
  for _, p in ipairs(self:own_parameters()) do out[#out + 1] = { p[1], p[2] } end
  for i, c in ipairs(self:children()) do
    for _, p in ipairs(c:named_parameters()) do out[#out + 1] = { i .. "." .. p[1], p[2] } end
  end
  return out
end

--- This module's own buffers as {name, tensor} pairs: state that is saved
-- and loaded with the parameters but never trained (BayesLinear's pruning
-- masks).
function Module:own_buffers() return {} end

--- Parameters, then buffers, over the whole tree, named as in
-- named_parameters: everything state_dict saves.
function Module:named_state()
  local out = self:named_parameters()
  local function walk(m, prefix)
    for _, b in ipairs(m:own_buffers()) do out[#out + 1] = { prefix .. b[1], b[2] } end
    for i, c in ipairs(m:children()) do walk(c, prefix .. i .. ".") end
  end
  walk(self, "")
  return out
end

--- parameters() -> the list of tensors trained, in named_parameters' order.
-- @usage
--   assert(#bbb.nn.Linear(3, 2):parameters() == 2)   -- weight and bias
function Module:parameters()
  local out = {}
  for _, p in ipairs(self:named_parameters()) do out[#out + 1] = p[2] end
  return out
end

--- Drops every parameter's gradient.
function Module:zero_grad()
  for _, p in ipairs(self:named_parameters()) do p[2]:set_grad(nil) end
  return self
end

--- {name = tensor} for every parameter and buffer (the tensors themselves,
-- not copies).
-- @usage
--   local sd = bbb.nn.BayesLinear(3, 2):state_dict()
--   assert(sd.weight_mu and sd.weight_rho)
function Module:state_dict()
  local sd = {}
  for _, p in ipairs(self:named_state()) do sd[p[1]] = p[2] end
  return sd
end

local function size_str(t) return table.concat(t:size(), "x") end

--- Module.first_nonfinite(t) -> the first entry of tensor t that is NaN or
-- inf (1-based, over its elements in order) and its value, or nil: what
-- load_state_dict and the checkpoint writer refuse.
-- @usage
--   assert(bbb.nn.Module.first_nonfinite(bbb.tensor { 1, 0 / 0 }) == 2)
function Module.first_nonfinite(t)
  local d = t:detach()
  if d:numel() == 0 or (d - d):sum():item() == 0 then return nil end   -- x - x is 0 for every finite x
  for i, v in ipairs(d:reshape(-1):totable()) do
    if v ~= v or v == math.huge or v == -math.huge then return i, v end
  end
end
local first_nonfinite = Module.first_nonfinite

--- Copies the tensors of sd into the parameters of the same names. Every
-- name, shape and value is checked before anything is written, so a
-- mismatch, or a NaN or inf (a diverged run's weights), leaves the module
-- unchanged.
-- @raise load_state_dict: NAME holds NaN at element ...: weights must be finite
function Module:load_state_dict(sd)
  if type(sd) ~= "table" then
    error(("load_state_dict: expects a table of tensors, got %s"):format(type(sd)), 2)
  end
  local params, seen = self:named_state(), {}
  for _, p in ipairs(params) do
    local name, t = p[1], p[2]
    local src = sd[name]
    if src == nil then error(("load_state_dict: %s is missing"):format(name), 2) end
    if not core.is_tensor(src) then
      error(("load_state_dict: %s is a %s, not a tensor"):format(name, type(src)), 2)
    end
    if size_str(src) ~= size_str(t) then
      error(("load_state_dict: %s has size %s, the module's is %s")
        :format(name, size_str(src), size_str(t)), 2)
    end
    local at, v = first_nonfinite(src)
    if at then
      error(("load_state_dict: %s holds %s at element %d: weights must be finite")
        :format(name, v ~= v and "NaN" or tostring(v), at), 2)
    end
    seen[name] = true
  end
  for name in pairs(sd) do
    if not seen[name] then
      error(("load_state_dict: %s is not a parameter of this module"):format(tostring(name)), 2)
    end
  end
  for _, p in ipairs(params) do p[2]:copy(sd[p[1]]) end
  return self
end

--- A table that rebuilds this module with bbb.nn.build (layers override).
function Module:config()
  error(self.__name .. ": config is not implemented, so it cannot be saved or cloned", 2)
end

--- A deep copy: same configuration and parameter values, separate tensors.
-- @usage
--   local net = bbb.nn.mlp({ 2, 3, 1 })
--   local copy = net:clone()
--   assert(copy ~= net and (copy(bbb.ones(1, 2)) - net(bbb.ones(1, 2))):abs():sum():item() == 0)
function Module:clone()
  -- a prior written in Lua is not in the config: the copy shares this one's
  local is_fused, lua_priors = require("bbb.prior").is_fused, {}
  self:apply(function(m)
    if m.prior and not is_fused(m.prior) then lua_priors[#lua_priors + 1] = m.prior end
  end)
  local copy = Module.build(self:config(), { prior = lua_priors[1] })
  local i = 0
  copy:apply(function(m)
    if m.prior and not is_fused(m.prior) then i = i + 1; m.prior = lua_priors[i] end
  end)
  local sd = {}
  for name, t in pairs(self:state_dict()) do sd[name] = t:detach():clone() end
  copy:load_state_dict(sd)
  if not self.training then copy:evaluate() end
  return copy
end

--- train() -> self: every layer in training mode (sampling, dropping).
function Module:train()
  return self:apply(function(m) m.training = true end)
end

--- evaluate() -> self: every layer in evaluation mode (see predict's mode).
function Module:evaluate()
  return self:apply(function(m) m.training = false end)
end

--- The complexity term log q(w) - log p(w) of the last forward: the sum of
-- the children's (nil when no Bayesian layer ran).
function Module:kl()
  local total
  for _, c in ipairs(self:children()) do
    local k = c:kl()
    if k then total = total and total + k or k end
  end
  return total
end

function Module:__tostring() return self.__name end

-- Sets every Bayesian layer's prediction mode; returns the old modes.
local function set_modes(m, mode)
  local saved = {}
  m:apply(function(l)
    if l.mode ~= nil then
      saved[#saved + 1] = { l, l.mode }
      l.mode = mode
    end
  end)
  return saved
end

--- net:predict(x, {samples = 10, mode = "sample" | "mean", likelihood =
-- "categorical" | "gaussian", noise_sigma = 0, keep_samples = false})
-- categorical: the MC-averaged class probabilities (N, C);
-- gaussian: the predictive mean and standard deviation (the spread of the
-- samples, plus noise_sigma in quadrature). With keep_samples, the
-- per-sample outputs (probabilities or values) come last, as a list;
-- keep_samples = "tensor" gives them as one (S, N, C) tensor instead,
-- filled pass by pass (no Lua tables, no copies of the list).
-- mode = "mean" uses the posterior means (one pass).
-- @raise predict: mode must be "sample" or "mean", got ...
-- @raise predict: samples must be a positive integer, got ...
-- @usage
--   local net = bbb.nn.bayes_mlp({ 2, 8, 3 })
--   local probs = net:predict(bbb.randn(5, 2), { samples = 20 })   -- (5, 3), rows sum to 1
--   local reg = bbb.nn.bayes_mlp({ 2, 8, 1 })
--   local mean, sd = reg:predict(bbb.randn(5, 2), { samples = 20, likelihood = "gaussian" })
--   assert(probs:size(2) == 3 and sd:size(1) == 5)
function Module:predict(x, opts)
  opts = opts or {}
  local bbb = require "bbb"
  local mode = opts.mode or "sample"
  if mode ~= "sample" and mode ~= "mean" then
    error(('predict: mode must be "sample" or "mean", got %s'):format(tostring(mode)), 2)
  end
  local S = mode == "mean" and 1 or (opts.samples or 10)
  if math.type(S) ~= "integer" or S < 1 then
    error(("predict: samples must be a positive integer, got %s"):format(tostring(opts.samples)), 2)
  end
  local keep = opts.keep_samples
  if keep ~= nil and keep ~= false and keep ~= true and keep ~= "tensor" then
    error(('predict: keep_samples must be true, false or "tensor", got %s'):format(tostring(keep)), 2)
  end
  local gaussian = opts.likelihood == "gaussian"
  local was_training = self.training
  self:evaluate()
  local saved = set_modes(self, mode)
  local ok, a, b, c = pcall(bbb.no_grad, function()
    local sum, outs = nil, (keep == true) and {} or nil
    local stack   -- keep_samples = "tensor": (S, N, C), one row slice per pass
    local mean, m2   -- gaussian: Welford's running mean and sum of squared deviations
    for s = 1, S do
      local out = self:forward(x)
      if not gaussian then out = out:softmax() end
      if outs then outs[s] = out end
      if keep == "tensor" then
        local shape = out:size()
        if s == 1 then stack = bbb.zeros { S, shape[1], shape[2] } end
        stack:narrow(1, s, 1):copy(out:reshape { 1, shape[1], shape[2] })
      end
      if gaussian then
        -- The spread about the running mean, never E[y^2] - E[y]^2, which
        -- cancels in float32 when |mean| >> spread (all of it at mean 1000).
        if s == 1 then
          mean, m2 = out:clone(), bbb.zeros_like(out)
        else
          local delta = out - mean
          mean = mean + delta / s
          m2 = m2 + delta * (out - mean)
        end
      else
        sum = sum and sum + out or out
      end
    end
    if not gaussian then return sum / S, outs or stack end
    local var = (m2 / S):clamp(0) + (opts.noise_sigma or 0) ^ 2
    return mean, var:sqrt(), outs or stack
  end)
  for _, e in ipairs(saved) do e[1].mode = e[2] end
  if was_training then self:train() end
  if not ok then error(a, 2) end
  return a, b, c
end

return Module

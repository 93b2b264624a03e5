--- The base of every layer: forward, parameters, train/evaluate, and a
-- class helper so a layer is constructed by calling its class.
local Module = {}
Module.__index = Module
Module.__name = "Module"

--- class(name [, parent]) -> a new class; Class(...) calls Class.new(self, ...)
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

function Module:init() end

function Module:forward(x)
  error(self.__name .. ": forward is not implemented", 2)
end

function Module:__call(x) return self:forward(x) end

--- A list of {name, tensor} pairs; names are "weight_mu", "2.bias" ...
function Module:named_parameters() return {} end

function Module:parameters()
  local out = {}
  for _, p in ipairs(self:named_parameters()) do out[#out + 1] = p[2] end
  return out
end

function Module:train() self.training = true; return self end
function Module:evaluate() self.training = false; return self end

--- The complexity term log q(w) - log p(w) of the last forward, or nil.
function Module:kl() return nil end

function Module:__tostring() return self.__name end

-- Sets every Bayesian layer's prediction mode; returns the old modes.
local function set_modes(m, mode, saved)
  if m.layers then
    for _, l in ipairs(m.layers) do set_modes(l, mode, saved) end
  elseif m.mode ~= nil then
    saved[#saved + 1] = { m, m.mode }
    m.mode = mode
  end
  return saved
end

--- net:predict(x, {samples = 10, mode = "sample" | "mean", likelihood =
-- "categorical" | "gaussian", noise_sigma = 0, keep_samples = false})
-- categorical: the MC-averaged class probabilities (N, C);
-- gaussian: the predictive mean and standard deviation (the spread of the
-- samples, plus noise_sigma in quadrature). With keep_samples, the
-- per-sample outputs (probabilities or values) come last, as a list.
-- mode = "mean" uses the posterior means (one pass).
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
  local gaussian = opts.likelihood == "gaussian"
  local was_training = self.training
  self:evaluate()
  local saved = set_modes(self, mode, {})
  local ok, a, b, c = pcall(bbb.no_grad, function()
    local sum, sq, outs = nil, nil, opts.keep_samples and {} or nil
    for s = 1, S do
      local out = self:forward(x)
      if not gaussian then out = out:softmax() end
      if outs then outs[s] = out end
      sum = sum and sum + out or out
      if gaussian then sq = sq and sq + out:square() or out:square() end
    end
    local mean = sum / S
    if not gaussian then return mean, outs end
    local var = (sq / S - mean:square()):clamp(0) + (opts.noise_sigma or 0) ^ 2
    return mean, var:sqrt(), outs
  end)
  for _, e in ipairs(saved) do e[1].mode = e[2] end
  if was_training then self:train() end
  if not ok then error(a, 2) end
  return a, b, c
end

return Module

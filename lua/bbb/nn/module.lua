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

return Module

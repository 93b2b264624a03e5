--- Deterministic layers: Sequential, Linear, activations, Dropout.
local bbb = require "bbb"
local Module = require "bbb.nn.module"

local M = {}

-- Level 0: forward is reached at any depth (a Sequential, a user's
-- module), so no position would be the caller's; the message names the layer.
local function check_input(x, layer, width)
  if not bbb.is_tensor(x) then
    error(("%s: input must be a tensor, got %s"):format(layer, type(x)), 0)
  end
  if width and (x:dim() ~= 2 or x:size(2) ~= width) then
    local s = table.concat(x:size(), "x")
    error(("%s: input of size %s does not match the layer's %d inputs (expected batch x %d)")
      :format(layer, s, width, width), 0)
  end
end
M.check_input = check_input

--- Sequential{layer1, layer2, ...}
-- @usage
--   local net = bbb.nn.Sequential{ bbb.nn.Linear(4, 8), bbb.nn.ReLU(), bbb.nn.Linear(8, 2) }
--   assert(net(bbb.randn(3, 4)):size(2) == 2)
local Sequential = Module.class("Sequential")
M.Sequential = Sequential

function Sequential:init(layers)
  self.layers = {}
  for i, l in ipairs(layers or {}) do
    if type(l) ~= "table" or type(l.forward) ~= "function" then
      error(("Sequential: entry %d is not a layer"):format(i), 3)
    end
    self.layers[i] = l
  end
end

--- add(layer) -> self, with layer appended.
function Sequential:add(layer)
  if type(layer) ~= "table" or type(layer.forward) ~= "function" then
    error("Sequential:add: the argument is not a layer", 2)
  end
  self.layers[#self.layers + 1] = layer
  return self
end

function Sequential:children() return self.layers end

function Sequential:forward(x)
  for _, l in ipairs(self.layers) do x = l:forward(x) end
  return x
end

function Sequential:config()
  local cs = {}
  for i, l in ipairs(self.layers) do cs[i] = l:config() end
  return { type = "Sequential", children = cs }
end

function Sequential:__tostring()
  local lines = { "Sequential {" }
  for i, l in ipairs(self.layers) do lines[#lines + 1] = ("  (%d) %s"):format(i, tostring(l)) end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
end

--- Linear(in, out [, {bias = true, generator = g}]): x W^T + b
-- @usage
--   local layer = bbb.nn.Linear(3, 2, { generator = bbb.Generator(1) })
--   assert(layer(bbb.ones(5, 3)):size(1) == 5)
local Linear = Module.class("Linear")
M.Linear = Linear

function Linear:init(n_in, n_out, opts)
  opts = opts or {}
  if math.type(n_in) ~= "integer" or n_in < 1 or math.type(n_out) ~= "integer" or n_out < 1
      or n_in * n_out >= 1 << 31 then
    error(("Linear: sizes must be positive integers with fewer than 2^31 weights, got %s, %s")
      :format(tostring(n_in), tostring(n_out)), 3)
  end
  self.n_in, self.n_out = n_in, n_out
  local s = 1 / math.sqrt(n_in)
  self.weight = bbb.rand({ n_out, n_in }, -s, s, opts.generator):requires_grad(true)
  if opts.bias ~= false then
    self.bias = bbb.rand({ n_out }, -s, s, opts.generator):requires_grad(true)
  end
end

function Linear:forward(x)
  check_input(x, "Linear", self.n_in)
  return bbb.linear(x, self.weight, self.bias)
end

function Linear:own_parameters()
  local out = { { "weight", self.weight } }
  if self.bias then out[2] = { "bias", self.bias } end
  return out
end

function Linear:config()
  return { type = "Linear", n_in = self.n_in, n_out = self.n_out, bias = self.bias ~= nil }
end

function Linear:__tostring() return ("Linear(%d -> %d)"):format(self.n_in, self.n_out) end

local function activation(name, method)
  local cls = Module.class(name)
  function cls:forward(x)
    check_input(x, name)
    return x[method](x)
  end
  function cls:config() return { type = name } end
  return cls
end

--- ReLU(): max(0, x), elementwise.
M.ReLU = activation("ReLU", "relu")
--- Sigmoid(): 1 / (1 + exp(-x)), elementwise.
M.Sigmoid = activation("Sigmoid", "sigmoid")
--- Tanh(): tanh(x), elementwise.
M.Tanh = activation("Tanh", "tanh")
--- Softplus(): log(1 + exp(x)), elementwise.
M.Softplus = activation("Softplus", "softplus")

--- Dropout(p): zeroes inputs with probability p in training, scales by 1/(1-p).
-- With layer.mode = "sample" it keeps dropping in evaluation too (MC
-- dropout): net:predict then samples it like a Bayesian layer, and
-- predict's mode = "mean" turns it off.
local Dropout = Module.class("Dropout")
M.Dropout = Dropout

function Dropout:init(p, opts)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p >= 1 then
    error(("Dropout: p must be in [0, 1), got %s"):format(tostring(p)), 3)
  end
  self.p, self.generator = p, opts and opts.generator
end

function Dropout:forward(x)
  check_input(x, "Dropout")
  if (not self.training and self.mode ~= "sample") or self.p == 0 then return x end
  return x * bbb.dropout_mask(x:size(), self.p, self.generator)
end

function Dropout:config() return { type = "Dropout", p = self.p } end

function Dropout:__tostring() return ("Dropout(%g)"):format(self.p) end

return M

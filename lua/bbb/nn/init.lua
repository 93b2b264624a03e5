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

return nn

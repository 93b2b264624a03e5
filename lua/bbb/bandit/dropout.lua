--- MCDropout{dropout = 0.05, ...the network agents' options}: Thompson
-- sampling with MC dropout (Gal and Ghahramani 2016; Riquelme et al. 2018's
-- "Dropout"): an MLP with dropout after each hidden layer, trained on the
-- rewards like the greedy agents (dropout on); each decision draws one
-- dropout mask per layer, shared by the two actions' rows, so both actions
-- are scored by the same sampled network, and takes the better one.
local bbb = require "bbb"
local agents = require "bbb.bandit.agents"

local Drop = setmetatable({}, { __index = agents.Neural })
Drop.__index = Drop

local function is_dropout(layer) return layer:config().type == "Dropout" end

--- The two actions' predicted rewards under one dropout mask: {pass, eat}.
function Drop:sample_actions(context)
  local x = bbb.cat({ bbb.cat({ context, context }, 1), self.both_actions }, 2)
  local v = bbb.no_grad(function()
    for _, layer in ipairs(self.net.layers) do
      if is_dropout(layer) then
        x = x * bbb.dropout_mask({ 1, x:size(2) }, layer.p, self.generator)
      else
        x = layer:forward(x)
      end
    end
    return self:value(x)
  end):totable()
  return { v[1][1], v[2][1] }
end

function Drop:decide(context)
  agents.check_context(self, context)
  local v = self:sample_actions(context)
  return v[2] > v[1] and 2 or 1
end

return function(o)
  o = o or {}
  local p = o.dropout or 0.05
  if type(p) ~= "number" or not (p > 0 and p < 1) then
    error(("MCDropout: dropout must be a number in (0, 1), got %s"):format(tostring(p)), 2)
  end
  local self
  self, o = agents.neural(Drop, "MC dropout", o)
  self.p = p
  self.net = bbb.nn.mlp(self.sizes, { generator = self.generator, dropout = p })
  self:finish_init()
  return self
end

--- bbb.testing: finite-difference gradient checks for any function of tensors.
local bbb = require "bbb"

local testing = {}

-- A fixed projection turns a non-scalar output into a scalar loss, so every
-- output element's gradient is exercised.
local function scalar_loss(out, weights)
  if out:numel() == 1 then return out:sum() end
  return (out * weights):sum()
end

--- gradcheck(fn, inputs, opts) -> ok, report
-- fn(table.unpack(inputs)) must return a tensor. Every input with
-- requires_grad is checked element by element against central differences.
-- opts: eps (1e-3), atol (1e-3), rtol (1e-2), max_checks per input (all).
-- @usage
--   local x = bbb.randn(3, 2):requires_grad(true)
--   assert(bbb.testing.gradcheck(function(v) return v:softplus():sum() end, { x }))
function testing.gradcheck(fn, inputs, opts)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    error(("gradcheck: fn must be a function, got %s"):format(type(fn)), 2)
  end
  if type(inputs) ~= "table" then
    error(("gradcheck: inputs must be a list of tensors, got %s"):format(type(inputs)), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(("gradcheck: opts must be a table, got %s"):format(type(opts)), 2)
  end
  opts = opts or {}
  for _, k in ipairs { "eps", "atol", "rtol" } do
    local v = opts[k]
    if v ~= nil and (type(v) ~= "number" or v ~= v or v == math.huge or v < 0 or (k == "eps" and v == 0)) then
      error(("gradcheck: %s must be a finite number %s, got %s"):format(k, k == "eps" and "> 0" or ">= 0",
        tostring(v)), 2)
    end
  end
  local eps, atol, rtol = opts.eps or 1e-3, opts.atol or 1e-3, opts.rtol or 1e-2
  local out0 = bbb.no_grad(fn, table.unpack(inputs))
  if not bbb.is_tensor(out0) then
    error("gradcheck: fn must return a tensor, got " .. type(out0), 2)
  end
  local weights = bbb.rand(out0:size(), 0.5, 1.5, bbb.Generator(12345))
  for _, x in ipairs(inputs) do
    if bbb.is_tensor(x) and x:requires_grad() then x:set_grad(nil) end
  end
  scalar_loss(fn(table.unpack(inputs)), weights):backward()
  local worst = { err = 0 }
  for k, x in ipairs(inputs) do
    if bbb.is_tensor(x) and x:requires_grad() then
      if not x.grad then
        return false, ("input %d: no gradient reached it"):format(k)
      end
      local flat, g = x:view(-1), x.grad:view(-1)
      local n = x:numel()
      local step = opts.max_checks and math.max(1, n // opts.max_checks) or 1
      for i = 1, n, step do
        local v = flat[i]
        flat[i] = v + eps
        local up = bbb.no_grad(function() return scalar_loss(fn(table.unpack(inputs)), weights):item() end)
        flat[i] = v - eps
        local down = bbb.no_grad(function() return scalar_loss(fn(table.unpack(inputs)), weights):item() end)
        flat[i] = v
        local numeric, analytic = (up - down) / (2 * eps), g[i]
        local err = math.abs(numeric - analytic)
        local bound = atol + rtol * math.abs(numeric)
        if err > bound or err ~= err then
          return false, ("input %d element %d: analytic %.6g, numeric %.6g (error %.3g > %.3g)")
            :format(k, i, analytic, numeric, err, bound)
        end
        if err > worst.err then worst = { err = err, input = k, index = i } end
      end
    end
  end
  return true, ("max abs error %.3g"):format(worst.err)
end

return testing

--- bbb.optim: SGD (momentum, Nesterov), Adam, RMSprop as fused C updates;
-- clipping by global gradient norm; learning-rate schedules.
--
-- opt:step() checks every gradient before it touches any parameter: a
-- non-finite gradient stops with an error naming the step and the
-- parameter, and the parameters stay as they were before that step.
local bbb = require "bbb"
local core = require "bbb.core"

local optim = {}

local Optimizer = {}
Optimizer.__index = Optimizer

-- Accepts a list of tensors, a list of {name, tensor}, or a module.
local function collect(params, what)
  if type(params) == "table" and params.named_parameters then params = params:named_parameters() end
  if type(params) ~= "table" then
    error(("%s: parameters must be a list of tensors, got %s"):format(what, type(params)), 3)
  end
  local out = {}
  for i, p in ipairs(params) do
    local name, t = "param " .. i, p
    if type(p) == "table" then name, t = p[1], p[2] end
    if not bbb.is_tensor(t) then
      error(("%s: parameter %d is a %s, not a tensor"):format(what, i, type(t)), 3)
    end
    if not t:requires_grad() then
      error(("%s: parameter %s does not require grad"):format(what, name), 3)
    end
    out[#out + 1] = { name = name, t = t }
  end
  if #out == 0 then error(what .. ": no parameters to optimize", 3) end
  return out
end

local function number_opt(opts, key, default, what, lo)
  local v = opts[key]
  if v == nil then v = default end
  if type(v) ~= "number" or v ~= v or (lo and v < lo) then
    error(("%s: %s must be a number%s, got %s"):format(what, key, lo and (" >= " .. lo) or "", tostring(v)), 3)
  end
  return v
end

local function new(kind, params, opts, defaults)
  opts = opts or {}
  local self = setmetatable({ kind = kind, params = collect(params, kind), t = 0 }, Optimizer)
  self.lr = number_opt(opts, "lr", defaults.lr, kind, 0)
  self.weight_decay = number_opt(opts, "weight_decay", 0, kind, 0)
  self.clip_norm = opts.clip_norm and number_opt(opts, "clip_norm", nil, kind, 0)
  return self, opts
end

function optim.SGD(params, opts)
  local self
  self, opts = new("SGD", params, opts, { lr = 0.01 })
  self.momentum = number_opt(opts, "momentum", 0, "SGD", 0)
  self.nesterov = opts.nesterov and true or false
  for _, p in ipairs(self.params) do
    if self.momentum ~= 0 then p.buf = bbb.zeros(p.t:size()) end
  end
  return self
end

function optim.Adam(params, opts)
  local self
  self, opts = new("Adam", params, opts, { lr = 1e-3 })
  local betas = opts.betas or { 0.9, 0.999 }
  self.beta1, self.beta2 = betas[1], betas[2]
  if not (self.beta1 >= 0 and self.beta1 < 1 and self.beta2 >= 0 and self.beta2 < 1) then
    error("Adam: betas must be in [0, 1)", 2)
  end
  self.eps = number_opt(opts, "eps", 1e-8, "Adam", 0)
  for _, p in ipairs(self.params) do
    p.m, p.v = bbb.zeros(p.t:size()), bbb.zeros(p.t:size())
  end
  return self
end

function optim.RMSprop(params, opts)
  local self
  self, opts = new("RMSprop", params, opts, { lr = 1e-2 })
  self.alpha = number_opt(opts, "alpha", 0.99, "RMSprop", 0)
  self.eps = number_opt(opts, "eps", 1e-8, "RMSprop", 0)
  for _, p in ipairs(self.params) do p.sq = bbb.zeros(p.t:size()) end
  return self
end

function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p.t:set_grad(nil) end
end

--- Global L2 norm of the gradients; errors on a non-finite one.
function Optimizer:grad_norm(step)
  local total = 0
  for _, p in ipairs(self.params) do
    local g = p.t.grad
    if g then
      local s = core.sqnorm(g)
      if s ~= s or s == math.huge then
        error(("%s: step %d: the gradient of %s is not finite"):format(self.kind, step, p.name), 3)
      end
      total = total + s
    end
  end
  return math.sqrt(total)
end

--- Applies one update; returns the gradient norm before clipping.
function Optimizer:step()
  local step = self.t + 1
  local norm = self:grad_norm(step)
  self.t = step
  local scale = 1
  if self.clip_norm and norm > self.clip_norm then scale = self.clip_norm / norm end
  for _, p in ipairs(self.params) do
    local g = p.t.grad
    if g then
      if self.kind == "Adam" then
        core.adam_update(p.t, g, p.m, p.v, scale, self.lr, self.beta1, self.beta2, self.eps,
          self.weight_decay, step)
      elseif self.kind == "SGD" then
        core.sgd_update(p.t, g, p.buf, scale, self.lr, self.momentum, self.nesterov, self.weight_decay)
      else
        core.rmsprop_update(p.t, g, p.sq, scale, self.lr, self.alpha, self.eps, self.weight_decay)
      end
    end
  end
  return norm
end

local BUFFERS = { "m", "v", "buf", "sq" }
local HYPER = { "lr", "weight_decay", "clip_norm", "momentum", "nesterov", "beta1", "beta2",
                "eps", "alpha" }

--- state_dict() -> scalars, {name = tensor}: the step count, the
-- hyperparameters and every moment buffer ("<param>.m", ...), for checkpoints.
function Optimizer:state_dict()
  local st, ts = { kind = self.kind, t = self.t }, {}
  for _, k in ipairs(HYPER) do st[k] = self[k] end
  for _, p in ipairs(self.params) do
    for _, b in ipairs(BUFFERS) do
      if p[b] then ts[p.name .. "." .. b] = p[b] end
    end
  end
  return st, ts
end

--- load_state_dict(scalars, tensors): the inverse of state_dict. The kind,
-- the parameter names and the buffer shapes must match; nothing changes
-- unless everything does.
function Optimizer:load_state_dict(st, ts)
  if type(st) ~= "table" or st.kind ~= self.kind then
    error(("%s: the saved optimizer state is for %s"):format(self.kind,
      type(st) == "table" and tostring(st.kind) or "nothing"), 2)
  end
  local t = math.tointeger(st.t)
  if not t or t < 0 then error(("%s: the saved step count is %s"):format(self.kind, tostring(st.t)), 2) end
  local n = 0
  for _ in pairs(ts) do n = n + 1 end
  local want = 0
  for _, p in ipairs(self.params) do
    for _, b in ipairs(BUFFERS) do
      if p[b] then
        want = want + 1
        local src = ts[p.name .. "." .. b]
        if not bbb.is_tensor(src) or src:numel() ~= p[b]:numel() then
          error(("%s: the saved state has no %s buffer of %d values for %s"):format(
            self.kind, b, p[b]:numel(), p.name), 2)
        end
      end
    end
  end
  if n ~= want then
    error(("%s: the saved state has %d buffers, this optimizer %d"):format(self.kind, n, want), 2)
  end
  for _, p in ipairs(self.params) do
    for _, b in ipairs(BUFFERS) do
      if p[b] then p[b]:copy(ts[p.name .. "." .. b]) end
    end
  end
  self.t = t
  for _, k in ipairs(HYPER) do
    if st[k] ~= nil then self[k] = st[k] end
  end
end

--- Learning-rate schedules; call :step() once per epoch.
optim.schedule = {}

local Schedule = {}
Schedule.__index = Schedule

function Schedule:step()
  self.epoch = self.epoch + 1
  self.opt.lr = self.fn(self.epoch)
  return self.opt.lr
end

--- Moves the schedule to the given epoch (resuming a run).
function Schedule:set_epoch(e)
  self.epoch = e
  self.opt.lr = e == 0 and self.base or self.fn(e)
  return self.opt.lr
end

local function schedule(opt, fn)
  return setmetatable({ opt = opt, epoch = 0, fn = fn, base = opt.lr }, Schedule)
end

--- lr = lr0 * gamma^epoch
function optim.schedule.exponential(opt, gamma)
  local lr0 = opt.lr
  return schedule(opt, function(e) return lr0 * gamma ^ e end)
end

--- lr = lr0 * gamma^floor(epoch / step_size)
function optim.schedule.step(opt, step_size, gamma)
  local lr0 = opt.lr
  return schedule(opt, function(e) return lr0 * gamma ^ (e // step_size) end)
end

--- lr = eta_min + (lr0 - eta_min) (1 + cos(pi epoch / T)) / 2
function optim.schedule.cosine(opt, t_max, eta_min)
  local lr0 = opt.lr
  eta_min = eta_min or 0
  return schedule(opt, function(e)
    return eta_min + (lr0 - eta_min) * (1 + math.cos(math.pi * math.min(e, t_max) / t_max)) / 2
  end)
end

return optim

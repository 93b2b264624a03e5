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

local function is_finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

-- A hyperparameter: a finite number, with lo <= v (or lo < v when open_lo),
-- and v < hi when hi is given. The message names the optimizer, the option
-- and the value.
local function number_opt(opts, key, default, what, lo, hi, open_lo)
  local v = opts[key]
  if v == nil then v = default end
  local need = ("a finite number%s%s"):format(
    lo and ((open_lo and " > " or " >= ") .. lo) or "", hi and (" below " .. hi) or "")
  if lo and hi then need = ("a number in %s%s, %s)"):format(open_lo and "(" or "[", lo, hi) end
  if type(v) ~= "number" or not is_finite(v) or (lo and (v < lo or (open_lo and v == lo)))
      or (hi and v >= hi) then
    -- level 0: reached from the constructors at two depths; the message
    -- names the optimizer and the option
    error(("%s: %s must be %s, got %s"):format(what, key, need,
      type(v) == "string" and ("'" .. v .. "'") or tostring(v)), 0)
  end
  return v
end

-- The options each optimizer reads; any other key is a typo to report,
-- not a setting to drop silently.
local KNOWN = {
  SGD = { "clip_norm", "lr", "lr_scale", "momentum", "nesterov", "weight_decay" },
  Adam = { "betas", "clip_norm", "eps", "lr", "lr_scale", "weight_decay" },
  RMSprop = { "alpha", "clip_norm", "eps", "lr", "lr_scale", "weight_decay" },
}

-- lr_scale = {suffix = factor}: the learning rate of every parameter whose
-- name ends in "_suffix" or ".suffix" (a layer's "weight_rho" for rho) is
-- lr times factor, e.g. {rho = 100} lets sigma move as fast as the means do
-- under SGD. A suffix that names no parameter is an error.
local function lr_scales(self, scales)
  if scales == nil then return end
  if type(scales) ~= "table" then
    error(("%s: lr_scale must be a table {suffix = factor}, got %s"):format(self.kind, type(scales)), 4)
  end
  for key in pairs(scales) do
    if type(key) ~= "string" or not key:match("^[%w]+$") then
      error(("%s: lr_scale's keys must be parameter name suffixes such as 'rho', got %s"):format(
        self.kind, tostring(key)), 4)
    end
    local f = number_opt(scales, key, nil, self.kind .. ": lr_scale", 0, nil, true)
    local hit = false
    for _, p in ipairs(self.params) do
      local tail = p.name:match("[_.]([%w]+)$") or p.name
      if tail == key then p.lr_scale, hit = f, true end
    end
    if not hit then
      error(("%s: lr_scale.%s matches no parameter (names end in _mu, _rho, weight, bias, ...)"):format(
        self.kind, key), 4)
    end
  end
end

local function new(kind, params, opts, defaults)
  if opts ~= nil and type(opts) ~= "table" then
    error(("%s: options must be a table, got %s"):format(kind, type(opts)), 3)
  end
  opts = opts or {}
  local known = {}
  for _, k in ipairs(KNOWN[kind]) do known[k] = true end
  for k in pairs(opts) do
    if not known[k] then
      error(("%s: unknown option '%s' (known: %s)"):format(kind, tostring(k), table.concat(KNOWN[kind], ", ")), 3)
    end
  end
  local self = setmetatable({ kind = kind, params = collect(params, kind), t = 0 }, Optimizer)
  self.lr = number_opt(opts, "lr", defaults.lr, kind, 0)
  self.weight_decay = number_opt(opts, "weight_decay", 0, kind, 0)
  self.clip_norm = opts.clip_norm and number_opt(opts, "clip_norm", nil, kind, 0, nil, true)
  lr_scales(self, opts.lr_scale)
  return self, opts
end

--- SGD(params, {lr = 0.01, momentum = 0, nesterov = false, weight_decay = 0, clip_norm})
-- @usage
--   local net = bbb.nn.mlp({ 2, 4, 1 })
--   local opt = bbb.optim.SGD(net, { lr = 0.1, momentum = 0.9 })
function optim.SGD(params, opts)
  local self
  self, opts = new("SGD", params, opts, { lr = 0.01 })
  self.momentum = number_opt(opts, "momentum", 0, "SGD", 0, 1)
  self.nesterov = opts.nesterov and true or false
  for _, p in ipairs(self.params) do
    if self.momentum ~= 0 then p.buf = bbb.zeros(p.t:size()) end
  end
  return self
end

--- Adam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, clip_norm})
-- betas: two numbers in [0, 1); eps > 0.
-- @raise Adam: unknown option 'NAME' (known: ...)
-- @raise Adam: lr must be a finite number >= 0, got ... (and the other hyperparameters' ranges)
-- @raise Adam: parameter NAME does not require grad
-- @usage
--   local net = bbb.nn.bayes_mlp({ 2, 4, 1 })
--   local opt = bbb.optim.Adam(net, { lr = 1e-3, lr_scale = { rho = 10 } })
--   opt:zero_grad()
--   local x = bbb.randn(8, 2)
--   local loss = (net(x) - x:sum(2, true)):square():mean()
--   loss:backward()
--   opt:step()
function optim.Adam(params, opts)
  local self
  self, opts = new("Adam", params, opts, { lr = 1e-3 })
  local betas = opts.betas or { 0.9, 0.999 }
  if type(betas) ~= "table" then
    error(("Adam: betas must be a table of two numbers in [0, 1), got %s"):format(
      type(betas) == "string" and ("'" .. betas .. "'") or tostring(betas)), 2)
  end
  self.beta1 = number_opt({ beta1 = betas[1] }, "beta1", nil, "Adam", 0, 1)
  self.beta2 = number_opt({ beta2 = betas[2] }, "beta2", nil, "Adam", 0, 1)
  self.eps = number_opt(opts, "eps", 1e-8, "Adam", 0, nil, true)
  for _, p in ipairs(self.params) do
    p.m, p.v = bbb.zeros(p.t:size()), bbb.zeros(p.t:size())
  end
  return self
end

--- RMSprop(params, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, clip_norm})
-- alpha (the decay of the squared-gradient average) in [0, 1); eps > 0.
-- @usage
--   local opt = bbb.optim.RMSprop(bbb.nn.mlp({ 2, 1 }), { lr = 1e-3, alpha = 0.99 })
function optim.RMSprop(params, opts)
  local self
  self, opts = new("RMSprop", params, opts, { lr = 1e-2 })
  self.alpha = number_opt(opts, "alpha", 0.99, "RMSprop", 0, 1)
  self.eps = number_opt(opts, "eps", 1e-8, "RMSprop", 0, nil, true)
  for _, p in ipairs(self.params) do p.sq = bbb.zeros(p.t:size()) end
  return self
end

--- zero_grad(): every parameter's gradient set to zero.
function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p.t:set_grad(nil) end
end

local function likely_cause(self)
  if self.lr >= 1 then
    return ("the learning rate %g is far too large"):format(self.lr)
  end
  return "the learning rate is too large for these gradients, or the weights have diverged"
end

--- Applies one update; returns the gradient norm before clipping.
-- Checked first, changing nothing when a check fails: every gradient is
-- finite, the learning rate (which a schedule may have set) is finite and
-- >= 0, and no parameter or moment would become NaN or infinite. The error
-- names the optimizer, the step and the likely cause. One C call does the whole step (bbb.core.optim_step): the norms, the dry
-- runs, the updates; each update keeps a bound between steps that usually
-- proves the next one finite without a pass over the data.
function Optimizer:step()
  local step = self.t + 1
  if type(self.lr) ~= "number" or not is_finite(self.lr) or self.lr < 0 then
    error(("%s: step %d: the learning rate is %s (a schedule or a direct assignment?); "
      .. "it must be finite and >= 0"):format(self.kind, step, tostring(self.lr)), 2)
  end
  self.cstate = self.cstate or core.optim_state(#self.params)
  local h = self.hyper or {}
  self.hyper = h
  h.lr, h.clip_norm, h.weight_decay, h.momentum, h.nesterov = self.lr, self.clip_norm or nil,
    self.weight_decay, self.momentum, self.nesterov
  h.beta1, h.beta2, h.alpha, h.eps, h.step = self.beta1, self.beta2, self.alpha, self.eps, step
  local norm, what, i, bad = core.optim_step(self.kind, self.cstate, self.params, h)
  if not norm then
    local name = self.params[i].name
    if what == "grad" then
      error(("%s: step %d: the gradient of %s is not finite"):format(self.kind, step, name), 2)
    end
    error(("%s: step %d: the update would make %d value%s of %s NaN or infinite; "
      .. "the parameters are left as they were (likely cause: %s)"):format(
      self.kind, step, bad, bad == 1 and "" or "s", name, likely_cause(self)), 2)
  end
  self.t = step
  return norm
end

--- observe_loss(v): call with the loss per example after each step (the
-- training loop does). Warns once, on stderr, when it becomes non-finite or
-- grows a thousandfold above the smallest value seen so far (or above 1 when
-- that is smaller): the sign of a learning rate that is too large.
function Optimizer:observe_loss(v)
  if type(v) ~= "number" or self.loss_warned then return end
  local a = math.abs(v)
  if not is_finite(v) or (self.loss_floor and a > 1e3 * math.max(self.loss_floor, 1)) then
    self.loss_warned = true
    io.stderr:write(("%s: warning: at step %d the loss per example is %s, up from %s: "
      .. "training is diverging (learning rate %g too large?)\n"):format(
      self.kind, self.t, tostring(v), tostring(self.loss_floor), self.lr))
    return
  end
  self.loss_floor = math.min(self.loss_floor or a, a)
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
        local shape = table.concat(p[b]:size(), "x")
        if not bbb.is_tensor(src) or table.concat(src:size(), "x") ~= shape then
          error(("%s: the saved state has no %s buffer of shape %s for %s"):format(
            self.kind, b, shape, p.name), 2)
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

-- The learning rate of epoch e; a negative or non-finite one is an error
-- (a negative rate would be gradient ascent).
local function rate_at(self, e)
  local lr = e == 0 and self.base or self.fn(e)
  if type(lr) ~= "number" or not is_finite(lr) or lr < 0 then
    error(("schedule.%s: epoch %d gives the learning rate %s; it must be finite and >= 0"):format(
      self.name, e, tostring(lr)), 3)
  end
  return lr
end

--- step() -> lr: the next epoch's learning rate, set on the optimizer.
function Schedule:step()
  local lr = rate_at(self, self.epoch + 1)
  self.epoch = self.epoch + 1
  self.opt.lr = lr
  return lr
end

--- Moves the schedule to the given epoch (resuming a run).
function Schedule:set_epoch(e)
  local lr = rate_at(self, e)
  self.epoch = e
  self.opt.lr = lr
  return lr
end

local function schedule(name, opt, fn, checks)
  if type(opt) ~= "table" or getmetatable(opt) ~= Optimizer then
    error(("schedule.%s: the first argument must be an optimizer, got %s"):format(name, type(opt)), 3)
  end
  for _, c in ipairs(checks) do
    local key, v, need = c[1], c[2], c[3]
    if type(v) ~= "number" or not is_finite(v) or not need(v) then
      error(("schedule.%s: %s must be %s, got %s"):format(name, key, c[4], tostring(v)), 3)
    end
  end
  return setmetatable({ name = name, opt = opt, epoch = 0, fn = fn, base = opt.lr }, Schedule)
end

local function positive(v) return v > 0 end
local function nonnegative(v) return v >= 0 end
local function positive_integer(v) return math.type(v) == "integer" and v > 0 end

--- lr = lr0 * gamma^epoch
-- @usage
--   local opt = bbb.optim.Adam(bbb.nn.mlp({ 2, 1 }), { lr = 0.1 })
--   local sched = bbb.optim.schedule.exponential(opt, 0.5)
--   sched:step()
--   assert(opt.lr == 0.05)
function optim.schedule.exponential(opt, gamma)
  local lr0 = opt and opt.lr
  return schedule("exponential", opt, function(e) return lr0 * gamma ^ e end,
    { { "gamma", gamma, positive, "a finite number > 0" } })
end

--- lr = lr0 * gamma^floor(epoch / step_size)
function optim.schedule.step(opt, step_size, gamma)
  local lr0 = opt and opt.lr
  return schedule("step", opt, function(e) return lr0 * gamma ^ (e // step_size) end,
    { { "step_size", step_size, positive_integer, "a positive integer" },
      { "gamma", gamma, positive, "a finite number > 0" } })
end

--- lr = eta_min + (lr0 - eta_min) (1 + cos(pi epoch / T)) / 2
-- @usage
--   local opt = bbb.optim.SGD(bbb.nn.mlp({ 2, 1 }), { lr = 0.1 })
--   local sched = bbb.optim.schedule.cosine(opt, 10, 0.001)
--   for epoch = 1, 10 do sched:step() end
--   assert(math.abs(opt.lr - 0.001) < 1e-9)
function optim.schedule.cosine(opt, t_max, eta_min)
  local lr0 = opt and opt.lr
  eta_min = eta_min or 0
  return schedule("cosine", opt, function(e)
    return eta_min + (lr0 - eta_min) * (1 + math.cos(math.pi * math.min(e, t_max) / t_max)) / 2
  end, { { "t_max", t_max, positive_integer, "a positive integer" },
         { "eta_min", eta_min, nonnegative, "a finite number >= 0" } })
end

return optim

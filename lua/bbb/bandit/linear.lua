--- LinearTS: Thompson sampling with a Bayesian linear regression of the
-- reward on the raw context (plus an intercept), one model per action,
-- under the conjugate normal-inverse-gamma prior
--   sigma^2 ~ InvGamma(a0, b0),  beta | sigma^2 ~ N(0, sigma^2 / lambda I).
-- Its posterior after n rows (X, y): precision P = X'X + lambda I,
-- mean mu = P^-1 X'y, a = a0 + n/2, b = b0 + (y'y - mu'P mu) / 2.
-- A decision draws sigma^2 and beta from it for each action and takes the
-- larger x'beta. (Riquelme et al. 2018 found this the strongest simple
-- baseline; their defaults lambda = 0.25, a0 = b0 = 6.)
--
-- Kept in float64 Lua arrays: the Cholesky factor L of P (updated by a
-- rank-one update per row, O(d^2)), X'y and y'y; mu by two triangular
-- solves. No step costs more than O(d^2).
local bbb = require "bbb"

local Linear = {}
Linear.__index = Linear

-- Lower-triangular L stored row-major in a flat array: L[(i-1)*d + j].
local function chol_update(L, d, x)
  for k = 1, d do
    local kk = (k - 1) * d + k
    local lkk, xk = L[kk], x[k]
    local r = math.sqrt(lkk * lkk + xk * xk)
    local c, s = r / lkk, xk / lkk
    L[kk] = r
    for i = k + 1, d do
      local ik = (i - 1) * d + k
      local lik = (L[ik] + s * x[i]) / c
      L[ik] = lik
      x[i] = c * x[i] - s * lik
    end
  end
end

-- Solves L v = b (forward) in place of a copy.
local function solve_lower(L, d, b)
  local v = {}
  for i = 1, d do
    local s, row = b[i], (i - 1) * d
    for j = 1, i - 1 do s = s - L[row + j] * v[j] end
    v[i] = s / L[row + i]
  end
  return v
end

-- Solves L' v = b (backward).
local function solve_upper_t(L, d, b)
  local v = {}
  for i = d, 1, -1 do
    local s = b[i]
    for j = i + 1, d do s = s - L[(j - 1) * d + i] * v[j] end
    v[i] = s / L[(i - 1) * d + i]
  end
  return v
end

-- Gamma(shape a, scale 1) by Marsaglia and Tsang, from the generator.
local function gamma_sample(a, gen)
  local boost = 1
  if a < 1 then
    boost = bbb.rand({ 1 }, 0, 1, gen):item() ^ (1 / a)
    a = a + 1
  end
  local d = a - 1 / 3
  local c = 1 / math.sqrt(9 * d)
  while true do
    local draws = bbb.randn({ 8 }, 0, 1, gen):totable()
    local us = bbb.rand({ 8 }, 0, 1, gen):totable()
    for k = 1, 8 do
      local z = draws[k]
      local v = (1 + c * z) ^ 3
      if v > 0 and math.log(us[k]) < 0.5 * z * z + d - d * v + d * math.log(v) then
        return d * v * boost
      end
    end
  end
end

local function features(self, context, what)
  if not bbb.is_tensor(context) or context:numel() ~= self.context_dim then
    error(("linear TS:%s: context must be a 1 x %d tensor, got %s"):format(what, self.context_dim,
      bbb.is_tensor(context) and table.concat(context:size(), "x") or type(context)), 3)
  end
  local x = context:reshape(-1):totable()
  x[self.d] = 1   -- the intercept
  return x
end

-- The posterior mean of one action's model (cached until its next update).
local function mean(self, m)
  if not m.mu then m.mu = solve_upper_t(m.L, self.d, solve_lower(m.L, self.d, m.xy)) end
  return m.mu
end

--- posterior_mean(a) -> beta's posterior mean for action a (a Lua array;
-- the intercept last).
function Linear:posterior_mean(a)
  return table.move(mean(self, self.models[a]), 1, self.d, 1, {})
end

--- A draw of beta from one action's posterior.
function Linear:sample_beta(a)
  local m, d = self.models[a], self.d
  local mu = mean(self, m)
  local fit = 0
  for i = 1, d do fit = fit + mu[i] * m.xy[i] end
  local shape, rate = self.a0 + m.n / 2, self.b0 + math.max(0, m.yy - fit) / 2
  local sigma2 = rate / gamma_sample(shape, self.generator)
  local z = bbb.randn({ d }, 0, 1, self.generator):totable()
  local v = solve_upper_t(m.L, d, z)   -- v ~ N(0, P^-1)
  local s = math.sqrt(sigma2)
  local beta = {}
  for i = 1, d do beta[i] = mu[i] + s * v[i] end
  return beta
end

function Linear:decide(context)
  local x = features(self, context, "decide")
  local best, best_v
  for a = 1, 2 do
    local beta, v = self:sample_beta(a), 0
    for i = 1, self.d do v = v + x[i] * beta[i] end
    if not best_v or v > best_v then best, best_v = a, v end
  end
  return best
end

function Linear:update(context, action, reward)
  local x = features(self, context, "update")
  if action ~= 1 and action ~= 2 then
    error(("linear TS:update: action must be 1 or 2, got %s"):format(tostring(action)), 2)
  end
  if type(reward) ~= "number" or reward ~= reward then
    error(("linear TS:update: reward must be a number, got %s"):format(tostring(reward)), 2)
  end
  local m = self.models[action]
  for i = 1, self.d do m.xy[i] = m.xy[i] + x[i] * reward end
  m.yy = m.yy + reward * reward
  m.n = m.n + 1
  chol_update(m.L, self.d, x)   -- x is consumed
  m.mu = nil
end

-- The Cholesky factor of G + shift I (flat row-major, lower), or nil when
-- that is not positive definite.
local function cholesky(G, d, shift)
  local L = {}
  for i = 1, d do
    local row = (i - 1) * d
    for j = 1, d do
      if j > i then L[row + j] = 0 else
        local s = G[row + j] + (i == j and shift or 0)
        local rj = (j - 1) * d
        for k = 1, j - 1 do s = s - L[row + k] * L[rj + k] end
        if i == j then
          if not (s > 0) then return nil end
          L[row + j] = math.sqrt(s)
        else
          L[row + j] = s / L[rj + j]
        end
      end
    end
  end
  return L
end

--- set_posterior(a, G, xy, yy, n): replaces action a's posterior by the one
-- of n rows with X'X = G (a flat row-major d x d array, d = context_dim + 1,
-- the intercept last), X'y = xy and y'y = yy (NeuralLinear refits it when
-- its features change). P = G + lambda I is factored afresh. A G summed in
-- float32 (NeuralLinear's GEMM over tens of thousands of rows) carries
-- rounding errors far larger than lambda in its big entries, and with
-- collinear features P can come out indefinite: then the diagonal gets
-- 1e-7, 1e-6, ... of G's mean diagonal on top of lambda until it factors
-- (at most 1e-3 of it; past that the error stands), and self.jitter[a]
-- records the amount added.
function Linear:set_posterior(a, G, xy, yy, n)
  local d = self.d
  if #G ~= d * d or #xy ~= d then
    error(("linear TS:set_posterior: G must hold %d and xy %d numbers, got %d and %d"):format(d * d, d, #G, #xy), 2)
  end
  local L, jitter = cholesky(G, d, self.lambda), 0
  if not L then
    local mean_diag = 0
    for i = 1, d do mean_diag = mean_diag + G[(i - 1) * d + i] / d end
    for e = -7, -3 do
      jitter = mean_diag * 10 ^ e
      L = cholesky(G, d, self.lambda + jitter)
      if L then break end
    end
    if not L then error("linear TS:set_posterior: X'X + lambda I is not positive definite", 2) end
  end
  self.jitter = self.jitter or {}
  self.jitter[a] = jitter
  self.models[a] = { L = L, xy = table.move(xy, 1, d, 1, {}), yy = yy, n = n }
end

--- The state for checkpoints: scalars, {name = tensor} (float32 would lose
-- the factor's precision, so the arrays travel as scalars).
function Linear:state()
  local seed, counter = self.generator:state()
  local st = { generator = { ("%d"):format(seed), ("%d"):format(counter) }, models = {} }
  for a, m in ipairs(self.models) do
    st.models[a] = { L = m.L, xy = m.xy, yy = m.yy, n = m.n }
  end
  return st, {}
end

function Linear:set_state(st)
  for a, m in ipairs(st.models) do
    self.models[a] = { L = m.L, xy = m.xy, yy = m.yy, n = math.tointeger(m.n) }
  end
  self.generator:set_state(math.tointeger(tonumber(st.generator[1])), math.tointeger(tonumber(st.generator[2])))
end

--- LinearTS{context_dim = 117, lambda = 0.25, a0 = 6, b0 = 6, seed = | generator =}
return function(o)
  o = o or {}
  local d = (o.context_dim or 117) + 1
  local lambda, a0, b0 = o.lambda or 0.25, o.a0 or 6, o.b0 or 6
  for k, v in pairs { lambda = lambda, a0 = a0, b0 = b0 } do
    if type(v) ~= "number" or not (v > 0) then
      error(("LinearTS: %s must be a number > 0, got %s"):format(k, tostring(v)), 2)
    end
  end
  local self = setmetatable({ name = "linear TS", context_dim = d - 1, d = d, a0 = a0, b0 = b0, lambda = lambda,
    generator = o.generator or bbb.Generator(o.seed or 1), models = {} }, Linear)
  for a = 1, 2 do
    local L, xy = {}, {}
    for i = 1, d * d do L[i] = 0 end
    for i = 1, d do L[(i - 1) * d + i] = math.sqrt(lambda); xy[i] = 0 end
    self.models[a] = { L = L, xy = xy, yy = 0, n = 0 }
  end
  return self
end

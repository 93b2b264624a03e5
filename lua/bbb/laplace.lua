--- bbb.laplace: the Laplace approximation of a network's last layer
-- (MacKay 1992; Daxberger et al. 2021, "Laplace Redux"). The trained
-- weights are the posterior mode; the posterior precision is the
-- generalized Gauss-Newton matrix of the last layer, Kronecker-factored as
-- A (x) G / N, where A = sum_n phi_n phi_n^T over the layer's inputs
-- (with a 1 for the bias) and G = sum_n Lambda_n over the Hessians of the
-- negative log-likelihood in the outputs, plus delta I from an isotropic
-- Gaussian prior whose precision delta maximises the Laplace marginal
-- likelihood. For one Gaussian output the factorization is exact: the
-- posterior of Bayesian linear regression.
--
--   local post = bbb.laplace.last_layer{ features = phi, weight = W, bias = b, labels = y }
--   local probs = post:predict(phi_test)     -- probit approximation
local core = require "bbb.core"

local laplace = {}

local LOG_DELTA_MIN, LOG_DELTA_MAX = math.log(1e-6), math.log(1e6)

local function fail(msg, ...) error(("last_layer: " .. msg):format(...), 3) end

-- Eigenvalues and eigenvectors of a symmetric matrix (Lua rows) by cyclic
-- Jacobi rotations: values[i], vectors[r][i] (column i the i-th vector).
local function eigh(m)
  local n, a, v = #m, {}, {}
  for i = 1, n do
    a[i], v[i] = {}, {}
    for j = 1, n do a[i][j], v[i][j] = m[i][j], i == j and 1 or 0 end
  end
  for _ = 1, 100 do
    local off, scale = 0, 0
    for i = 1, n do
      scale = scale + a[i][i] * a[i][i]
      for j = i + 1, n do off = off + a[i][j] * a[i][j] end
    end
    if off <= 1e-24 * scale or off == 0 then break end
    for p = 1, n - 1 do
      for q = p + 1, n do
        local apq = a[p][q]
        if apq ~= 0 then
          local theta = (a[q][q] - a[p][p]) / (2 * apq)
          local t = (theta >= 0 and 1 or -1) / (math.abs(theta) + math.sqrt(theta * theta + 1))
          local c = 1 / math.sqrt(t * t + 1)
          local s = t * c
          for k = 1, n do   -- columns p, q
            local akp, akq = a[k][p], a[k][q]
            a[k][p], a[k][q] = c * akp - s * akq, s * akp + c * akq
          end
          local ap, aq = a[p], a[q]
          for k = 1, n do   -- rows p, q
            local apk, aqk = ap[k], aq[k]
            ap[k], aq[k] = c * apk - s * aqk, s * apk + c * aqk
          end
          for k = 1, n do
            local vk = v[k]
            local vkp, vkq = vk[p], vk[q]
            vk[p], vk[q] = c * vkp - s * vkq, s * vkp + c * vkq
          end
        end
      end
    end
  end
  local values = {}
  for i = 1, n do values[i] = math.max(a[i][i], 0) end   -- both factors are PSD
  return values, v
end

-- The layer's inputs with a column of ones when there is a bias.
local function with_ones(phi, bias)
  if not bias then return phi end
  return core.cat({ phi, core.ones(phi:size(1), 1) }, 2)
end

-- sum_n log p(y_n | f_n) and G for the likelihood.
local function likelihood_terms(o, f)
  local n, c = f:size(1), f:size(2)
  if o.likelihood == "gaussian" then
    local y = core.is_tensor(o.targets) and o.targets or core.tensor(o.targets)
    local r = (f - y:reshape(n, c)):totable()
    local s2, ll = o.sigma * o.sigma, 0
    for i = 1, n do
      for k = 1, c do ll = ll - 0.5 * (r[i][k] ^ 2 / s2 + math.log(2 * math.pi * s2)) end
    end
    local g = {}
    for i = 1, c do
      g[i] = {}
      for j = 1, c do g[i][j] = i == j and n / s2 or 0 end
    end
    return ll, g
  end
  local p = core.softmax(f, 2)
  local logp, y = core.log_softmax(f, 2):totable(), o.labels
  local ll = 0
  for i = 1, n do ll = ll + logp[i][y[i]] end
  local g, colsum = core.matmul(p:t(), p):neg():totable(), p:sum(1):totable()
  for k = 1, c do g[k][k] = g[k][k] + colsum[k] end
  return ll, g
end

local function check(o)
  if type(o) ~= "table" then fail("expects a table of options") end
  local phi, w = o.features, o.weight
  if not (core.is_tensor(phi) and phi:dim() == 2) then fail("features must be a (N, H) tensor") end
  if not (core.is_tensor(w) and w:dim() == 2 and w:size(2) == phi:size(2)) then
    fail("weight must be a (C, %d) tensor", phi:size(2))
  end
  if o.bias ~= nil and not (core.is_tensor(o.bias) and o.bias:numel() == w:size(1)) then
    fail("bias must be a tensor of %d values", w:size(1))
  end
  local lik = o.likelihood or "categorical"
  if lik ~= "categorical" and lik ~= "gaussian" then fail("likelihood must be categorical or gaussian, got %s", tostring(lik)) end
  if lik == "gaussian" and not (type(o.sigma) == "number" and o.sigma > 0) then fail("gaussian needs sigma > 0") end
  if lik == "categorical" then
    local y = core.is_tensor(o.labels) and o.labels:reshape(-1):totable() or o.labels
    if type(y) ~= "table" or #y ~= phi:size(1) then fail("labels must hold %d classes", phi:size(1)) end
    for i = 1, #y do
      if math.tointeger(y[i]) == nil or y[i] < 1 or y[i] > w:size(1) then
        fail("label %d is %s, expected a class in 1..%d", i, tostring(y[i]), w:size(1))
      end
    end
    o.labels = y
  end
  if o.prior_precision ~= nil and not (type(o.prior_precision) == "number" and o.prior_precision > 0) then
    fail("prior_precision must be a positive number")
  end
  o.likelihood = lik
end

local Posterior = {}
Posterior.__index = Posterior

--- post:log_marglik(delta) -> the Laplace log marginal likelihood at prior
-- precision delta: log p(D | theta*) - delta/2 |theta*|^2 + P/2 log delta
-- - 1/2 log det(A (x) G / N + delta I).
function Posterior:log_marglik(delta)
  local total = self.loglik - 0.5 * delta * self.theta_sq + 0.5 * self.n_params * math.log(delta)
  for _, a in ipairs(self.a) do
    for _, g in ipairs(self.g) do total = total - 0.5 * math.log(a * g / self.n + delta) end
  end
  return total
end

--- post:logit_variance(features) -> (N, C) tensor: the posterior variance
-- of each output f_c = w_c . phi (+ b_c) at these inputs.
function Posterior:logit_variance(features)
  local psi = core.matmul(with_ones(features, self.bias ~= nil), self.u_a)   -- (N, H+1)
  local d = {}
  for i, a in ipairs(self.a) do
    d[i] = {}
    for j, g in ipairs(self.g) do d[i][j] = 1 / (a * g / self.n + self.prior_precision) end
  end
  local v = core.matmul(psi * psi, core.tensor(d))                         -- (N, C) in G's eigenbasis
  return core.matmul(v, (self.u_g * self.u_g):t()):clamp(0)
end

--- post:predict(features) -> (N, C): categorical: class probabilities by
-- the probit approximation, softmax(f / sqrt(1 + pi/8 var f)); gaussian:
-- the mean outputs and their standard deviation (noise included).
function Posterior:predict(features)
  local f = core.linear(features, self.weight, self.bias)
  local var = self:logit_variance(features)
  if self.likelihood == "gaussian" then return f, (var + self.sigma ^ 2):sqrt() end
  return core.softmax(f / (var * (math.pi / 8) + 1):sqrt(), 2)
end

-- The delta in [1e-6, 1e6] maximising the marginal likelihood: golden
-- section on log delta.
local function best_precision(post)
  local function f(x) return -post:log_marglik(math.exp(x)) end
  local g = (math.sqrt(5) - 1) / 2
  local a, b = LOG_DELTA_MIN, LOG_DELTA_MAX
  local c, d = b - g * (b - a), a + g * (b - a)
  local fc, fd = f(c), f(d)
  while b - a > 1e-6 do
    if fc <= fd then b, d, fd = d, c, fc; c = b - g * (b - a); fc = f(c)
    else a, c, fc = c, d, fd; d = a + g * (b - a); fd = f(d) end
  end
  return math.exp((a + b) / 2)
end

--- last_layer{features, weight, bias, likelihood = "categorical" |
-- "gaussian", labels (classes 1..C) | targets and sigma (gaussian),
-- prior_precision} -> posterior: features (N, H) are the last layer's
-- inputs on the training rows, weight (C, H) and bias (C) its trained
-- values. Without prior_precision, the one maximising log_marglik is
-- chosen. post.prior_precision, post.log_marglik(delta),
-- post:logit_variance(x), post:predict(x).
function laplace.last_layer(o)
  check(o)
  local phi = with_ones(o.features:detach(), o.bias ~= nil)
  local w = o.weight:detach()
  local wt = o.bias and core.cat({ w, o.bias:detach():reshape(w:size(1), 1) }, 2) or w
  local f = core.matmul(phi, wt:t())
  local ll, g = likelihood_terms(o, f)
  local a_vals, u_a = eigh(core.matmul(phi:t(), phi):totable())
  local g_vals, u_g = eigh(g)
  local post = setmetatable({ likelihood = o.likelihood, sigma = o.sigma, weight = w,
    bias = o.bias and o.bias:detach() or nil, n = phi:size(1), loglik = ll,
    theta_sq = (wt * wt):sum():item(), n_params = wt:numel(), a = a_vals, g = g_vals,
    u_a = core.tensor(u_a), u_g = core.tensor(u_g) }, Posterior)
  post.prior_precision = o.prior_precision or best_precision(post)
  return post
end

return laplace

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
local FLOAT_MAX = 3.4028234663852886e38

-- Raised without a position: the public functions re-raise at their caller.
local function fail(msg, ...) error(("last_layer: " .. msg):format(...), 0) end

-- Refuses NaN and inf in the (N, K) tensor t, naming the first such entry
-- (x - x is 0 for a finite x, NaN otherwise).
local function check_finite(t, what, name)
  local d = t:detach()
  if (d - d):sum():item() == 0 then return end
  local rows = (d - d):sum(2):totable()
  for r = 1, #rows do
    if rows[r] ~= 0 then
      for c, v in ipairs(d:narrow(1, r, 1):reshape(-1):totable()) do
        if v ~= v or v == math.huge or v == -math.huge then
          error(("%s: %s (%d, %d) is %s, not a finite number"):format(what, name, r, c,
            v ~= v and "NaN" or tostring(v)), 0)
        end
      end
    end
  end
end

-- The largest |feature| whose float32 products stay finite: the logits
-- x . w_c + b_c, and the variances, sums of (x . u)^2 / (a g / N + delta)
-- over orthonormal u, at most |x|^2 / delta with |x|^2 <= (H + 1) max|x|^2.
local function feature_limit(h, w_max, b_max, delta)
  local by_variance = math.sqrt(FLOAT_MAX / 2 * delta / (h + 1))
  local by_logits = w_max > 0 and (FLOAT_MAX / 2 - b_max) / (h * w_max) or math.huge
  return math.min(by_variance, by_logits)
end

-- Checks the (N, H) features: finite, and small enough for feature_limit.
local function check_features(x, h, w, b, delta, what)
  if not (core.is_tensor(x) and x:dim() == 2 and x:size(2) == h) then
    error(("%s: features must be a (N, %d) tensor, got %s"):format(what, h,
      core.is_tensor(x) and table.concat(x:size(), "x") or type(x)), 0)
  end
  if x:numel() == 0 then return end
  check_finite(x, what, "features")
  local w_max, b_max = w:detach():abs():max():item(), b and b:detach():abs():max():item() or 0
  local limit = feature_limit(h, w_max, b_max, delta)
  local top, at = x:detach():abs():reshape(-1):max(1)
  top, at = top:item(), at:item()
  if top > limit then
    error(("%s: features (%d, %d) is %g: products of features this large overflow float32 "
      .. "(here |features| must stay below %.3g)"):format(what, (at - 1) // h + 1, (at - 1) % h + 1,
      x:detach():reshape(-1):narrow(1, at, 1):item(), limit), 0)
  end
end

-- The layer's inputs with a column of ones when there is a bias.
local function with_ones(phi, bias)
  if not bias then return phi end
  return core.cat({ phi, core.ones(phi:size(1), 1) }, 2)
end

-- The softmax of the logits z (a Lua row) into p, in double; returns
-- log sum exp z.
local function softmax_row(z, p)
  local top, sum = -math.huge, 0
  for k = 1, #z do if z[k] > top then top = z[k] end end
  for k = 1, #z do p[k] = math.exp(z[k] - top); sum = sum + p[k] end
  for k = 1, #z do p[k] = p[k] / sum end
  return top + math.log(sum)
end

-- sum_n log p(y_n | f_n) and G (Lua rows) for the likelihood. The
-- categorical G = sum_n diag(p_n) - p_n p_n^T is summed in double: its
-- null direction (all logits up alike) must stay null, or tiny float32
-- residues scaled by large features swamp the prior there.
local function likelihood_terms(o, f)
  local n, c, rows = f:size(1), f:size(2), f:totable()
  local g = {}
  for i = 1, c do
    g[i] = {}
    for j = 1, c do g[i][j] = 0 end
  end
  local ll = 0
  if o.likelihood == "gaussian" then
    local y, s2 = o.targets, o.sigma * o.sigma
    for i = 1, n do
      for k = 1, c do ll = ll - 0.5 * ((rows[i][k] - y[i][k]) ^ 2 / s2 + math.log(2 * math.pi * s2)) end
    end
    for i = 1, c do g[i][i] = n / s2 end
    return ll, g
  end
  local p, y = {}, o.labels
  for i = 1, n do
    ll = ll + rows[i][y[i]] - softmax_row(rows[i], p)
    for k = 1, c do
      local pk, gk = p[k], g[k]
      gk[k] = gk[k] + pk
      for j = k, c do gk[j] = gk[j] - pk * p[j] end
    end
  end
  for k = 1, c do
    for j = 1, k - 1 do g[k][j] = g[j][k] end
  end
  return ll, g
end

-- The targets as (N, C) Lua rows of finite numbers.
local function check_targets(t, n, c)
  local y = core.is_tensor(t) and t:detach():reshape(-1):totable() or t
  if type(y) ~= "table" or #y ~= n * c then fail("targets must hold %d values", n * c) end
  local rows = {}
  for i = 1, n do
    rows[i] = {}
    for k = 1, c do
      local v = y[(i - 1) * c + k]
      if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
        fail("target %d is %s, not a finite number", (i - 1) * c + k, tostring(v))
      end
      rows[i][k] = v
    end
  end
  return rows
end

local function check_labels(labels, n, c)
  local y = core.is_tensor(labels) and labels:reshape(-1):totable() or labels
  if type(y) ~= "table" or #y ~= n then fail("labels must hold %d classes", n) end
  for i = 1, n do
    if math.tointeger(y[i]) == nil or y[i] < 1 or y[i] > c then
      fail("label %d is %s, expected a class in 1..%d", i, tostring(y[i]), c)
    end
  end
  return y
end

-- The options checked, as a new table (the caller's is left as it was).
local function check(o)
  if type(o) ~= "table" then fail("expects a table of options") end
  local phi, w, b = o.features, o.weight, o.bias
  if not (core.is_tensor(phi) and phi:dim() == 2) then fail("features must be a (N, H) tensor") end
  local n, h = phi:size(1), phi:size(2)
  if not (core.is_tensor(w) and w:dim() == 2 and w:size(2) == h) then fail("weight must be a (C, %d) tensor", h) end
  local c = w:size(1)
  if b ~= nil and not (core.is_tensor(b) and b:numel() == c) then fail("bias must be a tensor of %d values", c) end
  check_finite(w, "last_layer", "weight")
  if b then check_finite(b:reshape(1, c), "last_layer", "bias") end
  local lik = o.likelihood or "categorical"
  if lik ~= "categorical" and lik ~= "gaussian" then fail("likelihood must be categorical or gaussian, got %s", tostring(lik)) end
  local delta = o.prior_precision
  if delta ~= nil and not (type(delta) == "number" and delta > 0 and delta < math.huge) then
    fail("prior_precision must be a positive number")
  end
  check_features(phi, h, w, b, delta or math.exp(LOG_DELTA_MIN), "last_layer")
  local out = { features = phi:detach(), weight = w:detach(), bias = b and b:detach():reshape(c),
    likelihood = lik, prior_precision = delta }
  if lik == "gaussian" then
    if not (type(o.sigma) == "number" and o.sigma > 0 and o.sigma < math.huge) then fail("gaussian needs sigma > 0") end
    out.sigma, out.targets = o.sigma, check_targets(o.targets, n, c)
  else
    out.labels = check_labels(o.labels, n, c)
  end
  return out
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

local function logit_variance(self, features, what)
  check_features(features, self.weight:size(2), self.weight, self.bias, self.prior_precision, what)
  local psi = core.matmul(with_ones(features:detach(), self.bias ~= nil), self.u_a)   -- (N, H+1)
  local d = {}
  for i, a in ipairs(self.a) do
    d[i] = {}
    for j, g in ipairs(self.g) do d[i][j] = 1 / (a * g / self.n + self.prior_precision) end
  end
  local v = core.matmul(psi * psi, core.tensor(d))                         -- (N, C) in G's eigenbasis
  return core.matmul(v, (self.u_g * self.u_g):t()):clamp(0)
end

--- post:logit_variance(features) -> (N, C) tensor: the posterior variance
-- of each output f_c = w_c . phi (+ b_c) at these inputs.
-- @raise logit_variance: features (ROW, COLUMN) is ..., not a finite number
function Posterior:logit_variance(features)
  local ok, var = pcall(logit_variance, self, features, "logit_variance")
  if not ok then error(var, 2) end
  return var
end

local function predict(self, features)
  local var = logit_variance(self, features, "predict")
  local f = core.linear(features:detach(), self.weight, self.bias)
  if self.likelihood == "gaussian" then return f, (var + self.sigma ^ 2):sqrt() end
  return core.softmax(f / (var * (math.pi / 8) + 1):sqrt(), 2)
end

--- post:predict(features) -> (N, C): categorical: class probabilities by
-- the probit approximation, softmax(f / sqrt(1 + pi/8 var f)); gaussian:
-- the mean outputs and their standard deviation (noise included).
-- @raise predict: features (ROW, COLUMN) is ..., not a finite number
function Posterior:predict(features)
  local ok, out, std = pcall(predict, self, features)
  if not ok then error(out, 2) end
  return out, std
end

-- S draws of the last layer's outputs at these inputs, (S, N, C): the
-- weights drawn from the posterior, one draw shared by every input as one
-- network is. In the eigenbases of A and G the posterior of the weights
-- is independent: Z (C, H+1) with variance d_ij = 1/(a_i g_j/N + delta),
-- and the outputs are f + (psi Z^T) U_G^T, psi = [phi, 1] U_A.
local function sample_outputs(self, features, S, gen, what)
  check_features(features, self.weight:size(2), self.weight, self.bias, self.prior_precision, what)
  local psi = core.matmul(with_ones(features:detach(), self.bias ~= nil), self.u_a)   -- (N, H+1)
  local f = core.linear(features:detach(), self.weight, self.bias)                   -- (N, C)
  local sd = {}
  for j, g in ipairs(self.g) do
    sd[j] = {}
    for i, a in ipairs(self.a) do sd[j][i] = 1 / math.sqrt(a * g / self.n + self.prior_precision) end
  end
  local scale = core.tensor(sd)                                                      -- (C, H+1)
  local draws = {}
  for s = 1, S do
    local z = core.randn(scale:size(), 0, 1, gen) * scale
    draws[s] = (f + core.matmul(core.matmul(psi, z:t()), self.u_g:t())):reshape(1, f:size(1), f:size(2))
  end
  return core.cat(draws, 1)
end

local function check_draws(S, what)
  if math.type(S) ~= "integer" or S < 1 then error(("%s: S must be a positive integer, got %s"):format(what, tostring(S)), 3) end
end

--- post:sample(features, S [, generator]) -> (S, N, C) tensor: S draws of
-- the outputs at these inputs, each from one draw of the last layer's
-- weights from the posterior (shared by all inputs, as one network).
-- @raise sample: S must be a positive integer, got ...
function Posterior:sample(features, S, gen)
  check_draws(S, "sample")
  local ok, out = pcall(sample_outputs, self, features, S, gen, "sample")
  if not ok then error(out, 2) end
  return out
end

--- post:predict_sampled(features, S [, generator]) -> (N, C): categorical:
-- the class probabilities averaged over S draws of the last layer (the MC
-- predictive, beside predict's probit approximation); gaussian: the mean
-- of the drawn outputs.
-- @raise predict_sampled: S must be a positive integer, got ...
function Posterior:predict_sampled(features, S, gen)
  check_draws(S, "predict_sampled")
  local ok, draws = pcall(sample_outputs, self, features, S, gen, "predict_sampled")
  if not ok then error(draws, 2) end
  if self.likelihood == "gaussian" then return draws:mean(1) end
  return core.softmax(draws, 3):mean(1)
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

-- The eigenvalues (Lua array, clamped at 0: both factors are PSD, and
-- rounding leaves their null ones a hair below) and eigenvectors (a
-- tensor) of A or G.
local function eigen(x, gram)
  local values, vectors = core.eigh(x, gram)
  for i, v in ipairs(values) do values[i] = math.max(v, 0) end
  return values, vectors
end

local function fit(o)
  o = check(o)
  local phi = with_ones(o.features, o.bias ~= nil)
  local w = o.weight
  local wt = o.bias and core.cat({ w, o.bias:reshape(w:size(1), 1) }, 2) or w
  local ll, g = likelihood_terms(o, core.matmul(phi, wt:t()))
  local a_vals, u_a = eigen(phi, true)
  local g_vals, u_g = eigen(g)
  local post = setmetatable({ likelihood = o.likelihood, sigma = o.sigma, weight = w, bias = o.bias,
    n = phi:size(1), loglik = ll, theta_sq = (wt * wt):sum():item(), n_params = wt:numel(),
    a = a_vals, g = g_vals, u_a = u_a, u_g = u_g }, Posterior)
  post.prior_precision = o.prior_precision or best_precision(post)
  return post
end

--- split(net) -> body, head: a network's last layer (a Linear) and
-- body(x), the layers before it, whose output is the features last_layer
-- takes.
-- @raise split: the net does not end in a Linear layer
function laplace.split(net)
  local layers = net:children()
  local head = layers[#layers]
  if not (head and head.weight and head.__name == "Linear") then
    error("split: the net does not end in a Linear layer", 2)
  end
  return function(x)
    for i = 1, #layers - 1 do x = layers[i]:forward(x) end
    return x
  end, head
end

--- last_layer{features, weight, bias, likelihood = "categorical" |
-- "gaussian", labels (classes 1..C) | targets and sigma (gaussian),
-- prior_precision} -> posterior: features (N, H) are the last layer's
-- inputs on the training rows, weight (C, H) and bias (C) its trained
-- values. Without prior_precision, the one maximising log_marglik is
-- chosen. post.prior_precision, post.log_marglik(delta),
-- post:logit_variance(x), post:predict(x). Features must be finite and
-- small enough that their float32 products cannot overflow.
-- @raise last_layer: features (ROW, COLUMN) is ..., not a finite number
function laplace.last_layer(o)
  local ok, post = pcall(fit, o)
  if not ok then error(post, 2) end
  return post
end

return laplace

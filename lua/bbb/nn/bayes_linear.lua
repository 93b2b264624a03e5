--- BayesLinear(in, out, opts): a layer with a Gaussian posterior over every
-- weight, w = mu + softplus(rho) * eps.
--
-- opts:
--   prior      bbb.prior.* or a Lua table with log_prob(w) (default: the
--              paper's ScaleMixture{pi = 0.5, sigma1 = 1, sigma2 = e^-6})
--   estimator  "weight" (the paper: one weight sample per forward),
--              "local" (local reparameterization: sample pre-activations),
--              "flipout" (one shared perturbation, decorrelated by signs)
--   kl         "mc" (log q(w) - log p(w) at the sample) or "analytic"
--              (Gaussian prior only)
--   mu_scale   mu starts uniform in [-s, s] (default 1 / sqrt(in); 0: all zero)
--   rho_init   rho starts at this value (default -5: sigma ~ 0.0067)
--   mode       "sample" or "mean" (posterior means) for evaluation
--   bias       false for no bias (default true)
--   generator  a bbb.Generator (default: the module's)
--   masked     true: start with all-ones pruning masks (what bbb.nn.build
--              does for a saved pruned layer before loading its state)
--
-- Pruning (bbb.nn.prune) sets weight_mask and bias_mask: buffers of 0 and 1,
-- saved and loaded with the parameters but never trained. Every forward
-- multiplies the sampled weights (and, in mean mode, the means) by them, so
-- a removed weight is exactly 0 in every MC sample: sigma = softplus(rho)
-- can never be 0 itself.
--
-- Tests may fix the noise: layer.noise = {w = , b = , out = , s_in = , s_out = }.
-- @usage
--   local layer = bbb.nn.BayesLinear(784, 400, { prior = bbb.prior.Gaussian{ sigma = 1 }, estimator = "local" })
--   local out = layer(bbb.rand(8, 784))   -- a fresh draw of the weights (or pre-activations) each call
--   print(out:size(2), layer:kl():item())   -- 400, and the complexity term of that draw
local bbb = require "bbb"
local core = require "bbb.core"
local Module = require "bbb.nn.module"
local prior_mod = require "bbb.prior"
local layers = require "bbb.nn.layers"

local BayesLinear = Module.class("BayesLinear")

local ESTIMATORS = { weight = true, ["local"] = true, flipout = true }

local function choice(layer, v, allowed, what)
  if not allowed[v] then
    local names = {}
    for k in pairs(allowed) do names[#names + 1] = '"' .. k .. '"' end
    table.sort(names)
    error(("%s: %s must be one of %s, got %s"):format(layer, what, table.concat(names, ", "),
      tostring(v)), 5)
  end
  return v
end

-- A number option: finite, and >= lo when lo is given; default when absent.
local function finite_option(layer, opts, key, default, lo)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge or (lo and v < lo) then
    error(("%s: %s must be a finite number%s, got %s"):format(layer, key, lo and (" >= " .. lo) or "",
      type(v) == "string" and ("'" .. v .. "'") or tostring(v)), 5)
  end
  return v
end

--- BayesLinear.init_posterior(self, layer, weight_shape, fan_in, n_out, opts):
-- the part every Bayesian layer shares (BayesLinear, BayesConv2d): the prior,
-- estimator, KL mode and mode checked, and mu, rho (and masks) made for a
-- weight of weight_shape and a bias of n_out. layer names it in messages;
-- called from the layer's init.
function BayesLinear.init_posterior(self, layer, weight_shape, fan_in, n_out, opts)
  self.prior = prior_mod.check(opts.prior or prior_mod.ScaleMixture{}, layer)
  self.estimator = choice(layer, opts.estimator or "weight", ESTIMATORS, "estimator")
  self.kl_mode = choice(layer, opts.kl or "mc", { mc = true, analytic = true }, "kl")
  self.mode = choice(layer, opts.mode or "sample", { sample = true, mean = true }, "mode")
  if self.kl_mode == "analytic" and not (prior_mod.is_fused(self.prior) and self.prior.kind == "gaussian") then
    error(("%s: kl = \"analytic\" needs a Gaussian prior, got %s"):format(layer, tostring(self.prior)), 4)
  end
  self.generator = opts.generator
  local s = finite_option(layer, opts, "mu_scale", 1 / math.sqrt(fan_in), 0)
  local rho = finite_option(layer, opts, "rho_init", -5)
  -- mu_scale = 0 starts every mean at 0
  local function init_mu(shape)
    if s == 0 then return bbb.zeros(shape) end
    return bbb.rand(shape, -s, s, opts.generator)
  end
  self.weight_mu = init_mu(weight_shape):requires_grad(true)
  self.weight_rho = bbb.full(weight_shape, rho):requires_grad(true)
  if opts.bias ~= false then
    self.bias_mu = init_mu({ n_out }):requires_grad(true)
    self.bias_rho = bbb.full({ n_out }, rho):requires_grad(true)
  end
  if opts.masked then
    self.weight_mask = bbb.ones(weight_shape)
    self.bias_mask = self.bias_mu and bbb.ones{ n_out } or nil
  end
end

function BayesLinear:init(n_in, n_out, opts)
  opts = opts or {}
  if math.type(n_in) ~= "integer" or n_in < 1 or math.type(n_out) ~= "integer" or n_out < 1
      or n_in * n_out >= 1 << 31 then
    error(("BayesLinear: sizes must be positive integers with fewer than 2^31 weights, got %s, %s")
      :format(tostring(n_in), tostring(n_out)), 3)
  end
  self.n_in, self.n_out = n_in, n_out
  BayesLinear.init_posterior(self, "BayesLinear", { n_out, n_in }, n_in, n_out, opts)
end

function BayesLinear:own_buffers()
  local out = {}
  if self.weight_mask then out[1] = { "weight_mask", self.weight_mask } end
  if self.bias_mask then out[#out + 1] = { "bias_mask", self.bias_mask } end
  return out
end

--- set_mask(weight_mask [, bias_mask]): keeps only the weights where the
-- mask is 1; their means are set to 0 too (the masks are copied).
function BayesLinear:set_mask(wm, bm)
  local function check(m, like, what)
    if not bbb.is_tensor(m) or table.concat(m:size(), "x") ~= table.concat(like:size(), "x") then
      error(("BayesLinear:set_mask: %s must be a tensor of size %s, got %s"):format(what,
        table.concat(like:size(), "x"), bbb.is_tensor(m) and table.concat(m:size(), "x") or type(m)), 3)
    end
    return m:detach():clone()
  end
  self.weight_mask = check(wm, self.weight_mu, "weight_mask")
  if self.bias_mu then self.bias_mask = check(bm, self.bias_mu, "bias_mask") end
  bbb.no_grad(function()
    self.weight_mu:copy(self.weight_mu * self.weight_mask)
    if self.bias_mu then self.bias_mu:copy(self.bias_mu * self.bias_mask) end
  end)
  return self
end

-- t times the mask m, or t itself when there is no mask
local function masked(t, m)
  if t == nil or m == nil then return t end
  return t * m
end

function BayesLinear:own_parameters()
  local out = { { "weight_mu", self.weight_mu }, { "weight_rho", self.weight_rho } }
  if self.bias_mu then
    out[3], out[4] = { "bias_mu", self.bias_mu }, { "bias_rho", self.bias_rho }
  end
  return out
end

local function noise(self, key) return self.noise and self.noise[key] end

--- sample(mu, rho, key [, out]) -> a weight sample (or what out asks for),
-- its complexity term. The fused C pass evaluates C
-- priors itself; a Lua prior is evaluated on the sample and differentiated
-- by the tape. out: what to return beside the complexity term: "w" (the
-- sample, the default), "var" (sigma^2) or "delta" (the sample minus mu);
-- the C pass forms either in the same pass as the sample.
function BayesLinear:sample(mu, rho, key, out)
  local p = self.prior
  if self.kl_mode == "analytic" then
    local o = core.bayes_sample(mu, rho, nil, self.generator, noise(self, key), out)
    return o, prior_mod.gaussian_kl(p, mu, rho:softplus())
  end
  if prior_mod.is_fused(p) then
    return core.bayes_sample(mu, rho, p, self.generator, noise(self, key), out)
  end
  local w, logq = core.bayes_sample(mu, rho, nil, self.generator, noise(self, key))
  local lp = p:log_prob(w)
  if not bbb.is_tensor(lp) or lp:numel() ~= 1 then
    error(("%s: the Lua prior's log_prob must return a one-element tensor, got %s")
      :format(self.__name, bbb.is_tensor(lp) and ("a tensor of size " .. table.concat(lp:size(), "x")) or type(lp)), 3)
  end
  local o = w
  if out == "var" then o = rho:softplus():square() elseif out == "delta" then o = w - mu end
  return o, logq - lp
end

--- sample_bias([out]) -> the bias sample (or what out asks for) and its complexity term, or nil
-- and 0 without a bias.
function BayesLinear:sample_bias(out)
  if not self.bias_mu then return nil, 0 end
  return self:sample(self.bias_mu, self.bias_rho, "b", out)
end

-- +1 or -1 with equal probability
local function random_signs(shape, gen)
  return bbb.rand(shape, 0, 1, gen):lt(0.5) * 2 - 1
end

function BayesLinear:forward(x)
  layers.check_input(x, "BayesLinear", self.n_in)
  if self.mode == "mean" and not self.training then
    self.last_kl = nil
    return bbb.linear(x, masked(self.weight_mu, self.weight_mask), masked(self.bias_mu, self.bias_mask))
  end
  local est, wm, bm = self.estimator, self.weight_mask, self.bias_mask
  if est == "weight" then
    local w, klw = self:sample(self.weight_mu, self.weight_rho, "w")
    local b, klb = self:sample_bias()
    self.last_kl = klw + klb
    return bbb.linear(x, masked(w, wm), masked(b, bm))
  elseif est == "local" then
    -- Pre-activations ~ N(x mu^T + b_mu, x^2 sigma^2^T + sigma_b^2). The
    -- complexity term still needs a weight sample (or the analytic KL).
    local var_w, klw = self:sample(self.weight_mu, self.weight_rho, "w", "var")
    local var_b, klb = self:sample_bias("var")
    self.last_kl = klw + klb
    local mean = bbb.linear(x, masked(self.weight_mu, wm), masked(self.bias_mu, bm))
    local var = bbb.linear(x:square(), masked(var_w, wm), masked(var_b, bm))
    local eps = noise(self, "out") or bbb.randn({ x:size(1), self.n_out }, 0, 1, self.generator)
    return mean + (var + 1e-16):sqrt() * eps
  else -- flipout: x mu^T + ((x * s_in) dW^T) * s_out with dW = w - mu
    local dw, klw = self:sample(self.weight_mu, self.weight_rho, "w", "delta")
    local b, klb = self:sample_bias()
    self.last_kl = klw + klb
    local s_in = noise(self, "s_in") or random_signs({ x:size(1), self.n_in }, self.generator)
    local s_out = noise(self, "s_out") or random_signs({ x:size(1), self.n_out }, self.generator)
    return bbb.linear(x, masked(self.weight_mu, wm), masked(b, bm))
      + bbb.linear(x * s_in, masked(dw, wm)) * s_out
  end
end

--- kl() -> the complexity term log q(w) - log p(w) of the last forward.
function BayesLinear:kl() return self.last_kl end

function BayesLinear:config()
  return { type = "BayesLinear", n_in = self.n_in, n_out = self.n_out,
           prior = prior_mod.config(self.prior), estimator = self.estimator, kl = self.kl_mode,
           mode = self.mode, bias = self.bias_mu ~= nil, masked = self.weight_mask ~= nil or nil }
end

--- Signal-to-noise ratios |mu| / sigma of the weights (a tensor like mu).
function BayesLinear:snr()
  return bbb.no_grad(function() return self.weight_mu:abs() / self.weight_rho:softplus() end)
end

function BayesLinear:__tostring()
  return ("BayesLinear(%d -> %d, prior=%s, estimator=%s%s)"):format(self.n_in, self.n_out,
    prior_mod.describe(self.prior), self.estimator, self.kl_mode == "analytic" and ", kl=analytic" or "")
end

return BayesLinear

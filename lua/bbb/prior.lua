--- bbb.prior: priors over weights.
-- Gaussian, ScaleMixture and Laplace run inside the fused C sampling pass.
-- Any table with log_prob(w) -> 0-d tensor, built from differentiable tensor
-- ops, is a prior too: it is called once per layer per step on the sampled
-- weights and differentiated by the tape.
local core = require "bbb.core"

local prior = {}

local CPrior = {}
CPrior.__index = CPrior

function CPrior:log_prob(w) return core.prior_log_prob(self, w) end

function CPrior:__tostring()
  if self.kind == "gaussian" then return ("Gaussian{sigma=%g}"):format(self.sigma) end
  if self.kind == "laplace" then return ("Laplace{b=%g}"):format(self.b) end
  return ("ScaleMixture{pi=%g, sigma1=%g, sigma2=%g}"):format(self.pi, self.sigma1, self.sigma2)
end

local function make(fields, what)
  local p = setmetatable(fields, CPrior)
  local ok, err = pcall(core.check_prior, p)
  if not ok then error(err, 3) end
  return p
end

local function num(opts, key, default, what)
  local v = opts[key]
  if v == nil then v = default end
  if type(v) ~= "number" then
    error(("%s prior: %s must be a number, got %s"):format(what, key, type(v)), 3)
  end
  return v
end

--- N(0, sigma^2)
function prior.Gaussian(opts)
  opts = opts or {}
  return make({ kind = "gaussian", sigma = num(opts, "sigma", 1, "Gaussian") })
end

--- pi N(0, sigma1^2) + (1 - pi) N(0, sigma2^2), the paper's prior.
function prior.ScaleMixture(opts)
  opts = opts or {}
  return make({ kind = "mixture", pi = num(opts, "pi", 0.5, "ScaleMixture"),
                sigma1 = num(opts, "sigma1", 1, "ScaleMixture"),
                sigma2 = num(opts, "sigma2", math.exp(-6), "ScaleMixture") })
end

--- Laplace(0, b)
function prior.Laplace(opts)
  opts = opts or {}
  return make({ kind = "laplace", b = num(opts, "b", 1, "Laplace") })
end

--- True for priors the fused C pass evaluates itself.
function prior.is_fused(p)
  return getmetatable(p) == CPrior
end

--- Checks that p can serve as a prior; errors name the problem.
function prior.check(p, where)
  where = where or "prior"
  if type(p) ~= "table" or type(p.log_prob) ~= "function" then
    error(("%s: a prior is a table with a log_prob(w) function, got %s"):format(where, type(p)), 3)
  end
  return p
end

--- Analytic KL(q || p) summed over weights, for a Gaussian prior; q has
-- means mu and standard deviations sigma (tensors).
function prior.gaussian_kl(p, mu, sigma)
  if not (prior.is_fused(p) and p.kind == "gaussian") then
    error(("kl = 'analytic' needs a Gaussian prior, got %s"):format(tostring(p)), 3)
  end
  local s2 = p.sigma * p.sigma
  -- log(sp / s) + (s^2 + mu^2) / (2 sp^2) - 1/2
  local t = (sigma:square() + mu:square()) * (0.5 / s2) - sigma:log()
  return t:sum() + mu:numel() * (math.log(p.sigma) - 0.5)
end

return prior

--- bbb.elbo: the variational free energy of Blundell et al. (2015), eq. 1-2,
-- estimated by Monte Carlo on a minibatch:
--
--   F_i = kl_weight_i * (log q(w) - log p(w)) - log p(D_i | w),   w ~ q
--
-- kl_weight: "uniform" gives 1/M for each of M minibatches (so the epoch
-- sums to one complexity term), "blundell" gives 2^(M-i) / (2^M - 1) for
-- minibatch i (eq. 9), or a fixed number. The loss to differentiate is F_i
-- divided by the batch size, so learning rates mean what they mean for an
-- ordinary classifier; the terms come back separately, per example and in
-- total, so a log line says exactly what it is.
local bbb = require "bbb"

local elbo = {}

local ELBO = {}
ELBO.__index = ELBO

local function positive_int(v, what)
  if math.type(v) ~= "integer" or v < 1 then
    error(("ELBO: %s must be a positive integer, got %s"):format(what, tostring(v)), 3)
  end
  return v
end

--- ELBO{n_data =, n_batches = | batch_size =, likelihood = "categorical" | "gaussian"
--   | "heteroscedastic" | "student-t", sigma = (gaussian noise, student-t scale; heteroscedastic: its floor),
--   df = (student-t: the degrees of freedom, a positive integer), learn_sigma = false, kl_weight = "uniform", samples = 1,
--   kl = "mc" | "analytic" | nil (nil: each layer's own setting),
--   reduction = "mean" (the loss per example) | "sum" (summed over the batch)}
-- @raise ELBO: n_data must be a positive integer, got ... (and the same for n_batches, batch_size, samples)
-- @raise ELBO: likelihood must be "categorical", "gaussian", "heteroscedastic" or "student-t", got ...
-- @raise ELBO: sigma must be a number > 0, got ...
-- @raise ELBO: the student-t likelihood needs df, a positive integer, got ...
-- @usage
--   local elbo = bbb.elbo.ELBO{ n_data = 60000, batch_size = 128 }             -- categorical
--   local reg = bbb.elbo.ELBO{ n_data = 500, n_batches = 1, likelihood = "gaussian", learn_sigma = true }
--   local heavy = bbb.elbo.ELBO{ n_data = 500, n_batches = 1, likelihood = "student-t", df = 4, learn_sigma = true }
function elbo.ELBO(opts)
  opts = opts or {}
  local self = setmetatable({}, ELBO)
  self.n_data = positive_int(opts.n_data, "n_data")
  if opts.n_batches == nil and opts.batch_size then
    self.n_batches = math.ceil(self.n_data / positive_int(opts.batch_size, "batch_size"))
  else
    self.n_batches = positive_int(opts.n_batches, "n_batches")
  end
  self.samples = positive_int(opts.samples or 1, "samples")
  self.likelihood = opts.likelihood or "categorical"
  local known = { categorical = true, gaussian = true, heteroscedastic = true, ["student-t"] = true }
  if not known[self.likelihood] then
    error(('ELBO: likelihood must be "categorical", "gaussian", "heteroscedastic" or "student-t", got %s')
      :format(tostring(self.likelihood)), 2)
  end
  if self.likelihood == "student-t" then
    local df = opts.df
    if not (math.type(df) == "integer" and df >= 1) then
      error(("ELBO: the student-t likelihood needs df, a positive integer, got %s"):format(tostring(df)), 2)
    end
    self.df, self.t_lognorm = df, bbb.metrics.student_t_lognorm(df)
  elseif opts.df ~= nil then
    error(("ELBO: df applies to the student-t likelihood only, not %s"):format(self.likelihood), 2)
  end
  local kw = opts.kl_weight or "uniform"
  if kw ~= "uniform" and kw ~= "blundell" and not (type(kw) == "number" and kw >= 0 and kw < math.huge) then
    error(('ELBO: kl_weight must be "uniform", "blundell" or a finite number >= 0, got %s'):format(tostring(kw)), 2)
  end
  self.kl_weight = kw
  if opts.kl ~= nil and opts.kl ~= "mc" and opts.kl ~= "analytic" then
    error(('ELBO: kl must be "mc" or "analytic", got %s'):format(tostring(opts.kl)), 2)
  end
  self.kl = opts.kl
  self.reduction = opts.reduction or "mean"
  if self.reduction ~= "mean" and self.reduction ~= "sum" then
    error(('ELBO: reduction must be "mean" or "sum", got %s'):format(tostring(opts.reduction)), 2)
  end
  if self.likelihood ~= "categorical" then
    local s = opts.sigma or 1
    if type(s) ~= "number" or not (s > 0) then
      error(("ELBO: sigma must be a number > 0, got %s"):format(tostring(s)), 2)
    end
    if opts.learn_sigma and self.likelihood == "heteroscedastic" then
      error("ELBO: learn_sigma does not apply to the heteroscedastic likelihood (the network gives its noise)", 2)
    end
    if opts.sigma_max ~= nil then
      local m = opts.sigma_max
      if self.likelihood ~= "heteroscedastic" or type(m) ~= "number" or not (m > s and m < math.huge) then
        error(("ELBO: sigma_max needs the heteroscedastic likelihood and a finite number > sigma, got %s")
          :format(tostring(m)), 2)
      end
      self.sigma_max = m
    end
    if opts.learn_sigma then
      -- sigma = softplus(noise_rho), learned with the other parameters
      self.noise_rho = bbb.tensor{ math.log(math.exp(s) - 1) }:requires_grad(true)
    else
      self.sigma_value = s
    end
  end
  self.steps = 0
  return self
end

function ELBO:__tostring()
  local parts = { ("n_data=%d"):format(self.n_data), ("n_batches=%d"):format(self.n_batches),
                  "likelihood=" .. self.likelihood, "kl_weight=" .. tostring(self.kl_weight),
                  ("samples=%d"):format(self.samples), "reduction=" .. self.reduction }
  if self.kl then parts[#parts + 1] = "kl=" .. self.kl end
  if self.likelihood == "gaussian" or self.likelihood == "student-t" then
    parts[#parts + 1] = self.noise_rho and "sigma=learned" or ("sigma=%g"):format(self.sigma_value)
    if self.df then parts[#parts + 1] = ("df=%d"):format(self.df) end
  elseif self.likelihood == "heteroscedastic" then
    parts[#parts + 1] = ("sigma=%g+softplus(out[2])"):format(self.sigma_value)
  end
  return "ELBO{" .. table.concat(parts, ", ") .. "}"
end

--- The weight of the complexity term for minibatch i (1-based) of M.
-- @usage
--   local e = bbb.elbo.ELBO{ n_data = 1000, n_batches = 10 }
--   assert(e:weight(1) == 0.1)   -- uniform: 1 / the number of minibatches
function ELBO:weight(i)
  local kw, M = self.kl_weight, self.n_batches
  if type(kw) == "number" then return kw end
  if kw == "uniform" then return 1 / M end
  if math.type(i) ~= "integer" or i < 1 or i > M then
    error(('ELBO: kl_weight "blundell" needs the minibatch index 1..%d, got %s'):format(M, tostring(i)), 3)
  end
  -- 2^(M-i) / (2^M - 1) = 2^-i / (1 - 2^-M): no overflow for any M
  return 2.0 ^ -i / (1 - 2.0 ^ -M)
end

--- Learned noise parameters (empty unless learn_sigma).
function ELBO:parameters() return self.noise_rho and { self.noise_rho } or {} end
--- named_parameters() -> {{name, tensor}, ...} of the learned noise.
function ELBO:named_parameters() return self.noise_rho and { { "noise_rho", self.noise_rho } } or {} end

--- {name = tensor} of the learned noise (empty unless learn_sigma).
function ELBO:state_dict() return self.noise_rho and { noise_rho = self.noise_rho } or {} end

--- load_state_dict(sd): the learned noise back from state_dict's table.
function ELBO:load_state_dict(sd)
  if self.noise_rho then
    local src = sd.noise_rho
    if not (src and src:numel() == 1) then error("ELBO: the saved state has no noise_rho", 2) end
    self.noise_rho:copy(src)
  end
end

--- The Gaussian likelihood's noise standard deviation, or the student-t's scale (a number).
-- @usage
--   assert(bbb.elbo.ELBO{ n_data = 10, batch_size = 10, likelihood = "gaussian", sigma = 0.3 }:sigma() == 0.3)
function ELBO:sigma()
  if self.noise_rho then return self.noise_rho:softplus():item() end
  return self.sigma_value
end

--- nll_sum(out, y) -> the negative log-likelihood summed over the batch.
function ELBO:nll_sum(out, y)
  if self.likelihood == "categorical" then
    return bbb.cross_entropy(out, y, "sum")
  end
  if self.likelihood == "heteroscedastic" then
    -- out (B, 2): the mean and the raw noise; sigma = floor + softplus(raw)
    if out:dim() ~= 2 or out:size(2) ~= 2 or y:numel() ~= out:size(1) then
      error(("ELBO: the heteroscedastic likelihood needs outputs (B, 2) and B targets, got outputs %s and %d targets")
        :format(table.concat(out:size(), "x"), y:numel()), 3)
    end
    if y:dim() ~= 2 then y = y:reshape{ out:size(1), 1 } end
    local raw = out:narrow(2, 2, 1)
    local sigma = self.sigma_max and raw:sigmoid() * (self.sigma_max - self.sigma_value) + self.sigma_value
      or raw:softplus() + self.sigma_value
    return -bbb.gaussian_loglik(out:narrow(2, 1, 1), y, sigma)
  end
  if y:numel() ~= out:numel() then
    error(("ELBO: targets of size %s do not match outputs of size %s"):format(
      table.concat(y:size(), "x"), table.concat(out:size(), "x")), 3)
  end
  if y:dim() ~= out:dim() then y = y:reshape(out:size()) end
  local sigma = self.noise_rho and self.noise_rho:softplus() or self.sigma_value
  if self.likelihood == "student-t" then
    -- -log t(y; out, sigma, df) = (df + 1) / 2 log(1 + r^2 / df) + log sigma - lognorm, r = (y - out) / sigma
    local n, df = out:numel(), self.df
    local r = (out - y) / sigma
    local log_sigma = type(sigma) == "number" and math.log(sigma) * n or sigma:log():sum() * n
    return (r:square() / df):log1p():sum() * ((df + 1) / 2) + log_sigma - self.t_lognorm * n
  end
  return -bbb.gaussian_loglik(out, y, sigma)
end

-- Applies the ELBO's kl setting to every Bayesian layer of net.
local function set_kl_mode(net, mode)
  local k = 0
  net:apply(function(l)
    if l.kl_mode == nil then return end
    k = k + 1
    if l.kl_mode == mode then return end
    local p = l.prior
    if mode == "analytic" and not (getmetatable(p) and p.kind == "gaussian") then
      error(('ELBO: kl = "analytic" needs a Gaussian prior; layer %d has %s')
        :format(k, tostring(p)), 0)
    end
    l.kl_mode = mode
  end)
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end
local function show(v) return v ~= v and "nan" or tostring(v) end

--- loss, terms = elbo:loss(net, x, y [, {batch = i, step = n, examples = B, kl_share = s}])
-- examples and kl_share describe a shard of a larger batch: the loss is
-- divided by examples (the global batch size) and the complexity term is
-- weighted by kl_share (1 / the number of shards) on top of kl_weight.
-- terms: loss, nll (mean per example), nll_sum, complexity (log q - log p
-- in nats, averaged over samples), kl_weight, weighted_complexity
-- (kl_weight * complexity: this minibatch's share of the epoch's complexity
-- term), complexity_per_example (that / batch size), examples (the rows of
-- x), elbo_per_example (= loss), and for
-- a categorical likelihood correct (how many of the batch the last MC
-- sample classified right).
-- @raise ELBO: targets of size ... do not match outputs of size ...
-- @raise a loss that is not finite, naming the term (NLL or complexity) that is not
-- @usage
--   local net = bbb.nn.bayes_mlp({ 4, 8, 3 })
--   local elbo = bbb.elbo.ELBO{ n_data = 100, batch_size = 10 }
--   local y = bbb.tensor{ 1, 2, 3, 1, 2, 3, 1, 2, 3, 1 }   -- classes 1..3
--   local loss, terms = elbo:loss(net, bbb.randn(10, 4), y)
--   loss:backward()
--   print(terms.nll, terms.complexity)
function ELBO:loss(net, x, y, opts)
  opts = opts or {}
  self.steps = self.steps + 1
  local step = opts.step or self.steps
  -- A shard of a global batch (data-parallel training) divides by the
  -- global batch size and carries its share of the complexity term, so the
  -- ranks' gradients sum to the gradient of the whole batch.
  local B = opts.examples or x:size(1)
  local share = opts.kl_share or 1
  local w = self:weight(opts.batch) * share
  if self.kl and self.kl_net ~= net then   -- once per model, not on every step
    local ok, err = pcall(set_kl_mode, net, self.kl)
    if not ok then error(err, 2) end
    self.kl_net = net
  end
  local total, nll_total, kl_total = nil, 0, 0
  local out
  for _ = 1, self.samples do
    out = net:forward(x)
    local nll = self:nll_sum(out, y)
    local kl = net:kl()
    local f = kl and nll + kl * w or nll
    total = total and total + f or f
    nll_total = nll_total + nll:item()
    kl_total = kl_total + (kl and kl:item() or 0)
  end
  local S = self.samples
  local loss = total * (self.reduction == "sum" and 1 / S or 1 / (S * B))
  local correct
  if self.likelihood == "categorical" then   -- of the last sample's predictions
    correct = bbb.no_grad(function() return (out:argmax(2) - y):abs():lt(0.5):sum():item() end)
  end
  return loss, self:terms(step, S, B, nll_total, kl_total, w, loss:item(), x:size(1), correct)
end

--- terms(step, S, B, nll_total, kl_total, w, loss, examples, correct) ->
-- the terms table of a step from its sums over S samples (the loss as a
-- number), after checking that both terms are finite.
function ELBO:terms(step, S, B, nll_total, kl_total, w, loss, examples, correct)
  local nll_mean, kl_mean = nll_total / (S * B), kl_total / S
  if not finite(nll_mean) then
    error(("ELBO: step %d: the likelihood term (nll) is not finite (%s)"):format(step, show(nll_mean)), 3)
  end
  if not finite(kl_mean) then
    error(("ELBO: step %d: the complexity term (log q - log p) is not finite (%s)"):format(step, show(kl_mean)), 3)
  end
  return {
    loss = loss, elbo_per_example = loss, nll = nll_mean, nll_sum = nll_total / S,
    complexity = kl_mean, kl_weight = w, weighted_complexity = w * kl_mean,
    complexity_per_example = w * kl_mean / B, correct = correct, examples = examples,
  }
end

--- terms = elbo:fused_step(plan, x, y [, {batch = i}]): what
-- `zero_grad(); elbo:loss(net, x, y):backward()` does, bit for bit, in one
-- C pass of bbb.nn.fused's plan for net: every parameter's gradient set,
-- the step counted, the terms returned (the loss as a number).
function ELBO:fused_step(plan, x, y, opts)
  self.steps = self.steps + 1
  local w = self:weight(opts and opts.batch)
  local nll, kl, loss = plan:grad(x, y, self.sigma_value, w)
  return self:terms(self.steps, 1, x:size(1), nll, kl, w, loss, x:size(1))
end

--- terms = elbo:skip(): counts a step that has no examples here (an empty
-- shard of a global batch under data parallelism) and returns zero terms,
-- so the step numbers stay the same on every rank.
function ELBO:skip()
  self.steps = self.steps + 1
  return { loss = 0, elbo_per_example = 0, nll = 0, nll_sum = 0, complexity = 0, kl_weight = 0,
           weighted_complexity = 0, complexity_per_example = 0, correct = 0, examples = 0 }
end

return elbo

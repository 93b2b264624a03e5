--- bbb.mcmc: Hamiltonian Monte Carlo, a reference posterior to measure an approximate one against.
-- Full-batch HMC over the weights of a plain network (or any log density
-- written with tensor ops) on the autograd tape: leapfrog trajectories of
-- a fixed length with a Metropolis correction on the energy error in
-- doubles, or the No-U-Turn Sampler (kernel = "nuts"), the step size tuned
-- in warm-up by dual averaging and a diagonal mass matrix from warm-up
-- draws, several chains; and the checks that say whether to trust the
-- draws: rank-normalised split R-hat, bulk effective sample size, the
-- Kolmogorov-Smirnov test, and the closed-form posterior of Bayesian linear
-- regression to test a sampler on.
--
--   local post = bbb.mcmc.hmc{ net = bbb.nn.mlp({ 2, 1 }), x = x, y = y, likelihood = "gaussian",
--     noise_sigma = 0.5, prior_sigma = 1, warmup = 300, samples = 300, chains = 4 }
--   print(post.rhat_max, post.ess_min)
--   local mean, sd = bbb.mcmc.predict(net, post, x_test)
local bbb = require "bbb"
local kernel = require "bbb.mcmc.kernel"
local target = require "bbb.mcmc.target"
local diag = require "bbb.mcmc.diagnostics"

local mcmc = {}

for _, k in ipairs { "rhat", "ess", "summary", "ks_test", "normal_cdf", "normal_quantile" } do
  mcmc[k] = diag[k]
end

-- Option checks: each error names the function and the option.
local function int_opt(o, key, default, min, fn)
  local v = o[key]
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < min then
    error(("%s: %s must be an integer >= %d, got %s"):format(fn, key, min, tostring(v)), 0)
  end
  return v
end

local function positive(v) return type(v) == "number" and v > 0 and v < math.huge end

-- The kernel and its own setting: leapfrog (hmc) or max_depth (nuts);
-- the other kernel's setting is refused rather than silently ignored.
local function kernel_options(o, fn, r)
  r.kernel = o.kernel or "hmc"
  if r.kernel ~= "hmc" and r.kernel ~= "nuts" then
    error(('%s: kernel must be "nuts" or "hmc", got %s'):format(fn, tostring(o.kernel)), 0)
  end
  if r.kernel == "nuts" and o.leapfrog ~= nil then
    error(('%s: leapfrog is for kernel = "hmc" (nuts sets the length of each trajectory, '
      .. 'up to 2^max_depth steps)'):format(fn), 0)
  end
  if r.kernel == "hmc" and o.max_depth ~= nil then
    error(('%s: max_depth is for kernel = "nuts" (hmc takes leapfrog steps)'):format(fn), 0)
  end
  r.leapfrog = int_opt(o, "leapfrog", 16, 1, fn)
  r.max_depth = int_opt(o, "max_depth", 10, 1, fn)
  if r.max_depth > 30 then   -- 2^30 gradients a draw: a typo, not a setting
    error(("%s: max_depth must be at most 30, got %d"):format(fn, r.max_depth), 0)
  end
end

-- The settings every sampler shares, checked: kernel, warmup, samples,
-- leapfrog or max_depth, chains (a count, or chain_ids: which chains of a
-- run to make here), seed, target_accept, adapt_mass, metric, progress.
local function run_options(o, fn)
  local r = {
    warmup = int_opt(o, "warmup", 500, 0, fn), samples = int_opt(o, "samples", 500, 1, fn),
    seed = int_opt(o, "seed", 1, math.mininteger, fn),
    target_accept = o.target_accept or 0.8, adapt_mass = o.adapt_mass, progress = o.progress,
    step_size = o.step_size, metric = o.metric or "diag",
  }
  kernel_options(o, fn, r)
  if r.metric ~= "diag" and r.metric ~= "dense" then
    error(('%s: metric must be "diag" or "dense", got %s'):format(fn, tostring(o.metric)), 0)
  end
  if type(r.target_accept) ~= "number" or not (r.target_accept > 0 and r.target_accept < 1) then
    error(("%s: target_accept must be in (0, 1), got %s"):format(fn, tostring(o.target_accept)), 0)
  end
  if r.step_size ~= nil and not positive(r.step_size) then
    error(("%s: step_size must be a positive number, got %s"):format(fn, tostring(o.step_size)), 0)
  end
  if r.warmup == 0 and not r.step_size then
    error(("%s: warmup = 0 needs step_size (warm-up is where it is tuned)"):format(fn), 0)
  end
  if r.progress ~= nil and type(r.progress) ~= "function" then
    error(("%s: progress must be a function, got %s"):format(fn, type(r.progress)), 0)
  end
  if o.chain_ids ~= nil then
    if type(o.chain_ids) ~= "table" or #o.chain_ids == 0 then
      error(("%s: chain_ids must be a list of chain numbers, got %s"):format(fn, tostring(o.chain_ids)), 0)
    end
    for i, k in ipairs(o.chain_ids) do
      if math.type(k) ~= "integer" or k < 1 then
        error(("%s: chain_ids[%d] must be a positive integer, got %s"):format(fn, i, tostring(k)), 0)
      end
    end
    r.chain_ids = o.chain_ids
  else
    r.chain_ids = {}
    for k = 1, int_opt(o, "chains", 4, 1, fn) do r.chain_ids[k] = k end
  end
  return r
end

--- chain_generator(seed, k) -> the generator of chain k of a run seeded
-- with seed: a chain's draws depend on these two only, so chains run
-- apart (one per process) are the chains run together.
function mcmc.chain_generator(seed, k)
  return bbb.Generator(seed * 1000003 + k)
end

-- Runs the chains of r on target t from init(k, gen) -> list; the result
-- before its diagnostics.
local function run_chains(t, r, init)
  local t0 = bbb.core.clock()
  local res = { samples = {}, lp = {}, step_size = {}, inv_mass = {}, chains = {}, per_chain = {}, accept_rate = 0,
                divergences = 0, gradients = 0, dim = t.dim, kernel = r.kernel, metric = r.metric,
                max_depth = r.kernel == "nuts" and r.max_depth or nil }
  for i, k in ipairs(r.chain_ids) do
    local gen = mcmc.chain_generator(r.seed, k)
    local q0 = init(k, gen)
    if type(q0) ~= "table" or #q0 ~= t.dim then
      error(("mcmc: the initial point of chain %d must be a list of %d numbers, got %s")
        :format(k, t.dim, type(q0) == "table" and (#q0 .. " numbers") or type(q0)), 0)
    end
    local report
    if r.progress then
      report = function(phase, it, eps, accept, depth, steps)
        r.progress { chain = k, phase = phase, iteration = it, of = phase == "warmup" and r.warmup or r.samples,
                     step_size = eps, accept = accept, tree_depth = depth, steps = steps }
      end
    end
    local c = kernel.run_chain(t, q0, r, gen, report)
    res.samples[i], res.lp[i], res.step_size[i], res.inv_mass[i], res.chains[i] =
      c.draws, c.lp, c.step_size, c.inv_mass, k
    res.accept_rate = res.accept_rate + c.accept_rate / #r.chain_ids
    res.divergences, res.gradients = res.divergences + c.divergences, res.gradients + c.gradients
    res.per_chain[i] = { chain = k, accept_rate = c.accept_rate, divergences = c.divergences, gradients = c.gradients,
                         steps = c.steps, tree_depth = c.tree_depth, max_depth_hits = c.max_depth_hits,
                         step_size = c.step_size }
  end
  res.seconds = bbb.core.clock() - t0
  return res
end

--- draws(result, j) -> the chains of coordinate j of a sampler's result
-- (a list of lists of numbers), as rhat, ess and summary take them.
-- @raise mcmc.draws: j must be a coordinate in 1..D, got ...
-- @usage
--   local post = bbb.mcmc.sample{ log_density = function(x) return x:square():sum() * -0.5 end,
--     init = { 0 }, warmup = 100, samples = 100, chains = 2 }
--   print(bbb.mcmc.summary(bbb.mcmc.draws(post, 1)).mean)
function mcmc.draws(res, j)
  local D = res.samples[1]:size(2)
  if math.type(j) ~= "integer" or j < 1 or j > D then
    error(("mcmc.draws: j must be a coordinate in 1..%d, got %s"):format(D, tostring(j)), 2)
  end
  local out = {}
  for i, s in ipairs(res.samples) do out[i] = s:narrow(2, j, 1):reshape(-1):totable() end
  return out
end

--- diagnose(result) -> rhat_max, ess_min: the largest R-hat and the
-- smallest bulk ESS over every coordinate of a sampler's result (for a
-- net: every weight), and the coordinates where they fall. Weight-space
-- R-hat of a network with hidden units is pessimistic: chains may find the
-- same function with its units in another order; judge its predictions'
-- R-hat too (the reference script does).
function mcmc.diagnose(res)
  local rmax, emin, at_r, at_e = -math.huge, math.huge, nil, nil
  for j = 1, res.samples[1]:size(2) do
    local ch = mcmc.draws(res, j)
    local rh, es = diag.rhat_ess(ch)
    if rh > rmax then rmax, at_r = rh, j end
    if es < emin then emin, at_e = es, j end
  end
  return rmax, emin, at_r, at_e
end

local function finish(res, diagnose)
  if diagnose ~= false and #res.samples[1]:size() == 2 and res.samples[1]:size(1) >= 4 then
    res.rhat_max, res.ess_min = mcmc.diagnose(res)
  end
  return res
end

--- sample{log_density = fn, init = list | fn(chain, gen), kernel = "hmc" |
-- "nuts", warmup = 500, samples = 500, leapfrog = 16, max_depth = 10,
-- chains = 4, chain_ids =, seed = 1, target_accept = 0.8, adapt_mass =
-- true, metric = "diag" | "dense", step_size =, progress = fn, diagnose =
-- true} -> result: HMC on any
-- log density written with tensor ops, fn(x) -> 0-d tensor for x a 1-d
-- tensor of D numbers, differentiated by the tape (it need not be
-- normalised); init is the start, or a function giving chain k's from its
-- generator. kernel "hmc" takes leapfrog steps per iteration on average
-- (each draws one uniformly in L/2 .. 3L/2); "nuts", the No-U-Turn
-- Sampler, doubles each trajectory until it turns back on itself, at most
-- max_depth times (2^max_depth - 1 steps), and draws a point along it; each
-- refuses the other's setting. Warm-up tunes the step size to
-- target_accept (for nuts, the mean acceptance over a trajectory's points)
-- and estimates the mass matrix, diagonal (metric "diag") or in full
-- ("dense": D^2 work a leapfrog step, worth it when the density's
-- directions of spread are correlated).
-- progress({chain, phase = "warmup" | "sampling", iteration, of,
-- step_size, accept, steps, tree_depth}) is called every iteration.
-- result: samples (one (S, D) tensor per chain), lp (the log density of
-- each draw, per chain), step_size and inv_mass (the diagonal of the
-- inverse mass matrix, the warm-up draws' variances) per chain, chains
-- (their numbers), per_chain (per chain: accept_rate, divergences,
-- gradients, steps (mean leapfrog steps per draw), and for nuts tree_depth
-- (mean doublings per draw) and max_depth_hits), kernel, accept_rate (mean
-- acceptance after warm-up), divergences (after warm-up, over all
-- chains), gradients (evaluations made, warm-up included), seconds, and,
-- unless diagnose = false, rhat_max and ess_min over the coordinates.
-- @raise sample: log_density must be a function, got ...
-- @raise sample: init must be a list of numbers or a function(chain, generator), got ...
-- @raise sample: warmup must be an integer >= 0, got ... (and the same for samples, leapfrog, chains)
-- @raise sample: kernel must be "nuts" or "hmc", got ...
-- @raise sample: leapfrog is for kernel = "hmc" (and max_depth for kernel = "nuts")
-- @raise sample: metric must be "diag" or "dense", got ...
-- @usage
--   local post = bbb.mcmc.sample{
--     log_density = function(x) return (x / bbb.tensor{ 1, 3 }):square():sum() * -0.5 end,
--     init = { 0, 0 }, warmup = 200, samples = 200, chains = 2, seed = 1 }
--   print(post.accept_rate, post.rhat_max, post.ess_min)
--   local nuts = bbb.mcmc.sample{ log_density = function(x) return x:square():sum() * -0.5 end,
--     init = { 0, 0 }, kernel = "nuts", warmup = 100, samples = 100, chains = 2 }
--   print(nuts.per_chain[1].tree_depth, nuts.per_chain[1].gradients)
function mcmc.sample(o)
  if type(o) ~= "table" then error(("sample: expects a table of options, got %s"):format(type(o)), 2) end
  if type(o.log_density) ~= "function" then
    error(("sample: log_density must be a function, got %s"):format(type(o.log_density)), 2)
  end
  local init = o.init
  if type(init) ~= "table" and type(init) ~= "function" then
    error(("sample: init must be a list of numbers or a function(chain, generator), got %s"):format(type(init)), 2)
  end
  local ok, r = pcall(run_options, o, "sample")
  if not ok then error(r, 2) end
  local dim = type(init) == "table" and #init or #init(r.chain_ids[1], mcmc.chain_generator(r.seed, r.chain_ids[1]))
  local start = type(init) == "function" and init or function() return init end
  local t = target.density(o.log_density, dim)
  return finish(run_chains(t, r, start), o.diagnose)
end

-- Bayesian layers hold a distribution, not weights: HMC samples plain ones.
local function check_plain(net)
  net:apply(function(l)
    if l.kl_mode ~= nil or l.weight_mu ~= nil then
      error(("hmc: net holds a Bayesian layer (%s); HMC samples the weights of a plain net "
        .. "(bbb.nn.mlp, Linear layers)"):format(l.__name or "?"), 0)
    end
  end)
end

-- The prior of hmc's options: prior_sigma (a Gaussian) or prior (a C
-- prior, a Lua prior, or a function(w) -> 0-d tensor), not both.
local function prior_of(o)
  if o.prior ~= nil and o.prior_sigma ~= nil then error("hmc: give prior or prior_sigma, not both", 0) end
  if o.prior == nil then
    local s = o.prior_sigma or 1
    if not positive(s) then error(("hmc: prior_sigma must be a positive number, got %s"):format(tostring(s)), 0) end
    return bbb.prior.Gaussian { sigma = s }
  end
  if type(o.prior) == "function" then
    local fn = o.prior
    return { log_prob = function(_, w) return fn(w) end, name = "function" }
  end
  local ok, err = pcall(bbb.prior.check, o.prior, "hmc: prior")
  if not ok then error(err, 0) end
  return o.prior
end

-- hmc's options checked and completed: net, x, y, likelihood, noise, prior.
local function net_options(o)
  if type(o.net) ~= "table" or type(o.net.forward) ~= "function" then
    error(("hmc: net must be a module, got %s"):format(type(o.net)), 0)
  end
  check_plain(o.net)
  if not (bbb.is_tensor(o.x) and o.x:dim() == 2) then error("hmc: x must be a (N, D) tensor", 0) end
  if not (bbb.is_tensor(o.y) and o.y:size(1) == o.x:size(1)) then
    error(("hmc: y must be a tensor of %d rows, one per row of x"):format(o.x:size(1)), 0)
  end
  local lik = o.likelihood or "gaussian"
  if lik ~= "gaussian" and lik ~= "categorical" then
    error(('hmc: likelihood must be "gaussian" or "categorical", got %s'):format(tostring(lik)), 0)
  end
  local ns = o.noise_sigma
  if lik == "gaussian" and not (positive(ns) or ns == "infer") then
    error(('hmc: the gaussian likelihood needs noise_sigma, a positive number or "infer", got %s'):format(tostring(ns)), 0)
  end
  if lik == "categorical" and ns ~= nil then error("hmc: noise_sigma is for the gaussian likelihood", 0) end
  if o.noise_scale ~= nil and not (positive(o.noise_scale) and ns == "infer") then
    error(('hmc: noise_scale (the half-Cauchy scale of an inferred noise) needs noise_sigma = "infer" and '
      .. 'a positive number, got %s'):format(tostring(o.noise_scale)), 0)
  end
  return { net = o.net, x = o.x, y = o.y, likelihood = lik, noise_sigma = ns, noise_scale = o.noise_scale or 1,
           prior = prior_of(o) }
end

-- The initial point of chain k: "prior" (a draw from a C prior; an
-- inferred noise starts at sd 1, the standardised target's own), "current"
-- (the net's weights), a list, or a function(k, gen) -> list.
local function initial(o, t, net, prior)
  local how, current = o.init or "prior", target.get(net)
  local sampler = target.prior_sampler(prior)
  if how == "prior" and not sampler then
    error('hmc: init = "prior" needs a C prior (Gaussian, Laplace, ScaleMixture) to draw from; give init = '
      .. '"current", a list or a function', 0)
  end
  if how ~= "prior" and how ~= "current" and type(how) ~= "table" and type(how) ~= "function" then
    error(('hmc: init must be "prior", "current", a list or a function(chain, generator), got %s'):format(tostring(how)), 0)
  end
  return function(k, gen)
    if type(how) == "function" then return how(k, gen) end
    local q = how == "prior" and sampler(t.weights, gen) or table.move(type(how) == "table" and how or current, 1, t.weights, 1, {})
    if t.dim > t.weights then q[t.dim] = type(how) == "table" and how[t.dim] or 0 end
    return q
  end
end

--- hmc{net =, x =, y =, likelihood = "gaussian" | "categorical",
-- noise_sigma = s | "infer", noise_scale = 1, prior_sigma = 1 | prior =,
-- init = "prior" | "current" | list | fn(chain, gen), kernel = "hmc" |
-- "nuts", warmup = 500, samples = 500, leapfrog = 16, max_depth = 10,
-- chains = 4, chain_ids =, seed = 1, target_accept = 0.8, metric =
-- "diag" | "dense", progress = fn, diagnose = true} -> result: full-batch HMC (kernel "hmc", trajectories
-- of about leapfrog steps, or "nuts", the No-U-Turn Sampler, as in
-- bbb.mcmc.sample) over the weights of a plain net (Linear layers and
-- activations, bbb.nn.mlp) under log p(y | x, w) + log p(w). gaussian: y
-- = net(x) + noise of sd noise_sigma, or "infer" to sample log sigma too
-- under a half-Cauchy(0, noise_scale) prior on sigma; categorical: y
-- holds classes 1..C, the net gives logits. The prior is prior_sigma's
-- N(0, s^2) on every weight, or prior: a C prior (bbb.prior.Gaussian,
-- Laplace, ScaleMixture, evaluated in doubles), a prior written in Lua
-- (its log_prob, on the tape, per parameter tensor) or a function(w) ->
-- 0-d tensor. init "prior" draws each chain's start from the prior. The
-- net's weights are left at the last draw. result: as bbb.mcmc.sample's
-- (samples: per chain an (S, P) tensor of the weights flattened in
-- named_parameters' order), plus likelihood, noise_sigma (the number, or
-- with "infer" per chain the list of draws of sigma) and weights (P).
-- @raise hmc: net holds a Bayesian layer (...); HMC samples the weights of a plain net
-- @raise hmc: the gaussian likelihood needs noise_sigma, a positive number or "infer", got ...
-- @raise hmc: give prior or prior_sigma, not both
-- @raise hmc: y[i] is ..., not a class in 1..C (the net's outputs)
-- @raise hmc: kernel must be "nuts" or "hmc", got ...
-- @usage
--   local g = bbb.Generator(1)
--   local x = bbb.randn({ 40, 2 }, 0, 1, g)
--   local y = x:matmul(bbb.tensor{ { 1 }, { -2 } }) + bbb.randn({ 40, 1 }, 0, 0.5, g)
--   local net = bbb.nn.mlp({ 2, 1 })
--   local post = bbb.mcmc.hmc{ net = net, x = x, y = y, noise_sigma = 0.5, prior_sigma = 1,
--     warmup = 200, samples = 200, chains = 2 }
--   assert(post.rhat_max < 1.1)
--   local mean, sd = bbb.mcmc.predict(net, post, x)
function mcmc.hmc(o)
  if type(o) ~= "table" then error(("hmc: expects a table of options, got %s"):format(type(o)), 2) end
  local ok, n = pcall(net_options, o)
  if not ok then error(n, 2) end
  local r
  ok, r = pcall(run_options, o, "hmc")
  if not ok then error(r, 2) end
  local was_training = n.net.training
  n.net:evaluate()
  local t = target.net(n)
  local okc, res = pcall(function() return run_chains(t, r, initial(o, t, n.net, n.prior)) end)
  if was_training then n.net:train() end
  if not okc then error(res, 2) end
  res.likelihood, res.weights = n.likelihood, t.weights
  res.noise_sigma = n.noise_sigma
  if n.noise_sigma == "infer" then   -- the last column is log sigma: kept apart, as sigma
    res.noise_sigma = {}
    for i, s in ipairs(res.samples) do
      res.noise_sigma[i] = s:narrow(2, t.dim, 1):reshape(-1):exp():totable()
      res.samples[i] = s:narrow(2, 1, t.weights):clone()
    end
  end
  return finish(res, o.diagnose)
end

-- The (S, P) tensors of predict's samples argument, and the noise sd of
-- each draw (a list, or nil for a fixed or no noise).
local function draws_of(samples)
  if bbb.is_tensor(samples) then return { samples }, nil end
  if type(samples) == "table" and samples.samples then
    local list, noise = samples.samples, nil
    if type(samples.noise_sigma) == "table" then
      noise = {}
      for _, l in ipairs(samples.noise_sigma) do table.move(l, 1, #l, #noise + 1, noise) end
    end
    return list, noise
  end
  if type(samples) == "table" and bbb.is_tensor(samples[1]) then return samples, nil end
  error("predict: samples must be a result of bbb.mcmc.hmc, a list of (S, P) tensors or one (S, P) tensor", 0)
end

--- predict(net, samples, x [, {likelihood =, noise_sigma =, thin = 1}]) ->
-- mean, sd, draws | probs, draws: the posterior predictive at the rows of
-- x from every draw of samples (a result of bbb.mcmc.hmc, whose likelihood
-- and noise it takes; a list of (S, P) tensors; or one), every thin-th
-- draw when thin is given. gaussian: mean (N, k), sd (N, k) (the draws'
-- spread and the noise in quadrature) and draws, an (S, N, k) tensor of
-- the net's outputs; categorical: probs (N, C), the mean of the draws'
-- softmax, and draws (S, N, C) of them. The net's weights are left at the
-- last draw used.
-- @usage
--   local net = bbb.nn.mlp({ 1, 1 })
--   local w = bbb.tensor{ { 1, 0 }, { 3, 0 } }   -- two draws of (weight, bias)
--   local mean, sd = bbb.mcmc.predict(net, w, bbb.ones(1, 1), { noise_sigma = 0 })
--   assert(mean:item() == 2 and sd:item() == 1)
-- @raise predict: samples must be a result of bbb.mcmc.hmc, a list of (S, P) tensors or one (S, P) tensor
-- @raise predict: a draw holds N numbers, the net has P weights
function mcmc.predict(net, samples, x, opts)
  opts = opts or {}
  local ok, list, noise = pcall(draws_of, samples)
  if not ok then error(list, 2) end
  local lik = opts.likelihood or (type(samples) == "table" and samples.likelihood) or "gaussian"
  local ns = opts.noise_sigma or (type(samples) == "table" and samples.noise_sigma) or 0
  local thin = opts.thin or 1
  if math.type(thin) ~= "integer" or thin < 1 then
    error(("predict: thin must be a positive integer, got %s"):format(tostring(opts.thin)), 2)
  end
  local lay = target.layout(net)
  if list[1]:size(2) ~= lay.dim then
    error(("predict: a draw holds %d numbers, the net has %d weights"):format(list[1]:size(2), lay.dim), 2)
  end
  local outs, var_noise, count = {}, 0, 0
  local was_training = net.training
  net:evaluate()
  bbb.no_grad(function()
    local base = 0   -- the draws of the chains before this one, in noise's flat list
    for _, s in ipairs(list) do
      for i = 1, s:size(1), thin do
        target.set(net, s:narrow(1, i, 1), lay)
        local out = net:forward(x)
        if lik == "categorical" then out = out:softmax() end
        outs[#outs + 1] = out:reshape(1, out:size(1), out:size(2))
        count = count + 1
        local sd = noise and noise[base + i] or (type(ns) == "number" and ns or 0)
        var_noise = var_noise + sd * sd
      end
      base = base + s:size(1)
    end
  end)
  if was_training then net:train() end
  local stack = bbb.cat(outs, 1)
  local mean = stack:mean(1)
  if lik == "categorical" then return mean, stack end
  local var = (stack - mean:reshape(1, mean:size(1), mean:size(2))):square():mean(1) + var_noise / count
  return mean, var:sqrt(), stack
end

--- linear_posterior(x, y, {noise_sigma =, prior_sigma =}) -> mean, cov:
-- the exact posterior of Bayesian linear regression y = x w + b + noise,
-- noise ~ N(0, noise_sigma^2), every weight and the bias ~ N(0,
-- prior_sigma^2): mean (a list of D + 1 numbers, the weights then the
-- bias, in the order of bbb.nn.mlp({D, 1}):parameters()) and cov (a list
-- of D + 1 lists), solved in doubles. What an HMC run on a net with no
-- hidden layer must reproduce.
-- @raise linear_posterior: noise_sigma and prior_sigma must be positive numbers
-- @usage
--   local x = bbb.tensor{ { 0 }, { 1 }, { 2 } }
--   local mean, cov = bbb.mcmc.linear_posterior(x, bbb.tensor{ 1, 3, 5 }, { noise_sigma = 0.1, prior_sigma = 10 })
--   assert(math.abs(mean[1] - 2) < 0.01 and math.abs(mean[2] - 1) < 0.02)
function mcmc.linear_posterior(x, y, o)
  o = o or {}
  if not (positive(o.noise_sigma) and positive(o.prior_sigma)) then
    error("linear_posterior: noise_sigma and prior_sigma must be positive numbers", 2)
  end
  if not (bbb.is_tensor(x) and x:dim() == 2 and bbb.is_tensor(y) and y:numel() == x:size(1)) then
    error("linear_posterior: x must be a (N, D) tensor and y a tensor of N numbers", 2)
  end
  return require("bbb.mcmc.linear").posterior(x:totable(), y:reshape(-1):totable(), o.noise_sigma, o.prior_sigma)
end

--- get_weights(net) -> the net's weights as one flat list, in the order of
-- the samples' columns.
function mcmc.get_weights(net) return target.get(net) end

--- set_weights(net, w): the net's weights from a flat list or a 1-d
-- tensor, as one of the samples' rows holds them.
-- @usage
--   local net = bbb.nn.mlp({ 2, 1 })
--   bbb.mcmc.set_weights(net, { 1, 2, 3 })
--   assert(net(bbb.ones(1, 2)):item() == 6)
function mcmc.set_weights(net, w)
  local ok, err = pcall(target.set, net, w)
  if not ok then error(err, 2) end
end

return mcmc

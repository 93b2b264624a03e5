--- bbb.app.experiments.reference: how far is each method's posterior predictive from the true one?
-- Reads a table as scripts/fit.lua does, splits it, draws a reference
-- posterior of a small plain net by Hamiltonian Monte Carlo (bbb.mcmc, the
-- No-U-Turn Sampler by default, --kernel hmc for fixed-length
-- trajectories) on the training and validation rows, then fits each method with
-- scripts/fit.lua on the same split and scores its predictive on the test
-- rows against the reference: the 1-Wasserstein distance per test row
-- (regression), the top-class agreement and total variation
-- (classification), and every test log-likelihood. The output folder holds
-- split.json, hmc/ (the job, one safetensors file per chain: a finished
-- chain is not run again), predictive.safetensors (the reference
-- predictive at the test rows), methods/ (each fit's model, summary and
-- log) and reference.json.
-- scripts/reference.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local sys = require "bbb.app.sys"
local tab = require "bbb.app.tabular"
local json = require "bbb.json"

local M = {}

-- The methods, each as the fit.lua flags that make it: bbb is fit.lua's
-- BBB (local reparameterization, the full ELBO); bbb-weight and
-- bbb-flipout are the same with the other gradient estimators;
-- bbb-tempered weighs the complexity term by TEMPERED over an epoch;
-- laplace is a plain net whose last layer is put under the Laplace
-- posterior (bbb.laplace), with one noise sd as the chains have (fit.lua
-- may choose a noise head otherwise). A value is text, or fn(c, job) ->
-- text, or nil to leave its flag out.
local METHODS = { "bbb", "bbb-weight", "bbb-flipout", "bbb-tempered", "mlp", "dropout", "ensemble", "laplace" }
-- the tempered weight uci_tempered.json uses, chosen on Boston's tuning splits
local TEMPERED = 0.3
local function tempered_weight(c, job)
  local batch = tonumber(require("bbb.app.experiments.fit").DEFAULTS.batch)
  for i, w in ipairs(c.fit_flags) do
    batch = tonumber(w:match("^%-%-batch=(%d+)$") or (w == "--batch" and c.fit_flags[i + 1])) or batch
  end
  return ("%.17g"):format(TEMPERED / bbb.data.num_batches(job.rows.train:numel(), math.tointeger(batch)))
end
local function homoscedastic(_, job) return job.task == "regression" and "homo" or nil end
local METHOD_FLAGS = {
  bbb = { "--model", "bbb" }, mlp = { "--model", "mlp" }, dropout = { "--model", "dropout" },
  ensemble = { "--model", "ensemble" },
  ["bbb-weight"] = { "--model", "bbb", "--estimator", "weight" },
  ["bbb-flipout"] = { "--model", "bbb", "--estimator", "flipout" },
  ["bbb-tempered"] = { "--model", "bbb", "--kl-weight", tempered_weight },
  laplace = { "--model", "mlp", "--noise", homoscedastic },
}
local LOG_2PI = math.log(2 * math.pi)

-- "0" (no hidden layer: Bayesian linear or softmax regression) or units
-- per hidden layer, comma-separated.
local function hidden_list(s)
  if s == "0" then return {} end
  local out = {}
  for w in (tostring(s) .. ","):gmatch("([^,]*),") do
    local v = math.tointeger(tonumber(w))
    if not v or v < 1 or v > 4096 then
      return nil, ("--hidden: expected 0 or units per layer like 50 or 20,20, got '%s'"):format(s)
    end
    out[#out + 1] = v
  end
  return out
end

local function method_list(s)
  if s == "none" then return {} end
  local v, err = cli.list(cli.choice(METHODS), { unique = true })(s)
  if v == nil then return nil, "--methods: " .. err .. " (or none)" end
  return v
end

local function noise_value(s)
  if s == "infer" then return s end
  local v = tonumber(s)
  if not (v and v > 0 and v < math.huge) then
    return nil, ("--noise-sigma: expected infer or a positive number, got '%s'"):format(s)
  end
  return v
end

--- parser() -> reference.lua's command line.
function M.parser()
  local parser = recipe.parser("reference.lua", "A Hamiltonian Monte Carlo reference posterior for a table, "
    .. "and how far the predictive of each method fit.lua fits is from it.",
    { outputs = {}, defaults = { test_samples = "100", jobs = "1", prior_sigma = "1" } })
    :epilog("Flags after -- go to every fit.lua run (e.g. -- --epochs 200 --tune off). --data takes a CSV "
      .. "file with a header row, or FOLDER:NAME for an R data set, e.g. data/r/MASS:Boston.")
  flags.option(parser, "--data", "The table (CSV, or FOLDER:NAME)."):count(1)
  recipe.declare(parser, { "target" })
  flags.option(parser, "--out", "The folder for the samples, the fits and reference.json."):count(1):convert(cli.output_dir())
  flags.option(parser, "--task", "regression or classification (default: classification when the target holds categories).")
    :convert(cli.choice { "regression", "classification" })
  flags.option(parser, "--hidden", "Units per hidden layer of the sampled net and of the methods, comma-separated; 0: none "
    .. "(Bayesian linear or softmax regression; the methods then keep fit.lua's default).", "50")
    :convert(hidden_list)
  flags.option(parser, "--methods", "Methods to fit with fit.lua and compare (comma-separated), or none: "
    .. "bbb (fit.lua's BBB: local reparameterization, the full ELBO), bbb-weight and bbb-flipout (its other "
    .. ("estimators), bbb-tempered (the complexity term x %g), mlp, dropout, ensemble, laplace (a plain net with "):format(TEMPERED)
    .. "one noise sd, its last layer under a Laplace posterior).", "bbb,dropout,ensemble"):convert(method_list)
  flags.option(parser, "--warmup", "HMC warm-up iterations per chain (step size and mass matrix tuned).", "500")
    :convert(cli.nonnegative_integer { max = 1000000 })
  flags.option(parser, "--draws", "HMC draws kept per chain (after --warmup).", "500"):convert(cli.integer { min = 4, max = 1000000 })
  flags.option(parser, "--chains", "HMC chains (R-hat needs at least 2).", "4"):convert(cli.positive_integer { max = 64 })
  flags.option(parser, "--kernel", "The sampler: nuts (the No-U-Turn Sampler: each trajectory runs until it turns back, "
    .. "at most 2^--max-depth steps) or hmc (trajectories of about --leapfrog steps).", "nuts")
    :convert(cli.choice { "nuts", "hmc" })
  flags.option(parser, "--max-depth", "NUTS: the most doublings of a trajectory (2^N - 1 leapfrog steps at most).", "10")
    :convert(cli.positive_integer { max = 20 })
  flags.option(parser, "--metric", "The mass matrix warm-up estimates: diag (the variance of each weight) or dense (their "
    .. "covariance: P^2 work a leapfrog step for P weights, and it evens out correlated directions).", "diag")
    :convert(cli.choice { "diag", "dense" })
  flags.option(parser, "--leapfrog", "HMC (--kernel hmc): mean leapfrog steps per iteration.", "64")
    :convert(cli.positive_integer { max = 100000 })
  flags.option(parser, "--target-accept", "The acceptance rate warm-up tunes the step size for.", "0.8")
    :convert(cli.probability())
  recipe.declare(parser, { "prior_sigma" })
  flags.option(parser, "--rotate-inputs", "on: the chains see the inputs turned to their principal axes (x V, V the "
    .. "eigenvectors of x^T x over the rows they condition on). The N(0, s^2) prior does not change under the turn, so "
    .. "neither does the posterior predictive; but correlated inputs no longer make correlated first-layer weights, "
    .. "which a diagonal mass matrix cannot follow. The first layer's draws are then W V (V is in hmc/job.safetensors). "
    .. "off: the inputs as given.", "on"):convert(cli.choice { "on", "off" })
  flags.option(parser, "--noise-sigma", "Regression noise sd in standardised target units, or infer (sampled, half-Cauchy(0, 1) "
    .. "prior).", "infer"):convert(noise_value)
  recipe.declare(parser, { "jobs" })
  recipe.declare(parser, { "test_fraction" })
  recipe.declare(parser, { "val_fraction" })
  recipe.declare(parser, { "split" })
  recipe.declare(parser, { "ignore" })
  recipe.declare(parser, { "delimiter" })
  recipe.declare(parser, { "test_samples", "seed", "threads" })
  parser:argument("fit_flags", "Flags for every scripts/fit.lua run, after --."):args("*")
  return parser
end

-- fit.lua flags the experiment sets for each method itself.
local OWN_FLAGS = { data = true, target = true, split = true, model = true, seed = true, save = true, summary = true,
  threads = true, task = true, ignore = true, delimiter = true, test = true, save_split = true, hidden = true }

--- parse([argv]) -> config: the command line, checked before any work.
function M.parse(argv)
  argv = argv or arg
  local parser = M.parser()
  local c, given = recipe.parse(parser, argv)
  c.given = given
  for _, w in ipairs(c.fit_flags) do
    local name = w:match("^%-%-([%w-]+)")
    if name and OWN_FLAGS[name:gsub("-", "_")] then
      parser:error(("--%s after --: reference.lua sets it for every fit.lua run itself"):format(name))
    end
  end
  for _, name in ipairs(c.methods) do
    local own = METHOD_FLAGS[name]
    for k = 3, #own, 2 do
      for _, w in ipairs(c.fit_flags) do
        if w == own[k] or w:find(own[k] .. "=", 1, true) == 1 then
          parser:error(("%s after --: --methods %s sets it for its fit.lua run itself"):format(own[k], name))
        end
      end
    end
  end
  if c.fit_flags[1] and not c.fit_flags[1]:find("^%-") then
    parser:error(("unexpected argument '%s' (flags for fit.lua go after --)"):format(c.fit_flags[1]))
  end
  if c.kernel == "nuts" and given.leapfrog then
    parser:error("--leapfrog is for --kernel hmc (NUTS sets each trajectory's length; --max-depth bounds it)")
  end
  if c.kernel == "hmc" and given.max_depth then parser:error("--max-depth is for --kernel nuts") end
  if c.split and sys.kind(c.split, true) ~= "file" then parser:error(("--split: %s is not a file"):format(c.split)) end
  local ok, err = sys.mkdir_p(c.out)
  if not ok then parser:error(("--out: cannot make %s: %s"):format(c.out, tostring(err))) end
  c.script_dir = (arg and arg[0] or "scripts/reference.lua"):match("^(.*)/[^/]*$") or "."
  return c
end

local function fail(msg) error({ usage = (tostring(msg):gsub("^bbb%.data%.", "")) }, 0) end

local fnv1a = bbb.core.sys.fnv1a

-- The table as fit.lua reads it, rows without the target left out.
local function read_table(c)
  local read = { target = c.target, task = c.task, ignore = #c.ignore > 0 and c.ignore or nil, keep_missing = true,
                 unseen = "ignore", delimiter = c.delimiter }
  local ok, ds = pcall(tab.read, c.data, read)
  if not ok then fail(ds) end
  if not ds.y then fail(("no target column '%s'"):format(c.target)) end
  local dropped
  ok, ds, dropped = pcall(tab.drop_missing_target, ds)
  if not ok then fail(ds) end
  if c.task == "regression" and ds.target.categorical then
    fail(("the target '%s' holds categories: use --task classification"):format(c.target))
  end
  ds.left_out = (ds.n_dropped or 0) + dropped
  return ds
end

-- The rows of each part (--split's or drawn from --seed), written to
-- out/split.json for the fit.lua runs.
local function split_rows(c, ds)
  local ok, tr, va, te
  if c.split then
    ok, tr, va, te = pcall(tab.read_split, c.split, ds.n)
    if not ok then fail("--split: " .. tostring(tr)) end
  else
    ok, tr, va, te = pcall(tab.split, ds.n, { val = c.val_fraction, test = c.test_fraction }, bbb.Generator(c.seed))
    if not ok then fail(tr) end
  end
  if not te then fail("no test rows: the reference is compared on test rows (--test-fraction, or --split's)") end
  local path = c.out .. "/split.json"
  tab.write_split(path, { train = tr, validation = va, test = te }, ds.n, ds.left_out)
  return { train = tr, validation = va, test = te, path = path }
end

-- Everything the chains need, standardised as fit.lua's models are (on the
-- rows the chains condition on: training and validation).
local function setup(c)
  local ds = read_table(c)
  local rows = split_rows(c, ds)
  local fitted = rows.validation and bbb.cat({ rows.train, rows.validation }, 1) or rows.train
  local all, te = tab.subset(ds, fitted), tab.subset(ds, rows.test)
  local m = tab.new(ds, all.x, all.y, "mlp", { hidden = c.hidden })
  local reg = m.task == "regression"
  if not reg and c.given.noise_sigma then fail("--noise-sigma is for regression; '" .. c.target .. "' holds classes") end
  local job = { ds = ds, rows = rows, model = m, task = m.task, te = te,
    x = tab.inputs(m, all.x), y = reg and tab.targets(m, all.y):reshape(-1, 1) or all.y:reshape(-1),
    xt = tab.inputs(m, te.x), n_fit = all.n }
  -- the net's inputs are the model's (a table with missing values gains
  -- an indicator column per such feature), not the table's columns
  local sizes = { job.x:size(2) }
  for _, h in ipairs(c.hidden) do sizes[#sizes + 1] = h end
  sizes[#sizes + 1] = reg and 1 or #ds.classes
  job.sizes = sizes
  if c.rotate_inputs == "on" then
    local _, v = bbb.core.eigh(job.x, true)   -- columns: the principal axes of the fitted rows
    job.rotation, job.x, job.xt = v, job.x:matmul(v), job.xt:matmul(v)
  end
  job.settings = { sizes = sizes, likelihood = reg and "gaussian" or "categorical", prior_sigma = c.prior_sigma,
    rotate_inputs = c.rotate_inputs,
    noise_sigma = reg and c.noise_sigma or nil, warmup = c.warmup, samples = c.draws, kernel = c.kernel,
    leapfrog = c.kernel == "hmc" and c.leapfrog or nil, max_depth = c.kernel == "nuts" and c.max_depth or nil,
    target_accept = c.target_accept, seed = c.seed, metric = c.metric }
  local parts = { json.encode(job.settings) }
  for _, t in ipairs { job.x, job.y } do
    for _, v in ipairs(t:reshape(-1):totable()) do parts[#parts + 1] = ("%.9g"):format(v) end
  end
  job.key = fnv1a(table.concat(parts, " "))
  return job
end

local function chain_path(dir, k) return ("%s/chain-%d.safetensors"):format(dir, k) end

--- chain_job(dir, k [, report]): runs chain k of the HMC job saved in dir
-- (job.safetensors) and writes dir/chain-K.safetensors; what each chain
-- worker runs, and the chains run in this process too. report(info) gets
-- bbb.mcmc.hmc's progress.
function M.chain_job(dir, k, report)
  local t, s = bbb.checkpoint.read(dir .. "/job.safetensors")
  for i, v in ipairs(s.sizes) do s.sizes[i] = math.tointeger(v) end
  bbb.set_num_threads(math.tointeger(s.threads) or 1)
  local net = bbb.nn.mlp(s.sizes)
  local post = bbb.mcmc.hmc { net = net, x = t.x, y = t.y, likelihood = s.likelihood, noise_sigma = s.noise_sigma,
    prior_sigma = s.prior_sigma, warmup = math.tointeger(s.warmup), samples = math.tointeger(s.samples),
    kernel = s.kernel, leapfrog = s.leapfrog and math.tointeger(s.leapfrog),
    max_depth = s.max_depth and math.tointeger(s.max_depth), target_accept = s.target_accept, metric = s.metric,
    seed = math.tointeger(s.seed), chain_ids = { k }, diagnose = false, progress = report }
  local tensors = { draws = post.samples[1], lp = bbb.tensor(post.lp[1]) }
  if type(post.noise_sigma) == "table" then tensors.sigma = bbb.tensor(post.noise_sigma[1]) end
  local c = post.per_chain[1]
  bbb.checkpoint.write(chain_path(dir, k), tensors, { key = s.key, chain = k, kernel = post.kernel,
    step_size = c.step_size, accept_rate = c.accept_rate, divergences = c.divergences, gradients = c.gradients,
    steps = c.steps, tree_depth = c.tree_depth, max_depth_hits = c.max_depth_hits, seconds = post.seconds })
end

-- A chain file written for this very job, or nil.
local function finished_chain(dir, k, key)
  if sys.kind(chain_path(dir, k), true) ~= "file" then return nil end
  local ok, t, meta = pcall(bbb.checkpoint.read, chain_path(dir, k))
  if ok and meta.key == key then return { tensors = t, meta = meta } end
  return nil
end

-- One chain in this process, with a progress bar on a terminal (mode nil)
-- or a line with its ETA every tenth of the way ("lines", for a log).
local function run_here(dir, k, mode)
  local _, s = bbb.checkpoint.read(dir .. "/job.safetensors")
  local bar = bbb.progress.new { total = math.tointeger(s.warmup + s.samples), label = ("chain %d"):format(k),
                                 mode = mode, stream = mode and io.stdout or nil }
  M.chain_job(dir, k, function(p)
    bar:update(p.iteration + (p.phase == "sampling" and s.warmup or 0), p.tree_depth
      and ("step %.2g, depth %d"):format(p.step_size, p.tree_depth) or ("step %.2g"):format(p.step_size))
  end)
  bar:finish()
end

--- chain_worker(dir, k): chain k of the job in dir, in a worker process
-- whose output goes to the chains' log; exits 0 when its file is written,
-- 1 with the error on stderr otherwise.
function M.chain_worker(dir, k)
  local ok, err = pcall(run_here, dir, k, "lines")
  if not ok then
    io.stderr:write(("chain %d: %s\n"):format(k, tostring(err)))
    os.exit(1)
  end
  os.exit(0)
end

-- The chains: those of an earlier run of the same job read back, the
-- others run here one after another, or --jobs at once in processes.
local function hmc_chains(c, job)
  local dir = c.out .. "/hmc"
  assert(sys.mkdir_p(dir))
  local meta = {}
  for k, v in pairs(job.settings) do meta[k] = v end
  meta.key, meta.threads = job.key, c.jobs > 1 and math.max(1, c.threads // c.jobs) or c.threads
  bbb.checkpoint.write(dir .. "/job.safetensors", { x = job.x, y = job.y, rotation = job.rotation }, meta)
  local todo = {}
  for k = 1, c.chains do if not finished_chain(dir, k, job.key) then todo[#todo + 1] = k end end
  if #todo < c.chains then
    print(("reference.lua: %d of %d chains done in an earlier run, kept"):format(c.chains - #todo, c.chains))
  end
  if c.jobs > 1 and #todo > 1 then
    local tasks, log = {}, dir .. "/chains.log"
    for i, k in ipairs(todo) do
      tasks[i] = { argv = sys.bbblua_argv("-e", ("require('bbb.app.experiments.reference').chain_worker(%q, %d)")
        :format(dir, k)), stdin = "/dev/null", stdout = log, stderr = log }
    end
    print(("reference.lua: %d chains, %d at a time; their progress, with an ETA, goes to %s"):format(#todo, c.jobs, log))
    io.stdout:flush()
    local done = 0
    local function on_done(_, r, i)
      done = done + 1
      print(("chain %d %s (%d of %d), %.0f s"):format(todo[i], r.ok and "done" or "failed", done, #todo, r.seconds))
      io.stdout:flush()
    end
    for i, r in ipairs(require("bbb.app.jobs").run(tasks, { jobs = c.jobs, on_done = on_done })) do
      if not r.ok then error(("chain %d: its worker ended with %s %s (see %s)"):format(todo[i], r.how, tostring(r.code), log), 0) end
    end
  else
    for _, k in ipairs(todo) do run_here(dir, k) end
  end
  local chains = {}
  for k = 1, c.chains do
    chains[k] = assert(finished_chain(dir, k, job.key), "chain file missing after its run")
    local m = chains[k].meta
    local trees = m.tree_depth and (", tree depth %.2f (%d at --max-depth)"):format(m.tree_depth,
      math.tointeger(m.max_depth_hits) or m.max_depth_hits) or ""
    print(("chain %d: %d draws, step size %.3g, acceptance %.2f%s, %.1f steps a draw, %d gradients, %d divergences, "
      .. "%.1f s"):format(k, c.draws, m.step_size, m.accept_rate, trees, m.steps,
      math.tointeger(m.gradients) or m.gradients, math.tointeger(m.divergences) or m.divergences, m.seconds))
  end
  return chains
end

-- The largest R-hat and smallest bulk ESS over quantities, each given as
-- fn(i) -> its chains.
local function worst(n, chains_of)
  local rmax, emin = -math.huge, math.huge
  for i = 1, n do
    local r, e = require("bbb.mcmc.diagnostics").rhat_ess(chains_of(i))
    rmax, emin = math.max(rmax, r), math.min(emin, e)
  end
  return rmax, emin
end

-- log mean_s N(y | f_s, sigma_s^2) for each test row, by log-sum-exp.
local function mixture_loglik(f, sig, ys)
  local S, total = #f, 0
  for i, y in ipairs(ys) do
    local terms, mx = {}, -math.huge
    for s = 1, S do
      local z = (y - f[s][i]) / sig[s]
      terms[s] = -0.5 * z * z - math.log(sig[s]) - 0.5 * LOG_2PI
      if terms[s] > mx then mx = terms[s] end
    end
    local acc = 0
    for s = 1, S do acc = acc + math.exp(terms[s] - mx) end
    total = total + mx + math.log(acc / S)
  end
  return total / #ys
end

-- Regression: the draws of f and sigma in the target's units, the test
-- log-likelihood, and per test row the sorted draws of y the W1 compares with.
local function regression_predictive(c, job, stack, sigmas)
  local prep = job.model.prep
  local S, N = stack:size(1), stack:size(2)
  local f = (stack:reshape(S, N) * prep.y_std + prep.y_mean)
  local ft, sig = f:totable(), {}
  for s = 1, S do sig[s] = sigmas[s] * prep.y_std end
  local ys = job.te.y:reshape(-1):totable()
  local eps = bbb.randn({ S, N }, 0, 1, bbb.Generator(c.seed)):totable()
  local ydraws = {}
  for i = 1, N do
    local d = {}
    for s = 1, S do d[s] = ft[s][i] + sig[s] * eps[s][i] end
    table.sort(d)
    ydraws[i] = d
  end
  return { f = f, sigma = bbb.tensor(sig), test_ll = mixture_loglik(ft, sig, ys), ydraws = ydraws }
end

-- The reference predictive at the test rows, its test log-likelihood and
-- its diagnostics: R-hat and ESS of the predictions (what the comparison
-- uses) and of the weights (pessimistic for hidden layers: chains may hold
-- the same function with the units permuted); saved to predictive.safetensors.
local function hmc_predictive(c, job, chains)
  local list, sigmas, C, S = {}, {}, #chains, c.draws
  for k, ch in ipairs(chains) do
    list[k] = ch.tensors.draws
    local sg = ch.tensors.sigma and ch.tensors.sigma:totable()
    for s = 1, S do sigmas[#sigmas + 1] = sg and sg[s] or c.noise_sigma end
  end
  local net = bbb.nn.mlp(job.sizes)
  local reg = job.task == "regression"
  local mean, stack, _
  if reg then _, _, stack = bbb.mcmc.predict(net, list, job.xt, { likelihood = "gaussian" })
  else mean, stack = bbb.mcmc.predict(net, list, job.xt, { likelihood = "categorical" }) end
  local pred = { seconds = 0, gradients = 0, divergences = 0, accept_rate = 0, per_chain = {} }
  for k, ch in ipairs(chains) do
    local m = ch.meta
    pred.seconds = pred.seconds + m.seconds
    pred.gradients = pred.gradients + math.tointeger(m.gradients)
    pred.divergences = pred.divergences + math.tointeger(m.divergences)
    pred.accept_rate = pred.accept_rate + m.accept_rate / C
    pred.per_chain[k] = { chain = k, step_size = m.step_size, accept_rate = m.accept_rate, steps = m.steps,
      tree_depth = m.tree_depth, max_depth_hits = m.max_depth_hits and math.tointeger(m.max_depth_hits),
      gradients = math.tointeger(m.gradients), divergences = math.tointeger(m.divergences), seconds = m.seconds }
  end
  local N, K = stack:size(2), stack:size(3)
  local flat = stack:reshape(C * S, N * K):t():totable()   -- one row per predicted quantity
  pred.rhat_max, pred.ess_min = worst(N * K, function(i)
    local out = {}
    for k = 1, C do out[k] = table.move(flat[i], (k - 1) * S + 1, k * S, 1, {}) end
    return out
  end)
  if C > 1 then pred.rhat_max_weights, pred.ess_min_weights = bbb.mcmc.diagnose { samples = list } end
  local tensors = { y = job.te.y:reshape(-1), rows = job.rows.test }
  if reg then
    local r = regression_predictive(c, job, stack, sigmas)
    pred.test_ll, pred.ydraws, tensors.f, tensors.sigma = r.test_ll, r.ydraws, r.f, r.sigma
    -- the model's noise in the target's units, sampled or as --noise-sigma fixed it
    pred.noise_sigma, pred.noise = r.sigma:mean():item(), c.noise_sigma == "infer" and "sampled" or "fixed"
  else
    pred.probs, tensors.probs = mean, stack
    local ys, p, ll = job.te.y:reshape(-1):totable(), mean:totable(), 0
    for i, y in ipairs(ys) do ll = ll + math.log(math.max(p[i][math.tointeger(y)], 1e-300)) end
    pred.test_ll = ll / #ys
  end
  bbb.checkpoint.write(c.out .. "/predictive.safetensors", tensors, { task = job.task, draws = C * S })
  return pred
end

-- Runs fit.lua for one method on the split (unless an earlier run with the
-- same command left its model and summary); -> model path, summary, the
-- fit's seconds (kept beside the command, for a fit read back).
local function fit_method(c, job, name)
  local dir = c.out .. "/methods"
  assert(sys.mkdir_p(dir))
  local ckpt, summary, stamp = dir .. "/" .. name .. ".ckpt", dir .. "/" .. name .. ".json", dir .. "/" .. name .. ".argv"
  local args = { "--data", c.data, "--target", c.target, "--split", job.rows.path,
    "--seed", c.seed, "--save", ckpt, "--summary", summary, "--threads", c.threads, "--delimiter", c.delimiter }
  if c.task then args[#args + 1] = "--task"; args[#args + 1] = c.task end
  -- the methods get the sampled net's architecture (fit.lua has no net without a hidden layer)
  if #c.hidden > 0 then args[#args + 1] = "--hidden"; args[#args + 1] = table.concat(c.hidden, ",") end
  for _, col in ipairs(c.ignore) do args[#args + 1] = "--ignore"; args[#args + 1] = col end
  local own = METHOD_FLAGS[name]
  for k = 1, #own, 2 do
    local v = own[k + 1]
    if type(v) == "function" then v = v(c, job) end
    if v ~= nil then args[#args + 1] = own[k]; args[#args + 1] = v end
  end
  table.move(c.fit_flags, 1, #c.fit_flags, #args + 1, args)
  for i, a in ipairs(args) do args[i] = tostring(a) end
  local said = table.concat(args, "\0")
  local timing = dir .. "/" .. name .. ".seconds"
  local seconds = sys.read_file(stamp) == said and tonumber(sys.read_file(timing) or "")
  if not (seconds and sys.kind(ckpt, true) == "file" and sys.kind(summary, true) == "file") then
    local t0 = bbb.core.clock()
    print(("reference.lua: fitting %s with fit.lua (log: %s)"):format(name, dir .. "/" .. name .. ".log"))
    io.stdout:flush()
    os.remove(stamp)
    local log = dir .. "/" .. name .. ".log"
    os.remove(log)
    local ok, how, code = sys.run(sys.bbblua_argv(c.script_dir .. "/fit.lua", table.unpack(args)),
      { stdin = "/dev/null", stdout = log, stderr = log })
    if not ok then error(("fit.lua --model %s ended with %s %s (see %s)"):format(name, how, tostring(code), log), 0) end
    seconds = bbb.core.clock() - t0
    cli.write_file(timing, ("%.3f\n"):format(seconds))
    cli.write_file(stamp, said)
  end
  return ckpt, json.decode(assert(sys.read_file(summary), summary), summary), seconds
end

-- W1 between N(m, s^2) and the sorted draws d: the mean distance between
-- each draw and the Gaussian quantile of its rank.
local function w1_gaussian(d, m, s, z)
  local acc = 0
  for k = 1, #d do acc = acc + math.abs(d[k] - (m + s * z[k])) end
  return acc / #d
end

local function mean_of(list)
  local total = 0
  for _, v in ipairs(list) do total = total + v end
  return total / #list
end

-- A predictive at the test rows against the reference: p holds mean and
-- std (regression, Gaussian) or probs (classification). Each distance
-- comes with its value per test row (w1_rows, tv_rows, agreement_rows),
-- which two methods' paired interval needs.
local function distance(job, pred, p)
  local out = {}
  if job.task == "regression" then
    local n, z = #pred.ydraws[1], {}
    for k = 1, n do z[k] = bbb.mcmc.normal_quantile((k - 0.5) / n) end
    local m, s, w = p.mean:reshape(-1):totable(), p.std:reshape(-1):totable(), {}
    for i, d in ipairs(pred.ydraws) do w[i] = w1_gaussian(d, m[i], s[i], z) end
    out.w1, out.w1_rows = mean_of(w), w
  else
    local a, b = p.probs:totable(), pred.probs:totable()
    local agree, tv = {}, {}
    for i = 1, #a do
      local ia, ib, d = 1, 1, 0
      for j = 1, #a[i] do
        if a[i][j] > a[i][ia] then ia = j end
        if b[i][j] > b[i][ib] then ib = j end
        d = d + math.abs(a[i][j] - b[i][j])
      end
      agree[i], tv[i] = ia == ib and 1 or 0, 0.5 * d
    end
    out.agreement, out.tv, out.agreement_rows, out.tv_rows = mean_of(agree), mean_of(tv), agree, tv
  end
  return out
end

-- One fit.lua method's predictive at the test rows against the reference.
local function compare(c, job, pred, ckpt, summary)
  local model = tab.load(ckpt)
  local out = distance(job, pred, tab.seeded(model, c.seed, tab.predict, model, job.te.x, c.test_samples))
  out.test_ll = summary.test and summary.test.ll
  return out
end

-- The mean test log-likelihood of a Gaussian (mean, std) or categorical
-- (probs) predictive.
local function predictive_ll(job, p)
  local ys, total = job.te.y:reshape(-1):totable(), 0
  if job.task == "regression" then
    local m, s = p.mean:reshape(-1):totable(), p.std:reshape(-1):totable()
    for i, y in ipairs(ys) do total = total - 0.5 * ((y - m[i]) / s[i]) ^ 2 - math.log(s[i]) - 0.5 * LOG_2PI end
  else
    local pr = p.probs:totable()
    for i, y in ipairs(ys) do total = total + math.log(math.max(pr[i][math.tointeger(y)], 1e-300)) end
  end
  return total / #ys
end

-- laplace: its plain net's last layer under the Laplace posterior of its
-- training rows (prior precision by the marginal likelihood), without the
-- temperature fit.lua fits for the plain net; the classes' probabilities
-- averaged over --test-samples draws of the layer.
local function laplace_predictive(c, job, ckpt)
  local m = tab.load(ckpt)
  local body, head = bbb.laplace.split(m.net)
  local tr = tab.subset(job.ds, job.rows.train)
  local reg = job.task == "regression"
  return bbb.no_grad(function()
    local post = bbb.laplace.last_layer { features = body(tab.inputs(m, tr.x)), weight = head.weight, bias = head.bias,
      likelihood = reg and "gaussian" or "categorical", targets = reg and tab.targets(m, tr.y):reshape(-1, 1) or nil,
      sigma = reg and m.noise_sigma or nil, labels = not reg and tr.y:reshape(-1) or nil }
    local phi = body(tab.inputs(m, job.te.x))
    if not reg then return { probs = post:predict_sampled(phi, c.test_samples, bbb.Generator(c.seed)) } end
    local mean, std = post:predict(phi)
    local s = m.prep.y_std
    return { mean = mean * s + m.prep.y_mean, std = std * s }
  end)
end

-- Fits (or reads back) one method and scores it against the reference.
local function method_result(c, job, pred, name)
  local ckpt, summary, seconds = fit_method(c, job, name)
  if name ~= "laplace" then
    local out = compare(c, job, pred, ckpt, summary)
    out.seconds = seconds
    return out
  end
  local t0 = bbb.core.clock()
  local p = laplace_predictive(c, job, ckpt)
  local out = distance(job, pred, p)
  out.test_ll, out.seconds = predictive_ll(job, p), seconds + bbb.core.clock() - t0
  return out
end

--- run(config) -> result: reads and splits the table, runs (or reads
-- back) the HMC chains, scores their predictive on the test rows, fits and
-- compares every method of config.methods, and writes out/reference.json,
-- which result mirrors: {hmc = {rhat_max, ess_min, rhat_max_weights,
-- ess_min_weights, test_ll, seconds, kernel, noise_sigma and noise
-- ("sampled" or "fixed"; regression), per_chain = {{chain,
-- step_size, accept_rate, steps, tree_depth (nuts), max_depth_hits (nuts),
-- gradients, divergences, seconds}, ...}, ...}, methods = {NAME = {test_ll,
-- seconds, w1 and w1_rows | agreement, tv, agreement_rows and
-- tv_rows}}, ...}. Raises {usage = message} for bad input.
function M.run(c)
  bbb.set_num_threads(c.threads)
  local job = setup(c)
  if #c.methods > 0 and sys.kind(c.script_dir .. "/fit.lua", true) ~= "file" then
    fail(("--methods: fit.lua is not in %s, beside this script"):format(c.script_dir))
  end
  local how = c.kernel == "nuts" and ("NUTS, max depth %d"):format(c.max_depth)
    or ("%d leapfrog steps"):format(c.leapfrog)
  print(("reference.lua: %s, %d rows x %d features; %s of '%s'; HMC on %d rows (training and validation), net %s, "
    .. "%d chains x (%d warm-up + %d draws), %s"):format(c.data, job.ds.n, job.ds.x:size(2), job.task,
    c.target, job.n_fit, table.concat(job.sizes, "-"), c.chains, c.warmup, c.draws, how))
  io.stdout:flush()
  local chains = hmc_chains(c, job)
  local pred = hmc_predictive(c, job, chains)
  local hmc = { rhat_max = pred.rhat_max, ess_min = pred.ess_min, rhat_max_weights = pred.rhat_max_weights,
    ess_min_weights = pred.ess_min_weights, test_ll = pred.test_ll, seconds = pred.seconds,
    gradients = pred.gradients, accept_rate = pred.accept_rate, divergences = pred.divergences,
    noise_sigma = pred.noise_sigma, noise = pred.noise, chains = c.chains, warmup = c.warmup, samples = c.draws,
    kernel = c.kernel,
    leapfrog = c.kernel == "hmc" and c.leapfrog or nil, max_depth = c.kernel == "nuts" and c.max_depth or nil,
    metric = c.metric, per_chain = pred.per_chain, hidden = #c.hidden > 0 and c.hidden or json.empty_array, prior_sigma = c.prior_sigma,
    rotate_inputs = c.rotate_inputs }
  local result = { data = c.data, target = c.target, task = job.task, seed = c.seed, hmc = hmc, methods = {},
    rows = { train = job.rows.train:numel(), validation = job.rows.validation and job.rows.validation:numel() or 0,
             test = job.rows.test:numel() }, split = "split.json" }
  for _, name in ipairs(c.methods) do result.methods[name] = method_result(c, job, pred, name) end
  cli.write_file(c.out .. "/reference.json", json.encode(result) .. "\n")
  result.out = c.out
  return result
end

--- report(result): the reference's diagnostics and each method's distance from it.
function M.report(r)
  local h = r.hmc
  local depth = 0
  for _, ch in ipairs(h.per_chain or {}) do depth = depth + (ch.tree_depth or 0) / #h.per_chain end
  print(("%s: R-hat %.3f and bulk ESS %.0f over the test predictions%s; acceptance %.2f%s, %d divergences, %.1f s; "
    .. "test log-likelihood %.4f"):format(h.kernel == "hmc" and "HMC" or "NUTS", h.rhat_max, h.ess_min,
    h.rhat_max_weights and (" (weights: R-hat %.3f, ESS %.0f)"):format(h.rhat_max_weights, h.ess_min_weights) or "",
    h.accept_rate, h.kernel == "nuts" and (", tree depth %.2f"):format(depth) or "", h.divergences, h.seconds,
    h.test_ll))
  if not (h.rhat_max < 1.01) or not (h.ess_min >= 100) then
    print(("reference.lua: the chains have not mixed (R-hat above 1.01 or ESS below 100): run longer "
      .. "(--warmup, --draws, %s--chains) before trusting the reference")
      :format(h.kernel == "hmc" and "--leapfrog, " or "--max-depth if the trees reach it, "))
  end
  local names = {}
  for name in pairs(r.methods) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local m = r.methods[name]
    local ll = m.test_ll and ("%.4f"):format(m.test_ll) or "-"
    if r.task == "regression" then
      print(("%-10s test log-likelihood %s   W1 to the reference %.4f"):format(name, ll, m.w1))
    else
      print(("%-10s test log-likelihood %s   agreement %.3f   total variation %.4f"):format(name, ll, m.agreement, m.tv))
    end
  end
  print("wrote " .. r.out .. "/reference.json")
  return r
end

return M

--- bbb.app.experiments.bandit: The Mushroom contextual bandit of Blundell et al. (2015, section 5.3,
-- figure 6): Bayes by Backprop with Thompson sampling against epsilon-greedy
-- MLPs (5%, 1%, 0%), a uniform agent, linear Thompson sampling, MC-dropout
-- Thompson sampling and NeuralLinear. The network agents' settings are the
-- ablation's (doc/notebook/bandit.md, bbb.app.experiments.bandit_agent.DEFAULTS); --paper-agent
-- gives the previous ones.
-- Every agent meets the same mushrooms and poison coins (common random
-- numbers); agents run in parallel worker processes, one thread each.
-- scripts/bandit.lua is its command line: M.parse, then M.run (the workers,
-- each started as M.work), M.report and M.plot.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"

local M = {}
local bandit = require "bbb.bandit"
local checkpoint = require "bbb.checkpoint"
local experiment = require "bbb.app.experiments.bandit_agent"
local D, P = experiment.DEFAULTS, experiment.PAPER_AGENT

local DEFAULT_STEPS = 10000
local PAPER_STEPS = 50000
local PAPER_REPEATS = 5

-- name -> how to build it; the order is the table's and the plot's.
local AGENTS = {
  { name = "bbb", title = "Bayes by Backprop", make = function(o) return bandit.BBB(o) end },
  { name = "eps5", title = "5% greedy", epsilon = 0.05 },
  { name = "eps1", title = "1% greedy", epsilon = 0.01 },
  { name = "eps0", title = "greedy", epsilon = 0 },
  { name = "linear", title = "linear TS", make = function(o) return bandit.LinearTS(o) end },
  { name = "uniform", title = "uniform", make = function(o) return bandit.Uniform(o) end },
  { name = "dropout", title = "MC dropout", make = function(o) return bandit.MCDropout(o) end },
  { name = "neurallinear", title = "NeuralLinear", make = function(o) return bandit.NeuralLinear(o) end },
}
local KNOWN = "bbb, eps5, eps1, eps0, linear, uniform, dropout, neurallinear"
local BY_NAME = {}
for k, a in ipairs(AGENTS) do
  a.index = k
  if a.epsilon then
    local eps = a.epsilon
    a.make = function(o) o.epsilon = eps; return bandit.EpsilonGreedy(o) end
  end
  BY_NAME[a.name] = a
end
local PAPER_AGENTS = { "bbb", "eps5", "eps1", "eps0" }

-- Bad input: recipe.main prints "bandit.lua: message" and exits 2.
local function fail(msg, ...)
  error({ usage = msg:format(...) }, 0)
end

-- A number as the shortest text that reads back as the same number of the
-- same type ("1.0" for a float), so that a worker's config is the
-- coordinator's to the type and its checkpoint says what the command line did.
local function number_text(v)
  if math.type(v) ~= "float" then return tostring(v) end
  local s = ("%.15g"):format(v)
  if tonumber(s) ~= v then s = ("%.17g"):format(v) end
  return s:find("[.eEn]") and s or s .. ".0"
end

-- A value as an error message shows it (a setting with no flag value is off).
local function show(v)
  if v == nil then return "false" end
  return math.type(v) == "float" and ("%g"):format(v) or tostring(v)
end

-- --prior-mix PI,SIGMA1,SIGMA2 -> {pi, sigma1, sigma2}, checked.
local function mixture(text)
  local m = {}
  for w in text:gmatch("[^,]+") do m[#m + 1] = tonumber(w) end
  if #m ~= 3 or not (m[1] and m[2] and m[3]) or not (m[1] > 0 and m[1] < 1 and m[2] > 0 and m[3] > 0)
      or m[2] == math.huge or m[3] == math.huge then
    fail("--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1 and both sigmas finite and > 0, got '%s'", text)
  end
  return m
end

-- The steps of BBB's growing noise matter only when it grows (a checkpoint
-- from before the growing noise has none).
local function same_growth(saved, now)
  return not (saved.sigma_final or now.sigma_final) or saved.sigma_steps == now.sigma_steps
end

--- What each option of M.parser is besides its declaration there (flag,
-- default, help, converter), by the same name. An option is a setting of
-- each agent's run unless it says config = false: the run's config (the
-- table M.config builds and each checkpoint keeps) holds it, the workers are
-- given it, and --resume refuses a run whose value differs from the
-- checkpoint's. A setting left off takes the agents' setting of its name
-- (bandit_agent.DEFAULTS, or PAPER_AGENT with --paper-agent) when there is one.
--   config = false: no setting of the run; pass = false: not given to the
--     workers (the coordinator's own, or what each worker is given apart)
--   key: its name in the config, when not the option's
--   value(v, args): its value in the config from the option's (v nil: left
--     off); flag(c): the option's value from the config's (nil: none)
--   resume = false: a resumed run may change it; bbb_only: only BBB reads it,
--     so --resume checks it for BBB alone; same(saved, now): whether two
--     configs agree on it, where equal values are not the rule
local OPTION = {
  help = { config = false, pass = false },
  agents = { config = false, pass = false },
  paper = { config = false, pass = false },   -- its steps and repeats are in the config
  paper_agent = { config = false },           -- a worker's settings left off fall back as here
  jobs = { config = false, pass = false },
  out = { config = false },
  data = { config = false },
  resume = { config = false },
  no_plot = { config = false, pass = false },
  worker = { config = false, pass = false },
  run = { config = false, pass = false },
  steps = { resume = false, value = function(v, args) return args.paper and PAPER_STEPS or v or DEFAULT_STEPS end },
  -- a worker plays one run, and its checkpoint has always said one repeat
  repeats = { resume = false, pass = false, value = function(v, args) return v or (args.paper and PAPER_REPEATS or 1) end },
  checkpoint_every = { key = "every", resume = false },
  sigma_final = { bbb_only = true },
  sigma_steps = { bbb_only = true, same = same_growth },
  noise_model = { key = "hetero", value = function(v) return v == "hetero" end,
    flag = function(hetero) return hetero and "hetero" or "fixed" end },
  -- on the command line 0 is none: the input layer then has --prior-sigma's prior
  prior_sigma_in = { bbb_only = true, value = function(v) return v ~= 0 and v end,
    flag = function(sigma) return sigma or 0 end },
  prior_mix = { value = function(v) return mixture(v) end,
    flag = function(m)
      if m then return ("%s,%s,%s"):format(number_text(m[1]), number_text(m[2]), number_text(m[3])) end
    end },
  decide_samples = { bbb_only = true },
}

--- M.parser() -> the command line of the experiment.
function M.parser()
  local parser = recipe.parser("bandit.lua", "The Mushroom contextual bandit (Blundell et al. 2015, "
    .. "section 5.3): cumulative regret of Bayes by Backprop with Thompson sampling against "
    .. "epsilon-greedy MLPs, a uniform agent, linear and MC-dropout Thompson sampling and NeuralLinear. Regret is against "
    .. "the oracle that eats exactly the edible mushrooms; the table gives the expected regret "
    .. "(the poison coin averaged out) and, at the end, the realised one. Writes "
    .. "<out>/bandit_regret.png and <out>/bandit_curves.csv.",
    { defaults = { batch = "64", prior_sigma = false, rho_init = false, dropout = false } })
  flags.option(parser, "--agents", "Comma-separated agents: " .. KNOWN .. ".",
    "bbb,eps5,eps1,eps0,linear,uniform,dropout,neurallinear")
  flags.option(parser, "--steps", ("Steps per agent (default %d: the whole default run takes a few "
    .. "minutes on 2 cores)."):format(DEFAULT_STEPS)):convert(cli.positive_integer())
  flags.flag(parser, "--paper", ("The paper's protocol: %d steps, 5 seeds (64 updates of 64 per step are the "
    .. "defaults); explicit --repeats wins."):format(PAPER_STEPS))
  flags.flag(parser, "--paper-agent", "The network agents' settings before the ablation (doc/notebook/bandit.md): buffer "
    .. "4096, KL / buffer size, likelihood noise 1 (fixed), N(0, 0.1^2) prior, rho -3, one weight sample per decision; explicit flags win.")
  flags.option(parser, "--updates", "Minibatch updates after each step.", "64"):convert(cli.positive_integer())
  recipe.declare(parser, { "batch" })
  flags.option(parser, "--buffer", ("Replay buffer: the last N transitions (default %d)."):format(D.buffer))
    :convert(cli.positive_integer())
  recipe.declare(parser, { "lr" })
  flags.option(parser, "--sigma", ("Noise sigma of the Gaussian likelihood (default %g)."):format(D.sigma))
    :convert(cli.positive_number())
  flags.option(parser, "--sigma-final", ("BBB: the noise grows geometrically from --sigma to this over the first "
    .. "--sigma-steps transitions (default %g; --sigma-final equal to --sigma keeps it fixed)."):format(D.sigma_final))
    :convert(cli.positive_number())
  flags.option(parser, "--sigma-steps", ("BBB: transitions over which the noise grows (default %d)."):format(D.sigma_steps))
    :convert(cli.positive_integer())
  flags.flag(parser, "--learn-sigma", "Learn the likelihood's noise sigma (starting from --sigma).")
  flags.option(parser, "--noise-model", ("The likelihood's noise: fixed (one sigma for every reward) or hetero (the "
    .. "network's second output, sigma = --sigma + softplus(it), learned for each mushroom and action); default %s.")
    :format(D.hetero and "hetero" or "fixed")):convert(cli.choice{ "fixed", "hetero" })
  recipe.declare(parser, { "prior_sigma" })
  flags.option(parser, "--prior-sigma-in", "BBB: the input layer's prior N(0, S^2) instead of --prior-sigma's"
    .. (D.prior_sigma_in and (" (default %g)"):format(D.prior_sigma_in) or "") .. "; 0 gives it --prior-sigma's.")
    :convert(cli.nonnegative_number())
  flags.option(parser, "--prior-mix", "The scale-mixture prior PI,SIGMA1,SIGMA2 instead of the Gaussian one.")
  recipe.declare(parser, { "rho_init" })
  flags.option(parser, "--kl", ("The complexity term's divisor N: size (rows in the buffer), capacity, seen "
    .. "(every transition so far) or blundell (the paper's minibatch weighting); default %s."):format(D.kl))
    :convert(cli.choice{ "size", "capacity", "seen", "blundell" })
  flags.option(parser, "--decide-samples", ("BBB's weight samples averaged per decision (default %d)."):format(D.decide_samples))
    :convert(cli.positive_integer())
  recipe.declare(parser, { "dropout" })
  flags.option(parser, "--refit", ("NeuralLinear: steps between refits of its regression (default %d)."):format(D.refit))
    :convert(cli.positive_integer())
  recipe.declare(parser, { "seed" })
  flags.option(parser, "--repeats", "Runs per agent (seeds seed, seed+1, ...); curves are averaged (default 1; 5 with --paper).")
    :convert(cli.positive_integer())
  recipe.declare(parser, { "jobs" })
  flags.option(parser, "--out", "Output directory.", "out/bandit"):convert(cli.output_dir())
  flags.option(parser, "--data", "The Mushroom .rda file (default: data/mushroom/Mushroom.rda).")
  flags.option(parser, "--checkpoint-every", "Steps between checkpoints of each run (0: none).", "500"):convert(cli.nonnegative_integer())
  flags.flag(parser, "--resume", "Continue each run from its checkpoint in <out>/ckpt/ when there is one.")
  recipe.declare(parser, { "no_plot" })
  flags.option(parser, "--worker", "(internal) run one agent and write its curve."):hidden(true)
  flags.option(parser, "--run", "(internal) the repeat index of --worker."):hidden(true):convert(cli.nonnegative_integer())
  return parser
end


--- M.parse([argv]) -> args: the command line, checked.
function M.parse(argv)
  return (recipe.parse(M.parser(), argv))
end

-- M.parser's options in their order, each {name =, key =, option =, prop =}
-- with OPTION's properties.
local options_list
local function options()
  if not options_list then
    options_list = {}
    for _, o in ipairs(M.parser()._options) do
      local long
      for _, a in ipairs(o._aliases) do if a:sub(1, 2) == "--" then long = a break end end
      local name = long:sub(3):gsub("-", "_")
      local prop = OPTION[name] or {}
      options_list[#options_list + 1] = { name = name, key = prop.key or name, option = o, prop = prop }
    end
  end
  return options_list
end

-- The option's value that gives the config's value v.
local function flag_of(s, v)
  if s.prop.flag then return s.prop.flag(v) end
  return v
end

local function dashed(name) return (name:gsub("_", "-")) end

--- M.config(args) -> the settings of each agent's run, under the names a
-- checkpoint keeps them by (OPTION says how each comes from the flags).
function M.config(args)
  local preset = args.paper_agent and P or D
  local config = {}
  for _, s in ipairs(options()) do
    if s.prop.config ~= false then
      local v = args[s.name]
      if v == nil and preset[s.key] ~= nil then config[s.key] = preset[s.key]
      elseif s.prop.value then config[s.key] = s.prop.value(v, args)
      else config[s.key] = v end
    end
  end
  return config
end

--- M.saved_config(saved, where) -> the config a checkpoint keeps (saved),
-- each setting read again by its option's converter, as from a command line:
-- JSON keeps no integers, so the integer settings are integers again. A
-- value the option refuses is an error naming where.
function M.saved_config(saved, where)
  local config = {}
  for k, v in pairs(saved) do config[k] = v end
  for _, s in ipairs(options()) do
    local convert, v = s.option._convert, saved[s.key]
    local flag = (s.prop.config ~= false and v ~= nil) and flag_of(s, v) or nil
    if type(convert) == "function" and (type(flag) == "number" or type(flag) == "string") then
      local value, err = convert(type(flag) == "number" and number_text(math.tointeger(flag) or flag) or flag)
      if value == nil then error(("%s holds an invalid --%s (%s)"):format(where, dashed(s.name), err), 0) end
      if s.prop.value then value = s.prop.value(value, {}) end
      config[s.key] = value
    end
  end
  return config
end

-- The agents --agents names, in the table's order.
local function agent_names(list)
  local names = {}
  for name in list:gmatch("[^,%s]+") do
    if not BY_NAME[name] then fail("unknown agent '%s' (known: %s)", name, KNOWN) end
    names[#names + 1] = name
  end
  if #names == 0 then fail("--agents names no agent") end
  table.sort(names, function(a, b) return BY_NAME[a].index < BY_NAME[b].index end)
  return names
end

-- Every check of the command line, before any work starts: -> config, the
-- agents' names, the data.
local function setup(args)
  local config = M.config(args)
  if config.hetero and config.learn_sigma then
    fail("--learn-sigma learns one noise for every reward; --noise-model hetero learns it per mushroom and action: give one")
  end
  if args.paper and args.steps then fail("--paper sets the steps; give --paper or --steps, not both") end
  if config.buffer < config.batch then
    fail("--buffer (%d) must hold at least one minibatch (--batch %d)", config.buffer, config.batch)
  end
  local names = agent_names(args.agents)
  local ok_data, data = pcall(bbb.data.load_mushroom, { path = args.data })
  if not ok_data then fail("%s", (tostring(data):gsub("^[^:]*:%d+: ", ""))) end
  return config, names, data
end

--- M.worker_args(args, config, name, run) -> the flags of the worker that
-- plays run `run` (from 0) of agent `name`: every setting of config, and
-- what the workers need besides it, from args.
function M.worker_args(args, config, name, run)
  local t = { worker = name, run = run }
  for _, s in ipairs(options()) do
    if s.prop.pass ~= false then
      local v
      if s.prop.config == false then v = args[s.name] else v = flag_of(s, config[s.key]) end
      t[s.name] = type(v) == "number" and number_text(v) or v
    end
  end
  return recipe.argv_of(t)
end

-- ---- one agent, one run (a worker process) ----

local function path_of(out, kind, name, run)
  return ("%s/%s/%s_r%d.%s"):format(out, kind, name, run, kind == "ckpt" and "safetensors" or "csv")
end

-- The agent's tensors of a bandit checkpoint, their "agent." prefix taken off.
local function agent_tensors(tensors)
  local sub = {}
  for k, v in pairs(tensors) do
    local rest = k:match("^agent%.(.*)$")
    if rest then sub[rest] = v end
  end
  return sub
end

local function gen_state(g)
  local s, c = g:state()
  return { ("%d"):format(s), ("%d"):format(c) }
end

local function save_run(path, a, run, config, env, agent, curves)
  local st, tensors = agent:state()
  local all = {}
  for k, v in pairs(tensors) do all["agent." .. k] = v end
  local t = env.t
  for _, key in ipairs { "expected", "realised", "reward" } do
    if t > 0 then all["curve." .. key] = bbb.tensor(table.move(curves[key], 1, t, 1, {})) end
  end
  checkpoint.write(path, all, {
    kind = "bandit", agent = a.name, run = run, config = config, env = env:state(),
    env_generator = gen_state(env.generator), agent_state = st,
  })
end

-- Refuses to resume agent a's run from a checkpoint whose config differs
-- from this run's in a setting that binds it.
local function check_saved(path, a, saved, config)
  if saved.gemm ~= nil and saved.gemm ~= "openblas" then
    error(("%s was written with the products of --gemm %s, which bbb no longer has: start the run "
      .. "again without --resume"):format(path, tostring(saved.gemm)), 0)
  end
  for _, s in ipairs(options()) do
    local p = s.prop
    if p.config ~= false and p.resume ~= false and not (p.bbb_only and a.name ~= "bbb") then
      -- a setting a checkpoint does not hold (one from before it) was off
      local was, now = saved[s.key], config[s.key]
      if was == nil then was = false end
      was, now = flag_of(s, was), flag_of(s, now)
      local same
      if p.same then same = p.same(saved, config) else same = was == now end
      if not same then
        error(("%s was written with --%s %s, this run has %s"):format(path, dashed(s.name), show(was), show(now)), 0)
      end
    end
  end
end

-- The saved position, or nil when there is no checkpoint to resume.
local function load_run(path, a, run, config, env, agent, curves)
  local f = io.open(path, "rb")
  if not f then return nil end
  f:close()
  local tensors, meta = checkpoint.read(path)
  if meta.kind ~= "bandit" or meta.agent ~= a.name or math.tointeger(meta.run) ~= run then
    error(("%s is not a checkpoint of agent %s, run %d"):format(path, a.name, run), 0)
  end
  check_saved(path, a, meta.config, config)
  agent:set_state(meta.agent_state, agent_tensors(tensors))
  env:set_state(meta.env)
  env.generator:set_state(math.tointeger(tonumber(meta.env_generator[1])),
    math.tointeger(tonumber(meta.env_generator[2])))
  for _, key in ipairs { "expected", "realised", "reward" } do
    local c = tensors["curve." .. key]
    curves[key] = c and c:totable() or {}
  end
  return env.t
end

local function write_curve(path, curves, t)
  local tmp = path .. ".tmp"
  local f = assert(io.open(tmp, "w"))
  f:write("step,regret_expected,regret_realised,reward\n")
  for i = 1, t do
    f:write(("%d,%.17g,%.17g,%.17g\n"):format(i, curves.expected[i], curves.realised[i], curves.reward[i]))
  end
  assert(f:close())
  assert(os.rename(tmp, path))
end

-- Plays agent a's run `run` from its checkpoint (with --resume) or the
-- start, with a checkpoint every config.every steps and at the end, and
-- writes its curve.
local function play(config, data, args, a, run)
  bbb.set_num_threads(1)
  io.stdout:setvbuf("line")
  local env = bandit.Mushroom{ data = data, seed = config.seed + run }
  local agent = a.make(experiment.agent_opts(config, a.index, run, data.x:size(2)))
  local curves = { expected = {}, realised = {}, reward = {} }
  local ckpt = path_of(args.out, "ckpt", a.name, run)
  local start = 0
  if args.resume then
    local ok, t = pcall(load_run, ckpt, a, run, config, env, agent, curves)
    if not ok then fail("cannot resume: %s", t) end
    start = t or 0
    if t then print(("[%s r%d] resumed at step %d"):format(a.name, run, t)) end
  end
  local label = ("[%s r%d]"):format(a.name, run)
  local steps, every = config.steps, math.max(1, config.steps // 10)
  local t0 = bbb.core.clock()
  bandit.run(env, agent, math.max(0, steps - start), function(t, e)
    curves.expected[t], curves.realised[t], curves.reward[t] = e.regret_expected, e.regret_realised, e.reward
    if t % every == 0 or t == steps then
      local dt = bbb.core.clock() - t0
      local eta = dt / (t - start) * (steps - t)
      print(("%-12s step %6d/%d  regret %8.0f expected %8.0f realised  %6.1f s  eta %5.0f s")
        :format(label, t, steps, e.regret_expected, e.regret_realised, dt, eta))
    end
    if config.every > 0 and t % config.every == 0 and t < steps then save_run(ckpt, a, run, config, env, agent, curves) end
  end)
  if config.every > 0 then save_run(ckpt, a, run, config, env, agent, curves) end
  write_curve(path_of(args.out, "raw", a.name, run), curves, steps)
end

--- M.work(args): the worker process M.run starts (--worker NAME --run R):
-- plays that run, writing <out>/raw/NAME_rR.csv and its checkpoints.
function M.work(args)
  local config, _, data = setup(args)
  local a = BY_NAME[args.worker]
  if not a then fail("unknown agent '%s'", args.worker) end
  play(config, data, args, a, args.run or 0)
end

-- ---- the coordinator ----

-- Slowest first, so the long runs start at once.
local COST = { bbb = 1, eps5 = 2, eps1 = 3, eps0 = 4, linear = 5, uniform = 6, dropout = 2, neurallinear = 2 }

-- Every run of every agent, {name =, run =}, in the order to start them.
local function schedule(names, repeats)
  local runs = {}
  for run = 0, repeats - 1 do
    for _, name in ipairs(names) do runs[#runs + 1] = { name = name, run = run } end
  end
  table.sort(runs, function(x, y)
    if COST[x.name] ~= COST[y.name] then return COST[x.name] < COST[y.name] end
    return x.run < y.run
  end)
  return runs
end

-- Runs every worker, at most jobs at once, each started from its argument
-- vector (command, then its flags), never through a shell.
local function run_workers(args, config, runs, jobs, command)
  local tasks = {}
  for i, r in ipairs(runs) do
    local argv = table.move(command, 1, #command, 1, {})
    local flags = M.worker_args(args, config, r.name, r.run)
    tasks[i] = { argv = table.move(flags, 1, #flags, #argv + 1, argv) }
  end
  for i, r in ipairs(require("bbb.app.jobs").run(tasks, { jobs = jobs })) do
    if not r.ok then
      fail("worker %s run %d failed (%s %s; see above)", runs[i].name, runs[i].run, r.how, tostring(r.code))
    end
  end
end

-- A worker's curve: the expected and the realised regret of each step.
local function read_curve(path, steps)
  local fh = io.open(path)
  if not fh then fail("missing %s", path) end
  fh:read("l")
  local e, r = {}, {}
  for line in fh:lines() do
    local _, x, y = line:match("^(%d+),([^,]+),([^,]+)")
    e[#e + 1], r[#r + 1] = tonumber(x), tonumber(y)
  end
  fh:close()
  if #e ~= steps then fail("%s holds %d steps, expected %d", path, #e, steps) end
  return e, r
end

-- The result of M.run: each agent's curves over its runs.
local function mean_curves(names, config, out)
  local steps, repeats = config.steps, config.repeats
  local result = { names = names, steps = steps, repeats = repeats, out = out,
    expected = {}, realised = {}, lowest = {}, highest = {}, finals = {}, runs = {} }
  for _, name in ipairs(names) do
    local se, sr, fe, lo, hi, per_run = {}, {}, {}, {}, {}, {}
    for i = 1, steps do se[i], sr[i], lo[i], hi[i] = 0, 0, math.huge, -math.huge end
    for run = 0, repeats - 1 do
      local e, r = read_curve(path_of(out, "raw", name, run), steps)
      for i = 1, steps do
        se[i], sr[i], lo[i], hi[i] = se[i] + e[i], sr[i] + r[i], math.min(lo[i], e[i]), math.max(hi[i], e[i])
      end
      fe[#fe + 1] = e[steps]
      per_run[#per_run + 1] = { seed = config.seed + run, expected = e, realised = r[steps] }
    end
    for i = 1, steps do se[i], sr[i] = se[i] / repeats, sr[i] / repeats end
    result.expected[name], result.realised[name], result.finals[name] = se, sr, fe
    result.runs[name] = per_run
    result.lowest[name], result.highest[name] = lo, hi
  end
  return result
end

-- Writes the mean curves to <out>/bandit_curves.csv; -> its path.
local function write_curves(result)
  local csv = result.out .. "/bandit_curves.csv"
  local f = assert(io.open(csv, "w"))
  local cols = { "step" }
  for _, name in ipairs(result.names) do
    cols[#cols + 1] = name .. "_expected"
    cols[#cols + 1] = name .. "_realised"
  end
  f:write(table.concat(cols, ","), "\n")
  for i = 1, result.steps do
    local vals = { i }
    for _, name in ipairs(result.names) do
      vals[#vals + 1] = ("%.10g"):format(result.expected[name][i])
      vals[#vals + 1] = ("%.10g"):format(result.realised[name][i])
    end
    f:write(table.concat(vals, ","), "\n")
  end
  f:close()
  return csv
end

-- Writes each run's figures to <out>/bandit_runs.csv, a row per agent and
-- seed: the expected regret at 1,000 and 10,000 steps and at the end, the
-- realised regret at the end, and the late slope (expected regret per step
-- over the last fifth of the run: whether the agent still learns); -> its path.
local function write_runs(result)
  local steps = result.steps
  local late = steps - steps // 5
  local marks_at = {}
  for _, m in ipairs { 1000, 10000 } do if m < steps then marks_at[#marks_at + 1] = m end end
  marks_at[#marks_at + 1] = steps
  local cols = { "agent", "seed" }
  for _, m in ipairs(marks_at) do cols[#cols + 1] = ("regret_%d"):format(m) end
  cols[#cols + 1] = ("realised_%d"):format(steps)
  cols[#cols + 1] = ("slope_%d_%d"):format(late, steps)
  local csv = result.out .. "/bandit_runs.csv"
  local f = assert(io.open(csv, "w"))
  f:write(table.concat(cols, ","), "\n")
  for _, name in ipairs(result.names) do
    for _, run in ipairs(result.runs[name]) do
      local e, vals = run.expected, { name, run.seed }
      for _, m in ipairs(marks_at) do vals[#vals + 1] = ("%.10g"):format(e[m]) end
      vals[#vals + 1] = ("%.10g"):format(run.realised)
      vals[#vals + 1] = ("%.6g"):format(late > 0 and (e[steps] - e[late]) / (steps - late) or 0)
      f:write(table.concat(vals, ","), "\n")
    end
  end
  f:close()
  return csv
end

--- M.run(args [, {command =}]) -> result: plays every run of every agent in
-- worker processes (each started as command and its flags; by default this
-- script under this interpreter) and averages their curves: {names (the
-- agents, in the table's order), steps, repeats, out, expected = {[name] =
-- mean cumulative expected regret at each step}, realised (the same,
-- realised), lowest and highest (expected, over the runs), finals = {[name]
-- = each run's final expected regret}, runs = {[name] = {{seed =, expected
-- = its curve, realised = its final realised regret}, ...}}, wall (seconds
-- the workers took), csv (the file of the mean curves), runs_csv (a row per
-- agent and seed, write_runs).
function M.run(args, o)
  o = o or {}
  local config, names = setup(args)
  local jobs = args.jobs or require("bbb.app.sys").nproc()
  for _, sub in ipairs { "/raw", "/ckpt" } do
    local ok, err = require("bbb.app.sys").mkdir_p(args.out .. sub)
    if not ok then fail("--out: %s", err) end
  end
  local runs = schedule(names, config.repeats)
  print(("Mushroom bandit: %s; %d steps, %d updates of %d per step, buffer %d, %d repeat(s); "
    .. "%d worker(s) at once, 1 thread each"):format(table.concat(names, ", "), config.steps, config.updates,
    config.batch, config.buffer, config.repeats, math.min(jobs, #runs)))
  io.stdout:flush()
  local t0 = bbb.core.clock()
  run_workers(args, config, runs, jobs, o.command or require("bbb.app.sys").bbblua_argv(arg and arg[0] or "scripts/bandit.lua"))
  local wall = bbb.core.clock() - t0
  local result = mean_curves(names, config, args.out)
  result.wall = wall
  result.csv = write_curves(result)
  result.runs_csv = write_runs(result)
  return result
end

-- ---- the report ----

-- The table's steps: log-spaced, and the end.
local function marks(steps)
  local out, m = {}, 10
  while m < steps do
    out[#out + 1] = m
    m = (#out % 2 == 1) and m * 3 or m * 10 // 3
  end
  out[#out + 1] = steps
  return out
end

local function print_table(result)
  local names, steps, repeats = result.names, result.steps, result.repeats
  print(("\ncumulative expected regret (mean of %d run%s)"):format(repeats, repeats > 1 and "s" or ""))
  local head = { ("%8s"):format("step") }
  for _, name in ipairs(names) do head[#head + 1] = ("%18s"):format(BY_NAME[name].title) end
  print(table.concat(head))
  for _, s in ipairs(marks(steps)) do
    local row = { ("%8d"):format(s) }
    for _, name in ipairs(names) do row[#row + 1] = ("%18.0f"):format(result.expected[name][s]) end
    print(table.concat(row))
  end
  local row = { ("%8s"):format("realised") }
  for _, name in ipairs(names) do row[#row + 1] = ("%18.0f"):format(result.realised[name][steps]) end
  print(table.concat(row))
  if repeats > 1 then
    row = { ("%8s"):format("sd") }
    for _, name in ipairs(names) do
      local v, mu = 0, result.expected[name][steps]
      for _, x in ipairs(result.finals[name]) do v = v + (x - mu) ^ 2 end
      row[#row + 1] = ("%18.0f"):format(math.sqrt(v / (repeats - 1)))
    end
    print(table.concat(row))
  end
end

-- The agents by their final regret, and how that compares with figure 6.
local function print_ordering(result)
  local final = {}
  for _, name in ipairs(result.names) do final[name] = result.expected[name][result.steps] end
  local order = table.move(result.names, 1, #result.names, 1, {})
  table.sort(order, function(x, y) return final[x] < final[y] end)
  local titles = {}
  for i, name in ipairs(order) do titles[i] = BY_NAME[name].title end
  print("\nordering at the end (lowest regret first): " .. table.concat(titles, " < "))
  local paper = {}
  for _, name in ipairs(PAPER_AGENTS) do if final[name] then paper[#paper + 1] = name end end
  if #paper >= 2 and final.bbb then
    local lowest = true
    for _, name in ipairs(paper) do
      if name ~= "bbb" and final[name] <= final.bbb then lowest = false end
    end
    print(("paper (figure 6): Bayes by Backprop ends lowest of the BBB / epsilon-greedy agents; "
      .. "here: %s"):format(lowest and "yes" or "no"))
    if final.eps5 then
      print(("BBB / 5%% greedy regret ratio: %.3f (paper, 50,000 steps: at most 1/5)")
        :format(final.bbb / math.max(1, final.eps5)))
    end
  end
end

--- M.report(result) prints M.run's result: each agent's mean expected
-- regret at log-spaced steps, the realised regret and the spread over the
-- runs at the end, the ordering, the comparison with the paper's figure 6,
-- the wall time and where the curves are.
function M.report(result)
  print_table(result)
  print_ordering(result)
  print(("wall time %.1f s"):format(result.wall))
  print("curves: " .. result.csv)
  print("each run: " .. result.runs_csv)
end

local PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f" }

--- M.plot(result) draws <out>/bandit_regret.png (log y): each agent's mean
-- over the runs, and with several runs a band from their lowest to highest.
function M.plot(result)
  local steps, repeats = result.steps, result.repeats
  local series, bands, top = {}, {}, 1
  local stride = math.max(1, steps // 1000)
  for _, name in ipairs(result.names) do
    local mean, lo, hi = result.expected[name], result.lowest[name], result.highest[name]
    local xs, ys, bx, blo, bhi = {}, {}, {}, {}, {}
    for i = 1, steps do
      local v = mean[i]
      if v > 0 and (i % stride == 0 or i == steps) then
        xs[#xs + 1], ys[#ys + 1] = i, v
        if lo[i] > 0 then bx[#bx + 1], blo[#blo + 1], bhi[#bhi + 1] = i, lo[i], hi[i] end
      end
      if hi[i] > top then top = hi[i] end
    end
    local color = PALETTE[(BY_NAME[name].index - 1) % #PALETTE + 1]
    if #xs > 0 then series[#series + 1] = { x = xs, y = ys, title = BY_NAME[name].title, color = color } end
    if repeats > 1 and #bx > 1 then bands[#bands + 1] = { x = bx, lo = blo, hi = bhi, color = color, opacity = 0.2 } end
  end
  if #series == 0 then return end
  local file = require("bbb.app.plot").lines{
    file = result.out .. "/bandit_regret.png",
    title = ("Mushroom bandit, %d steps: mean of %d run%s%s"):format(steps, repeats,
      repeats > 1 and "s" or "", repeats > 1 and " (bands: lowest to highest run)" or ""),
    size = { 1000, 600 },
    xlabel = "step", ylabel = "cumulative expected regret", logy = true,
    yrange = { 1, top * 1.5 },
    series = series, bands = bands,
  }
  print("plot: " .. file)
end

--- M.load_agent(path, data) -> agent, meta: the agent a bandit run saved in
-- its checkpoint (<out>/ckpt/NAME_rRUN.safetensors), rebuilt with the run's
-- settings and its learned state; meta.agent is its name, meta.env.t the
-- steps it had played.
function M.load_agent(path, data)
  local tensors, meta = checkpoint.read(path)
  if meta.kind ~= "bandit" then error(("%s is not a bandit checkpoint (kind %s)"):format(path, tostring(meta.kind)), 0) end
  local a = BY_NAME[meta.agent]
  if not a then error(("%s: unknown agent '%s'"):format(path, tostring(meta.agent)), 0) end
  local config = M.saved_config(meta.config, path)
  local agent = a.make(experiment.agent_opts(config, a.index, math.tointeger(meta.run), data.x:size(2)))
  agent:set_state(meta.agent_state, agent_tensors(tensors))
  return agent, meta
end

return M

--- bbb.app.experiments.bandit: The Mushroom contextual bandit of Blundell et al. (2015, section 5.3,
-- figure 6): Bayes by Backprop with Thompson sampling against epsilon-greedy
-- MLPs (5%, 1%, 0%), a uniform agent, linear Thompson sampling, MC-dropout
-- Thompson sampling and NeuralLinear. The network agents' settings are the
-- ablation's (doc/bandit.md, bbb.app.experiments.bandit_agent.DEFAULTS); --paper-agent
-- gives the previous ones.
-- Every agent meets the same mushrooms and poison coins (common random
-- numbers); agents run in parallel worker processes, one thread each.
-- scripts/bandit.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"

local M = {}
local bandit = require "bbb.bandit"
local checkpoint = require "bbb.checkpoint"
local experiment = require "bbb.app.experiments.bandit_agent"
local D, P = experiment.DEFAULTS, experiment.PAPER_AGENT

local DEFAULT_STEPS = 10000
local PAPER_STEPS = 50000

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

-- The agent's tensors of a bandit checkpoint, their "agent." prefix taken off.
local function agent_tensors(tensors)
  local sub = {}
  for k, v in pairs(tensors) do
    local rest = k:match("^agent%.(.*)$")
    if rest then sub[rest] = v end
  end
  return sub
end

local INTEGER_SETTINGS = { updates = true, batch = true, buffer = true, seed = true, decide_samples = true,
  refit = true, repeats = true, steps = true, every = true, sigma_steps = true }

--- M.load_agent(path, data) -> agent, meta: the agent a bandit run saved in
-- its checkpoint (<out>/ckpt/NAME_rRUN.safetensors), rebuilt with the run's
-- settings and its learned state; meta.agent is its name, meta.env.t the
-- steps it had played.
function M.load_agent(path, data)
  local tensors, meta = checkpoint.read(path)
  if meta.kind ~= "bandit" then error(("%s is not a bandit checkpoint (kind %s)"):format(path, tostring(meta.kind)), 0) end
  local a = BY_NAME[meta.agent]
  if not a then error(("%s: unknown agent '%s'"):format(path, tostring(meta.agent)), 0) end
  local cfg = {}
  for k, v in pairs(meta.config) do
    cfg[k] = INTEGER_SETTINGS[k] and math.tointeger(v) or v
  end
  local agent = a.make(experiment.agent_opts(cfg, a.index, math.tointeger(meta.run), data.x:size(2)))
  agent:set_state(meta.agent_state, agent_tensors(tensors))
  return agent, meta
end

-- the settings that only BBB reads: --resume checks them for BBB alone
local BBB_ONLY = { sigma_final = true, sigma_steps = true, decide_samples = true, prior_sigma_in = true }

--- M.parser() -> the command line of the experiment.
function M.parser()
  local parser = recipe.parser("bandit.lua", "The Mushroom contextual bandit (Blundell et al. 2015, "
    .. "section 5.3): cumulative regret of Bayes by Backprop with Thompson sampling against "
    .. "epsilon-greedy MLPs, a uniform agent, linear and MC-dropout Thompson sampling and NeuralLinear. Regret is against "
    .. "the oracle that eats exactly the edible mushrooms; the table gives the expected regret "
    .. "(the poison coin averaged out) and, at the end, the realised one. Writes "
    .. "<out>/bandit_regret.png and <out>/bandit_curves.csv.",
    { defaults = { batch = "64", prior_sigma = false, rho_init = false, dropout = false } })
  parser:option("--agents", "Comma-separated agents: " .. KNOWN .. ".",
    "bbb,eps5,eps1,eps0,linear,uniform,dropout,neurallinear")
  parser:option("--steps", ("Steps per agent (default %d: the whole default run takes a few "
    .. "minutes on 2 cores)."):format(DEFAULT_STEPS)):convert(cli.positive_integer())
  parser:flag("--paper", ("The paper's protocol: %d steps, 5 seeds (64 updates of 64 per step are the "
    .. "defaults); explicit --repeats wins."):format(PAPER_STEPS))
  parser:flag("--paper-agent", "The network agents' settings before the ablation (doc/bandit.md): buffer "
    .. "4096, KL / buffer size, likelihood noise 1 (fixed), N(0, 0.1^2) prior, rho -3, one weight sample per decision; explicit flags win.")
  parser:option("--updates", "Minibatch updates after each step.", "64"):convert(cli.positive_integer())
  recipe.declare(parser, { "batch" })
  parser:option("--buffer", ("Replay buffer: the last N transitions (default %d)."):format(D.buffer))
    :convert(cli.positive_integer())
  recipe.declare(parser, { "lr" })
  parser:option("--sigma", ("Noise sigma of the Gaussian likelihood (default %g)."):format(D.sigma))
    :convert(cli.positive_number())
  parser:option("--sigma-final", ("BBB: the noise grows geometrically from --sigma to this over the first "
    .. "--sigma-steps transitions (default %g; --sigma-final equal to --sigma keeps it fixed)."):format(D.sigma_final))
    :convert(cli.positive_number())
  parser:option("--sigma-steps", ("BBB: transitions over which the noise grows (default %d)."):format(D.sigma_steps))
    :convert(cli.positive_integer())
  parser:flag("--learn-sigma", "Learn the likelihood's noise sigma (starting from --sigma).")
  parser:option("--noise-model", ("The likelihood's noise: fixed (one sigma for every reward) or hetero (the "
    .. "network's second output, sigma = --sigma + softplus(it), learned for each mushroom and action); default %s.")
    :format(D.hetero and "hetero" or "fixed")):convert(cli.choice{ "fixed", "hetero" })
  recipe.declare(parser, { "prior_sigma" })
  parser:option("--prior-sigma-in", "BBB: the input layer's prior N(0, S^2) instead of --prior-sigma's"
    .. (D.prior_sigma_in and (" (default %g)"):format(D.prior_sigma_in) or "") .. "; 0 gives it --prior-sigma's.")
    :convert(cli.nonnegative_number())
  parser:option("--prior-mix", "The scale-mixture prior PI,SIGMA1,SIGMA2 instead of the Gaussian one.")
  recipe.declare(parser, { "rho_init" })
  parser:option("--kl", ("The complexity term's divisor N: size (rows in the buffer), capacity, seen "
    .. "(every transition so far) or blundell (the paper's minibatch weighting); default %s."):format(D.kl))
    :convert(cli.choice{ "size", "capacity", "seen", "blundell" })
  parser:option("--decide-samples", ("BBB's weight samples averaged per decision (default %d)."):format(D.decide_samples))
    :convert(cli.positive_integer())
  recipe.declare(parser, { "dropout" })
  parser:option("--refit", ("NeuralLinear: steps between refits of its regression (default %d)."):format(D.refit))
    :convert(cli.positive_integer())
  recipe.declare(parser, { "seed" })
  parser:option("--repeats", "Runs per agent (seeds seed, seed+1, ...); curves are averaged (default 1; 5 with --paper).")
    :convert(cli.positive_integer())
  parser:option("--jobs", "Worker processes at once (default: the number of cores)."):convert(cli.positive_integer())
  parser:option("--out", "Output directory.", "out/bandit"):convert(cli.output_dir())
  parser:option("--data", "The Mushroom .rda file (default: data/mushroom/Mushroom.rda).")
  parser:option("--checkpoint-every", "Steps between checkpoints of each run (0: none).", "500"):convert(cli.nonnegative_integer())
  parser:flag("--resume", "Continue each run from its checkpoint in <out>/ckpt/ when there is one.")
  parser:flag("--no-plot", "Skip the PNG.")
  parser:option("--worker", "(internal) run one agent and write its curve."):hidden(true)
  parser:option("--run", "(internal) the repeat index of --worker."):hidden(true):convert(cli.nonnegative_integer())
  return parser
end

--- M.parse([argv]) -> args: the command line, checked.
function M.parse(argv)
  return (recipe.parse(M.parser(), argv))
end

--- M.run(args)
function M.run(args)
  local function fail(msg, ...)
    io.stderr:write("bandit.lua: ", msg:format(...), "\n")
    os.exit(2)
  end

  -- Every check happens here, before any work starts. Explicit flags win over
  -- --paper-agent, which wins over the defaults.
  local preset = args.paper_agent and P or D
  if args.noise_model == nil then args.noise_model = preset.hetero and "hetero" or "fixed" end
  for _, k in ipairs { "buffer", "sigma", "prior_sigma", "prior_sigma_in", "rho_init", "kl", "decide_samples",
                       "dropout", "refit", "sigma_final", "sigma_steps" } do
    if args[k] == nil then args[k] = preset[k] end
  end
  if args.prior_sigma_in == 0 then args.prior_sigma_in = false end
  args.repeats = args.repeats or (args.paper and 5 or 1)
  local prior_mix = false
  if args.prior_mix then
    local m = {}
    for w in args.prior_mix:gmatch("[^,]+") do m[#m + 1] = tonumber(w) end
    if #m ~= 3 or not (m[1] and m[2] and m[3]) or not (m[1] > 0 and m[1] < 1 and m[2] > 0 and m[3] > 0)
        or m[2] == math.huge or m[3] == math.huge then
      fail("--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1 and both sigmas finite and > 0, got '%s'", args.prior_mix)
    end
    prior_mix = m
  end
  local cfg = {
    steps = args.paper and PAPER_STEPS or args.steps or DEFAULT_STEPS,
    updates = args.updates, batch = args.batch, buffer = args.buffer, lr = args.lr, sigma = args.sigma,
    seed = args.seed, repeats = args.repeats, every = args.checkpoint_every, rho_init = args.rho_init,
    prior_sigma = args.prior_sigma, prior_sigma_in = args.prior_sigma_in, kl = args.kl, learn_sigma = args.learn_sigma or false,
    decide_samples = args.decide_samples, prior_mix = prior_mix, dropout = args.dropout, refit = args.refit,
    hetero = args.noise_model == "hetero", sigma_final = args.sigma_final or false, sigma_steps = args.sigma_steps,
  }
  if cfg.hetero and cfg.learn_sigma then
    fail("--learn-sigma learns one noise for every reward; --noise-model hetero learns it per mushroom and action: give one")
  end
  -- the settings above that the workers need besides the ones the coordinator passes on
  local worker_args = { "--kl", cfg.kl, "--decide-samples", cfg.decide_samples, "--dropout", cfg.dropout,
    "--refit", cfg.refit, "--noise-model", args.noise_model }
  if prior_mix then worker_args[#worker_args + 1] = "--prior-mix"; worker_args[#worker_args + 1] = args.prior_mix end
  if cfg.learn_sigma then worker_args[#worker_args + 1] = "--learn-sigma" end
  worker_args[#worker_args + 1] = "--prior-sigma-in"
  worker_args[#worker_args + 1] = cfg.prior_sigma_in or 0
  if cfg.sigma_final then
    for _, w in ipairs { "--sigma-final", cfg.sigma_final, "--sigma-steps", cfg.sigma_steps } do
      worker_args[#worker_args + 1] = w
    end
  end
  if args.paper and args.steps then fail("--paper sets the steps; give --paper or --steps, not both") end
  if cfg.buffer < cfg.batch then
    fail("--buffer (%d) must hold at least one minibatch (--batch %d)", cfg.buffer, cfg.batch)
  end
  local names = {}
  for name in args.agents:gmatch("[^,%s]+") do
    if not BY_NAME[name] then
      fail("unknown agent '%s' (known: %s)", name, KNOWN)
    end
    names[#names + 1] = name
  end
  if #names == 0 then fail("--agents names no agent") end
  table.sort(names, function(a, b) return BY_NAME[a].index < BY_NAME[b].index end)

  local ok_data, data = pcall(bbb.data.load_mushroom, { path = args.data })
  if not ok_data then fail("%s", (tostring(data):gsub("^[^:]*:%d+: ", ""))) end

  local out = args.out
  local function path_of(kind, name, run)
    return ("%s/%s/%s_r%d.%s"):format(out, kind, name, run, kind == "ckpt" and "safetensors" or "csv")
  end

  -- ---- one agent, one run (a worker process) ----

  local function agent_opts(a, run) return experiment.agent_opts(cfg, a.index, run, data.x:size(2)) end

  local function gen_state(g)
    local s, c = g:state()
    return { ("%d"):format(s), ("%d"):format(c) }
  end

  local function save_run(path, a, run, env, agent, curves)
    local st, tensors = agent:state()
    local all = {}
    for k, v in pairs(tensors) do all["agent." .. k] = v end
    local t = env.t
    for _, key in ipairs { "expected", "realised", "reward" } do
      if t > 0 then all["curve." .. key] = bbb.tensor(table.move(curves[key], 1, t, 1, {})) end
    end
    checkpoint.write(path, all, {
      kind = "bandit", agent = a.name, run = run, config = cfg, env = env:state(),
      env_generator = gen_state(env.generator), agent_state = st,
    })
  end

  -- The saved position, or nil when there is no checkpoint to resume.
  local function load_run(path, a, run, env, agent, curves)
    local f = io.open(path, "rb")
    if not f then return nil end
    f:close()
    local tensors, meta = checkpoint.read(path)
    if meta.kind ~= "bandit" or meta.agent ~= a.name or math.tointeger(meta.run) ~= run then
      error(("%s is not a checkpoint of agent %s, run %d"):format(path, a.name, run), 0)
    end
    if meta.config.gemm ~= nil and meta.config.gemm ~= "openblas" then
      error(("%s was written with the products of --gemm %s, which bbb no longer has: start the run "
        .. "again without --resume"):format(path, tostring(meta.config.gemm)), 0)
    end
    for _, k in ipairs { "updates", "batch", "buffer", "lr", "sigma", "rho_init", "prior_sigma", "seed", "kl",
                         "learn_sigma", "decide_samples", "prior_mix", "dropout", "refit", "hetero", "sigma_final", "sigma_steps",
                         "prior_sigma_in" } do
      local saved, now = meta.config[k], cfg[k]
      -- the input layer's own prior is BBB's alone; none (a checkpoint from
      -- before it, or 0) is --prior-sigma's
      if k == "prior_sigma_in" then saved, now = saved or 0, now or 0 end
      local same = saved == now
      -- the growing noise (a checkpoint from before it has none): its steps
      -- matter only when it grows
      if k == "sigma_final" or k == "sigma_steps" then
        local m = meta.config
        same = (not m.sigma_final and not cfg.sigma_final)
          or (m.sigma_final == cfg.sigma_final and m.sigma_steps == cfg.sigma_steps)
      end
      -- settings that only BBB reads do not bind the other agents
      if BBB_ONLY[k] and a.name ~= "bbb" then same = true end
      -- a checkpoint from before --noise-model has no hetero: it was fixed
      if k == "hetero" then same = (meta.config[k] or false) == cfg[k] end
      if type(cfg[k]) == "table" and type(meta.config[k]) == "table" then
        same = table.concat(cfg[k], ",") == table.concat(meta.config[k], ",")
      end
      if not same and k == "hetero" then
        error(("%s was written with --noise-model %s, this run has %s"):format(path,
          meta.config[k] and "hetero" or "fixed", cfg[k] and "hetero" or "fixed"), 0)
      elseif not same then
        local function show(v) return math.type(v) == "float" and ("%g"):format(v) or tostring(v) end
        error(("%s was written with --%s %s, this run has %s"):format(path, k:gsub("_", "-"), show(saved),
          show(now)), 0)
      end
    end
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

  local function worker(name, run)
    bbb.set_num_threads(1)
    io.stdout:setvbuf("line")
    local a = BY_NAME[name]
    local env = bandit.Mushroom{ data = data, seed = cfg.seed + run }
    local agent = a.make(agent_opts(a, run))
    local curves = { expected = {}, realised = {}, reward = {} }
    local ckpt = path_of("ckpt", name, run)
    local start = 0
    if args.resume then
      local ok, t = pcall(load_run, ckpt, a, run, env, agent, curves)
      if not ok then fail("cannot resume: %s", t) end
      start = t or 0
      if t then print(("[%s r%d] resumed at step %d"):format(name, run, t)) end
    end
    local label = ("[%s r%d]"):format(name, run)
    local every = math.max(1, cfg.steps // 10)
    local t0 = bbb.core.clock()
    bandit.run(env, agent, math.max(0, cfg.steps - start), function(t, e)
      curves.expected[t], curves.realised[t], curves.reward[t] = e.regret_expected, e.regret_realised, e.reward
      if t % every == 0 or t == cfg.steps then
        local dt = bbb.core.clock() - t0
        local eta = dt / (t - start) * (cfg.steps - t)
        print(("%-12s step %6d/%d  regret %8.0f expected %8.0f realised  %6.1f s  eta %5.0f s")
          :format(label, t, cfg.steps, e.regret_expected, e.regret_realised, dt, eta))
      end
      if cfg.every > 0 and t % cfg.every == 0 and t < cfg.steps then save_run(ckpt, a, run, env, agent, curves) end
    end)
    if cfg.every > 0 then save_run(ckpt, a, run, env, agent, curves) end
    write_curve(path_of("raw", name, run), curves, cfg.steps)
  end

  if args.worker then
    if not BY_NAME[args.worker] then fail("unknown agent '%s'", args.worker) end
    worker(args.worker, args.run or 0)
    os.exit(0)
  end

  -- ---- the coordinator ----

  local jobs = args.jobs or bbb.sys.nproc()
  for _, sub in ipairs { "/raw", "/ckpt" } do
    local ok, err = bbb.sys.mkdir_p(out .. sub)
    if not ok then fail("--out: %s", err) end
  end

  -- Slowest first, so the long runs start at once.
  local COST = { bbb = 1, eps5 = 2, eps1 = 3, eps0 = 4, linear = 5, uniform = 6, dropout = 2, neurallinear = 2 }
  local runs = {}
  for run = 0, cfg.repeats - 1 do
    for _, name in ipairs(names) do runs[#runs + 1] = { name = name, run = run } end
  end
  table.sort(runs, function(x, y)
    if COST[x.name] ~= COST[y.name] then return COST[x.name] < COST[y.name] end
    return x.run < y.run
  end)

  local base = bbb.sys.bbblua_argv(arg[0], "--steps", cfg.steps, "--updates", cfg.updates, "--batch", cfg.batch,
    "--buffer", cfg.buffer, "--lr", args.lr, "--sigma", args.sigma, "--rho-init", args.rho_init, "--prior-sigma", args.prior_sigma, "--seed", cfg.seed,
    "--out", out, "--checkpoint-every", cfg.every)
  for _, w in ipairs(worker_args) do base[#base + 1] = w end
  if args.data then base[#base + 1] = "--data"; base[#base + 1] = args.data end
  if args.resume then base[#base + 1] = "--resume" end
  -- the settings a worker is not given fall back as the coordinator's did
  if args.paper_agent then base[#base + 1] = "--paper-agent" end
  -- Each worker is started from its argument vector, never through a shell.
  local argvs = {}
  for i, r in ipairs(runs) do
    local argv = table.move(base, 1, #base, 1, {})
    for _, w in ipairs { "--worker", r.name, "--run", tostring(r.run) } do argv[#argv + 1] = w end
    argvs[i] = argv
  end

  print(("Mushroom bandit: %s; %d steps, %d updates of %d per step, buffer %d, %d repeat(s); "
    .. "%d worker(s) at once, 1 thread each"):format(table.concat(names, ", "), cfg.steps, cfg.updates,
    cfg.batch, cfg.buffer, cfg.repeats, math.min(jobs, #runs)))
  io.stdout:flush()
  local t0 = bbb.core.clock()
  for i, r in ipairs(bbb.sys.run_all(argvs, jobs, { stdin = "/dev/null" })) do
    if not r.ok then
      fail("worker %s run %d failed (%s %s; see above)", runs[i].name, runs[i].run, r.how, tostring(r.code))
    end
  end
  local wall = bbb.core.clock() - t0

  -- Mean curves over the repeats.
  local function read_curve(path)
    local fh = io.open(path)
    if not fh then fail("missing %s", path) end
    fh:read("l")
    local e, r = {}, {}
    for line in fh:lines() do
      local _, x, y = line:match("^(%d+),([^,]+),([^,]+)")
      e[#e + 1], r[#r + 1] = tonumber(x), tonumber(y)
    end
    fh:close()
    if #e ~= cfg.steps then fail("%s holds %d steps, expected %d", path, #e, cfg.steps) end
    return e, r
  end

  local mean_e, mean_r, finals, lo_e, hi_e = {}, {}, {}, {}, {}
  for _, name in ipairs(names) do
    local se, sr, fe, lo, hi = {}, {}, {}, {}, {}
    for i = 1, cfg.steps do se[i], sr[i], lo[i], hi[i] = 0, 0, math.huge, -math.huge end
    for run = 0, cfg.repeats - 1 do
      local e, r = read_curve(path_of("raw", name, run))
      for i = 1, cfg.steps do
        se[i], sr[i], lo[i], hi[i] = se[i] + e[i], sr[i] + r[i], math.min(lo[i], e[i]), math.max(hi[i], e[i])
      end
      fe[#fe + 1] = e[cfg.steps]
    end
    lo_e[name], hi_e[name] = lo, hi
    for i = 1, cfg.steps do se[i], sr[i] = se[i] / cfg.repeats, sr[i] / cfg.repeats end
    mean_e[name], mean_r[name], finals[name] = se, sr, fe
  end

  -- The table: log-spaced steps and the end.
  local marks, m = {}, 10
  while m < cfg.steps do
    marks[#marks + 1] = m
    m = (#marks % 2 == 1) and m * 3 or m * 10 // 3
  end
  marks[#marks + 1] = cfg.steps
  print(("\ncumulative expected regret (mean of %d run%s)"):format(cfg.repeats, cfg.repeats > 1 and "s" or ""))
  local head = { ("%8s"):format("step") }
  for _, name in ipairs(names) do head[#head + 1] = ("%18s"):format(BY_NAME[name].title) end
  print(table.concat(head))
  for _, s in ipairs(marks) do
    local row = { ("%8d"):format(s) }
    for _, name in ipairs(names) do row[#row + 1] = ("%18.0f"):format(mean_e[name][s]) end
    print(table.concat(row))
  end
  local row = { ("%8s"):format("realised") }
  for _, name in ipairs(names) do row[#row + 1] = ("%18.0f"):format(mean_r[name][cfg.steps]) end
  print(table.concat(row))
  if cfg.repeats > 1 then
    row = { ("%8s"):format("sd") }
    for _, name in ipairs(names) do
      local v, mu = 0, mean_e[name][cfg.steps]
      for _, x in ipairs(finals[name]) do v = v + (x - mu) ^ 2 end
      row[#row + 1] = ("%18.0f"):format(math.sqrt(v / (cfg.repeats - 1)))
    end
    print(table.concat(row))
  end

  local order = table.move(names, 1, #names, 1, {})
  table.sort(order, function(x, y) return mean_e[x][cfg.steps] < mean_e[y][cfg.steps] end)
  local titles = {}
  for i, name in ipairs(order) do titles[i] = BY_NAME[name].title end
  print("\nordering at the end (lowest regret first): " .. table.concat(titles, " < "))
  local paper = {}
  for _, name in ipairs(PAPER_AGENTS) do if mean_e[name] then paper[#paper + 1] = name end end
  if #paper >= 2 and mean_e.bbb then
    local lowest = true
    for _, name in ipairs(paper) do
      if name ~= "bbb" and mean_e[name][cfg.steps] <= mean_e.bbb[cfg.steps] then lowest = false end
    end
    print(("paper (figure 6): Bayes by Backprop ends lowest of the BBB / epsilon-greedy agents; "
      .. "here: %s"):format(lowest and "yes" or "no"))
    if mean_e.eps5 then
      print(("BBB / 5%% greedy regret ratio: %.3f (paper, 50,000 steps: at most 1/5)")
        :format(mean_e.bbb[cfg.steps] / math.max(1, mean_e.eps5[cfg.steps])))
    end
  end
  print(("wall time %.1f s"):format(wall))

  -- The raw curves and the plot.
  local csv = out .. "/bandit_curves.csv"
  f = assert(io.open(csv, "w"))
  local cols = { "step" }
  for _, name in ipairs(names) do
    cols[#cols + 1] = name .. "_expected"
    cols[#cols + 1] = name .. "_realised"
  end
  f:write(table.concat(cols, ","), "\n")
  for i = 1, cfg.steps do
    local vals = { i }
    for _, name in ipairs(names) do
      vals[#vals + 1] = ("%.10g"):format(mean_e[name][i])
      vals[#vals + 1] = ("%.10g"):format(mean_r[name][i])
    end
    f:write(table.concat(vals, ","), "\n")
  end
  f:close()
  print("curves: " .. csv)

  if not args.no_plot then
    -- each agent's mean over the runs, and with several runs a band from their lowest to highest
    local series, bands, top = {}, {}, 1
    local stride = math.max(1, cfg.steps // 1000)
    local PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f" }
    for _, name in ipairs(names) do
      local xs, ys, bx, blo, bhi = {}, {}, {}, {}, {}
      for i = 1, cfg.steps do
        local v = mean_e[name][i]
        if v > 0 and (i % stride == 0 or i == cfg.steps) then
          xs[#xs + 1], ys[#ys + 1] = i, v
          if lo_e[name][i] > 0 then bx[#bx + 1], blo[#blo + 1], bhi[#bhi + 1] = i, lo_e[name][i], hi_e[name][i] end
        end
        if hi_e[name][i] > top then top = hi_e[name][i] end
      end
      local color = PALETTE[(BY_NAME[name].index - 1) % #PALETTE + 1]
      if #xs > 0 then series[#series + 1] = { x = xs, y = ys, title = BY_NAME[name].title, color = color } end
      if cfg.repeats > 1 and #bx > 1 then bands[#bands + 1] = { x = bx, lo = blo, hi = bhi, color = color, opacity = 0.2 } end
    end
    if #series > 0 then
      local file = bbb.plot.lines{
        file = out .. "/bandit_regret.png",
        title = ("Mushroom bandit, %d steps: mean of %d run%s%s"):format(cfg.steps, cfg.repeats,
          cfg.repeats > 1 and "s" or "", cfg.repeats > 1 and " (bands: lowest to highest run)" or ""),
        size = { 1000, 600 },
        xlabel = "step", ylabel = "cumulative expected regret", logy = true,
        yrange = { 1, top * 1.5 },
        series = series, bands = bands,
      }
      print("plot: " .. file)
    end
  end
end

return M

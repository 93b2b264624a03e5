--- bbb.app.experiments.grid: Hyperparameter grid search on a validation split (Blundell et al. 2015,
-- section 5.1; seed 002's grid by default): every configuration is a run of
-- scripts/mnist.lua (the shared training loop) in its own process with one
-- thread. Each finished configuration is appended to the results file as
-- one JSON line at once; rerunning the same command skips those, so a killed
-- grid resumes where it stopped. Under mpirun the configurations are spread
-- over the ranks: rank 0 hands them out one at a time (a rank that finishes
-- takes the next) and alone writes the results file.
--   mpirun -np 8 bbblua scripts/grid.lua
--
-- A configuration's run is a job: its mnist.lua config (grid.mnist_config)
-- and the flags after --, started by one job runner whatever schedules it
-- (local processes, the MPI work queue, successive halving).
--
--   local r = grid.run(grid.parse(argv))   -- {ranked, results, budget, grid, ...}
--   grid.report(r)
--   if r.args.final then grid.final(r) end
--
-- scripts/grid.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local json = require "bbb.json"

local grid = {}
local sys = require "bbb.app.sys"
local jobs = require "bbb.app.jobs"
local cores = sys.nproc

-- A log sigma axis sets mnist.lua's sigma.
local function sigma_of(log_sigma) return math.exp(-log_sigma) end

-- The axes in a fixed order: name in the results (the flag with dashes),
-- converter of one value, default list, help, and the mnist.lua flag it sets
-- when that is not its name (value: the flag's value from the axis value).
local AXES = {
  { name = "lr", convert = cli.positive_number(), default = "1e-3,1e-4,1e-5", help = "learning rates" },
  { name = "pi", convert = cli.probability(), default = "0.25,0.5,0.75",
    help = "mixture weights pi of the wide component" },
  { name = "log_sigma1", convert = cli.number(), default = "0,1,2", help = "-log sigma1 (wide component)",
    flag = "sigma1", value = sigma_of },
  { name = "log_sigma2", convert = cli.number(), default = "6,7,8", help = "-log sigma2 (narrow component)",
    flag = "sigma2", value = sigma_of },
  { name = "samples", convert = cli.positive_integer { max = 1000 }, default = "1,2,3,5",
    help = "MC samples per minibatch" },
  { name = "kl_weight", convert = cli.choice_or_number({ "uniform", "blundell" }, { min = 0 }), default = "uniform",
    help = "KL weightings: uniform (1/M), blundell (2^(M-i)/(2^M-1)) or numbers" },
  { name = "optim", convert = cli.choice { "adam", "sgd", "rmsprop" }, default = "adam",
    help = "optimizers: adam, sgd, rmsprop" },
}

-- The grid's own settings (shared flags), in this order: every run gets
-- them, and they are part of the grid's identity.
local FIXED = { "epochs", "val", "hidden", "limit", "seed" }
-- The mnist.lua flags each run gets from the grid besides the axes and FIXED.
local PER_RUN = { "threads", "summary" }

-- The selection metrics of --select.
grid.SELECT = { "val-error", "val-error-min" }
-- The training images of MNIST and Fashion-MNIST, which --val splits.
local TRAIN_IMAGES = 60000

local function num(v) return type(v) == "number" and ("%.17g"):format(v) or tostring(v) end
local function short(v) return type(v) == "number" and ("%g"):format(v) or tostring(v) end

local fnv1a = bbb.core.sys.fnv1a

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

--- grid.best_val_epoch(epochs) -> the epoch record with the lowest
-- validation error (the first one on a tie), or nil when none has one.
function grid.best_val_epoch(epochs)
  local at
  for _, e in ipairs(epochs) do if e.val_acc and (not at or e.val_acc > at.val_acc) then at = e end end
  return at
end

--- grid.parser() -> the command line of the experiment.
function grid.parser()
  local parser = recipe.parser("grid.lua", "Grid search of Bayes-by-Backprop hyperparameters on MNIST with a "
    .. "validation split; each configuration is trained by scripts/mnist.lua in its own process.", { defaults = { epochs = "3", val = "10000" }, outputs = { "results" } })
    :epilog("Axes take comma-separated values; the grid is their product. Flags after -- go to "
      .. "every mnist.lua run (e.g. -- --preset adam-400 --lr-decay 1) and are part of the grid's "
      .. "identity. The results file holds one JSON line per finished configuration; a file "
      .. "written by a different grid is refused.")
  for _, a in ipairs(AXES) do
    flags.axis(parser, a.name, "Axis: " .. a.help .. ".", a.default):convert(cli.list(a.convert, { drop_repeats = true }))
  end
  recipe.declare(parser, FIXED)
  recipe.declare(parser, { "jobs" })
  flags.option(parser, "--results", "The results file (JSON lines).", "out/grid.jsonl")
    :convert(cli.output_path { ext = { "jsonl" } })
  flags.option(parser, "--top", "Configurations shown in the ranking.", "10"):convert(cli.positive_integer())
  flags.option(parser, "--halving", "Successive halving: train every configuration for --min-epochs, keep the "
    .. "best 1/ETA on the validation error, train those ETA times longer (resuming their checkpoints), "
    .. "and so on up to --epochs.")
    :convert(cli.integer { min = 2, max = 100 })
  flags.option(parser, "--min-epochs", "Epochs of the first rung of --halving.", "1"):convert(cli.positive_integer())
  recipe.declare(parser, { "select", "no_test" })
  flags.flag(parser, "--final", "Retrain the best configuration on all 60,000 images and test it.")
  flags.option(parser, "--final-epochs", "Epochs of the --final run (default: --epochs).")
    :convert(cli.positive_integer { max = 100000 })
  flags.option(parser, "--final-threads", "Threads of the --final run (default: the cores).")
    :convert(cli.threads())
  parser:argument("mnist_flags", "Flags for every scripts/mnist.lua run, after --."):args("*")
  return parser
end

-- The mnist.lua settings the grid gives every run itself: a flag after --
-- naming one would run every configuration with it while the results name
-- the grid's value.
local function set_by_grid()
  local own = {}
  for _, k in ipairs(FIXED) do own[k] = true end
  for _, k in ipairs(PER_RUN) do own[k] = true end
  for _, a in ipairs(AXES) do own[a.name], own[a.flag or a.name] = true, true end
  return own
end

-- The axes a net without Bayesian layers has no use for.
local BAYES_AXES = { "pi", "log_sigma1", "log_sigma2", "kl_weight" }

-- The --model the flags after -- give the runs (mnist.lua's default: bbb).
local function model_of(words)
  local model = "bbb"
  for i, w in ipairs(words) do
    local v = w:match("^%-%-model=(.*)$") or (w == "--model" and words[i + 1])
    if v then model = v end
  end
  return model
end

-- The first flag given that cannot act in the grid args describes, and
-- why; nil when each can.
local function idle_flag(args, given)
  if given.min_epochs and not args.halving then
    return "--min-epochs cannot act in this run: it sets the first rung of --halving, which is not given"
  end
  for _, k in ipairs { "final_epochs", "final_threads" } do
    if given[k] and not args.final then
      return ("--%s cannot act in this run: it sets the --final run, which is not asked for"):format(k:gsub("_", "-"))
    end
  end
  local model = model_of(args.mnist_flags)
  -- a plain net draws nothing: more samples per minibatch repeat one forward pass
  local idle = { samples = model == "mlp" or model == "cnn-plain" }
  if model ~= "bbb" and model ~= "cnn" then
    for _, k in ipairs(BAYES_AXES) do idle[k] = true end
  end
  for _, a in ipairs(AXES) do
    local n = #args[a.name]
    if idle[a.name] and n > 1 then
      return ("--%s cannot act in this run: --model %s (after --) %s, so its %d values would train the same net "
        .. "%d times: give one value"):format(a.name:gsub("_", "-"), model, a.name == "samples" and "draws no noise"
        or "has no Bayesian layers", n, n)
    end
  end
end

--- grid.parse([argv]) -> args: the command line, checked: a flag that
-- cannot act in the grid (--min-epochs without --halving, an axis of
-- several values the runs' --model has no use for) and a flag after --
-- that mnist.lua would refuse are refused here, before any run.
function grid.parse(argv)
  argv = argv or arg
  local parser = grid.parser()
  local args, given = recipe.parse(parser, argv)
  local why = idle_flag(args, given)
  if why then parser:error(why) end
  args.jobs = args.jobs or cores()
  local train_n = math.min(args.limit or TRAIN_IMAGES, TRAIN_IMAGES)
  if args.val and args.val >= train_n then
    parser:error(("--val %d leaves no training images: the training set has %d%s"):format(args.val, train_n,
      args.limit and " (--limit)" or ""))
  end
  local own = set_by_grid()
  for _, w in ipairs(args.mnist_flags) do
    local name = w:match("^%-%-([%w-]+)")
    local key = name and name:gsub("-", "_")
    if key and own[key] then
      parser:error(("--%s after -- is set by the grid itself (an axis or a grid flag): give it before --"):format(name))
    end
  end
  -- the runs' flags checked now as mnist.lua checks them (once per
  -- optimizer, the one axis its checks depend on): a flag after -- that the
  -- runs cannot take stops the grid before its first run
  local mnist, seen = require "bbb.app.experiments.mnist", {}
  for _, c in ipairs(grid.configurations(args)) do
    if not seen[c.optim] then
      seen[c.optim] = true
      local flags = recipe.argv_of(grid.mnist_config(args, c))
      mnist.parse(table.move(args.mnist_flags, 1, #args.mnist_flags, #flags + 1, flags))
    end
  end
  return args
end

--- grid.identity(args) -> id, text: the grid's canonical description and
-- its hash, which every result line carries; a results file whose lines
-- carry another id belongs to another grid.
function grid.identity(args)
  local describe = {}
  for _, a in ipairs(AXES) do
    local vs = {}
    for i, v in ipairs(args[a.name]) do vs[i] = num(v) end
    describe[#describe + 1] = a.name .. "=" .. table.concat(vs, ",")
  end
  for _, k in ipairs(FIXED) do describe[#describe + 1] = k .. "=" .. tostring(args[k]) end
  describe[#describe + 1] = "mnist=" .. table.concat(args.mnist_flags, " ")
  if args.halving then describe[#describe + 1] = ("halving=%d min_epochs=%d"):format(args.halving, args.min_epochs) end
  -- (the default metric adds nothing, so the grids run before --select keep their identity)
  if args.select ~= "val-error" then describe[#describe + 1] = "select=" .. args.select end
  if args.no_test then describe[#describe + 1] = "no_test" end
  local text = table.concat(describe, " ")
  return fnv1a(text), text
end

--- grid.configurations(args) -> the product of the axes, the first axis
-- slowest: each a table of axis values with its key ("lr=0.001 pi=0.5 ...").
function grid.configurations(args)
  local configs, cur = {}, {}
  local function product(i)
    if i > #AXES then
      local c, parts = {}, {}
      for k, a in ipairs(AXES) do
        c[a.name] = cur[k]
        parts[#parts + 1] = a.name .. "=" .. short(cur[k])
      end
      c.key = table.concat(parts, " ")
      configs[#configs + 1] = c
      return
    end
    for _, v in ipairs(args[AXES[i].name]) do
      cur[i] = v
      product(i + 1)
    end
    cur[i] = nil
  end
  product(1)
  return configs
end

--- grid.mnist_config(args, c [, run]) -> the mnist.lua config of
-- configuration c as a table of flags: its axis values (log sigmas as
-- sigmas), the grid's fixed settings, --no-test when the grid has it and one
-- thread, with run's settings (epochs, val, no_test, threads, summary,
-- checkpoint; false drops one) over them.
-- The flags after -- (args.mnist_flags) go with it as given.
function grid.mnist_config(args, c, run)
  local t = { threads = 1, no_test = args.no_test or nil }
  for _, k in ipairs(FIXED) do t[k] = args[k] end
  for _, a in ipairs(AXES) do
    local v = c[a.name]
    t[a.flag or a.name] = a.value and a.value(v) or v
  end
  for k, v in pairs(run or {}) do t[k] = v end
  return t
end

--- grid.mnist_argv(script, config [, extra]) -> the command that runs
-- mnist.lua (script) on config, with the words of extra after its flags.
-- It is started without a shell, so no value is ever read as shell syntax.
function grid.mnist_argv(script, config, extra)
  local argv = sys.bbblua_argv(script, table.unpack(recipe.argv_of(config)))
  for _, w in ipairs(extra or {}) do argv[#argv + 1] = tostring(w) end
  return argv
end

-- The result line of a run that ended well, from its summary: the
-- validation error that ranks it, or the status that keeps it out.
local function summary_outcome(r, sum, select)
  local last = sum.epochs and sum.epochs[#sum.epochs] or {}
  r.val_acc, r.epochs = last.val_acc, #(sum.epochs or {})
  r.test_acc_mean, r.test_acc_mc, r.sigma_mean = sum.test_acc_mean, sum.test_acc_mc, last.sigma_mean
  local nonfinite = not finite(r.val_acc)
  for _, e in ipairs(sum.epochs or {}) do
    nonfinite = nonfinite or not finite(e.elbo_per_example) or not finite(e.nll_per_example)
  end
  if nonfinite then
    r.status = "non-finite"
    return
  end
  r.status, r.val_error = "ok", 100 * (1 - r.val_acc)
  if select == "val-error-min" then
    -- early stopping: the epoch of the lowest validation error (the
    -- first one on a tie) and the test error of the posterior means there
    local at = grid.best_val_epoch(sum.epochs)
    r.val_error, r.best_epoch = 100 * (1 - at.val_acc), math.tointeger(at.epoch)
    r.test_acc_at_best = at.test_acc   -- nil under --no-test
  end
end

--- grid.outcome(g, c, rc, summary, log, seconds) -> the result line of
-- configuration c's run in grid g ({id =, text =, select =}): from its exit
-- code, the text of its summary file and of its log (nil when missing).
-- Under mpirun, rank 0 adds mpi_rank, the rank the run was trained on.
function grid.outcome(g, c, rc, summary, log, seconds)
  local r = { grid = g.id, grid_text = g.text, key = c.key, config = {}, seconds = seconds }
  for _, a in ipairs(AXES) do r.config[a.name] = c[a.name] end
  local ok, sum = pcall(json.decode, summary or "")
  if rc == 0 and summary and ok and type(sum) == "table" then
    summary_outcome(r, sum, g.select)
  else
    log = log or ""
    local last = log:match("([^\n]*)\n*$") or ""
    r.message = last:sub(1, 300)
    r.status = (log:find("not finite", 1, true) or log:lower():find("nan", 1, true)) and "diverged" or "failed"
  end
  return r
end

--- grid.rank(results) -> the results that finished well (and were not
-- stopped early by --halving), best validation error first.
function grid.rank(results)
  local ranked = {}
  for _, r in ipairs(results) do if r.status == "ok" and not r.ranked_out then ranked[#ranked + 1] = r end end
  table.sort(ranked, function(a, b) return a.val_error < b.val_error or (a.val_error == b.val_error and a.key < b.key) end)
  return ranked
end

-- The checkpoint configuration key's runs go on from under --halving.
local function checkpoint_of(work, key) return ("%s/%s.ckpt"):format(work, fnv1a(key)) end

-- The grid g's results so far (done by key, and the list), and the file's
-- text as pieces, which every append writes again whole: corrupted lines
-- are skipped with a warning, a line of another grid is an error.
local function load_results(g)
  local path, done, results = g.args.results, {}, {}
  local text = sys.read_file(path)
  if not text or text == "" then return done, results, {} end
  local n = 0
  for line in (text:sub(-1) == "\n" and text or text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:find("%S") then
      local ok, r = pcall(json.decode, line)
      if not ok or type(r) ~= "table" or type(r.key) ~= "string" or type(r.grid) ~= "string"
          or type(r.status) ~= "string" then
        io.stderr:write(("grid.lua: warning: skipping line %d of %s: not a result line (%s)\n")
          :format(n, path, ok and "fields missing" or tostring(r):gsub("^.-:%d+: ", "")))
      elseif r.grid ~= g.id then
        error(("%s holds results of a different grid (line %d: grid %s, %s);\n"
          .. "this command's grid is %s (%s).\nGive another --results file, or the flags of that grid.")
          :format(path, n, r.grid, tostring(r.grid_text), g.id, g.text), 0)
      elseif not done[r.key .. (r.rung and ("@%d"):format(math.tointeger(r.rung) or 0) or "")] then
        r.rung = r.rung and math.tointeger(r.rung)
        done[r.key .. (r.rung and ("@" .. r.rung) or "")] = r
        results[#results + 1] = r
      end
    end
  end
  -- a line cut short (by a kill, before results were written whole) gets
  -- its end, so the next one starts clean
  return done, results, { text:sub(-1) == "\n" and text or text .. "\n" }
end

-- The results file written again whole with r's line at its end (a
-- temporary, fsync, a rename): a full disk leaves the file as it was, and
-- stops the grid with the file named instead of reporting results it did
-- not keep.
local function append(g, r)
  g.lines[#g.lines + 1] = json.encode(r) .. "\n"
  local ok, err = bbb.core.sys.write_file(g.args.results, g.lines)
  if not ok then
    g.lines[#g.lines] = nil
    error(("cannot write the results file %s: %s"):format(g.args.results,
      (tostring(err):gsub("^write: cannot write '[^']*': ", ""))), 0)
  end
end

-- The jobs. A job is a configuration's run: {config = c, mnist = its
-- mnist.lua config, extra = the flags after --}.

-- The job of configuration c, with run's settings over the grid's.
local function config_job(g, c, run)
  return { config = c, mnist = grid.mnist_config(g.args, c, run), extra = g.args.mnist_flags }
end

-- The job of configuration c in a rung of successive halving: the first
-- rung starts it and writes its checkpoint, a later one resumes that
-- checkpoint (which holds the run's flags).
local function rung_job(g, c, epochs, resume, ckpt)
  if resume then return { config = c, mnist = { resume = ckpt, epochs = epochs, threads = 1 } } end
  return config_job(g, c, { epochs = epochs, checkpoint = ckpt })
end

-- The task of job: its mnist.lua run as bbb.app.jobs takes it, its
-- summary in base.json and its output in base.log.
local function job_task(g, job, base)
  os.remove(base .. ".json")
  os.remove(base .. ".log")
  local config = { summary = base .. ".json" }
  for k, v in pairs(job.mnist) do config[k] = v end
  return { argv = grid.mnist_argv(g.mnist_script, config, job.extra), stdout = base .. ".log", stderr = base .. ".log" }
end

-- The result line of a job that ended (how, code as process:wait() gives
-- them; "error" when it could not start); its summary goes, and its log
-- too when it went well.
local function end_job(g, job, base, how, code, seconds)
  local rc = how == "exit" and code or how == "signal" and 128 + code or 1
  local r = grid.outcome(g, job.config, rc, sys.read_file(base .. ".json"), sys.read_file(base .. ".log"), seconds)
  os.remove(base .. ".json")
  if r.status == "ok" then os.remove(base .. ".log") end
  return r
end

-- Runs a job to its end -> its result line.
local function run_job(g, job, base)
  local r = jobs.run({ job_task(g, job, base) })[1]
  return end_job(g, job, base, r.how, r.code, math.floor(r.seconds + 0.5))
end

-- The line each finished run prints: "done i/n: NAME: status ...", where
-- is where it ran (" on rank N" or ""), eta the seconds still to go.
local function done_line(n_done, n, name, r, where, left, eta)
  return ("done %d/%d: %s: %s%s  (%d s%s; %d left, about %d min)"):format(n_done, n, name,
    r.status, r.val_error and ("  validation error %.2f%%"):format(r.val_error)
    or (r.message and ("  " .. r.message) or ""), r.seconds, where, left, math.ceil(eta / 60))
end

-- The local scheduler: runs items ({config =, label =, job =}), --jobs at
-- a time, each a child process; on_result(item, r) for each one that ends.
-- A signal goes to the runs (each saves its checkpoint) and ends the grid
-- with 128 + N; rerunning the same command takes up where it stopped.
local function run_local(g, items, on_result)
  local tasks, finished, t_start = {}, 0, os.time()
  for i, it in ipairs(items) do
    tasks[i] = { item = it, base = ("%s/%s-%d"):format(g.work, fnv1a(it.config.key), i) }
  end
  local function on_start(task, i)
    print(("[%d/%d] start %s%s"):format(i, #items, task.item.config.key, task.item.label or ""))
    io.stdout:flush()
    for k, v in pairs(job_task(g, task.item.job, task.base)) do task[k] = v end
  end
  local function on_done(task, res)
    if res.how == "error" then error(tostring(res.code), 0) end
    local r = end_job(g, task.item.job, task.base, res.how, res.code, math.floor(res.seconds + 0.5))
    on_result(task.item, r)
    finished = finished + 1
    local left = #items - finished
    print(done_line(finished, #items, task.item.config.key .. (task.item.label or ""), r, "", left,
      (os.time() - t_start) / finished * left))
    io.stdout:flush()
  end
  local ok, err = pcall(jobs.run, tasks, { jobs = g.args.jobs, poll = 0.5, on_start = on_start, on_done = on_done })
  if ok then return end
  if type(err) == "table" and err.signal then
    err.message = ("interrupted; the configurations finished are in %s, rerun the same command to go on")
      :format(g.args.results)
  end
  error(err, 0)
end

-- The MPI work queue, rank 0's side: hands the configurations left out one
-- at a time to the worker that asks, and records the result lines they
-- send back.
local function mpi_queue_lead(g)
  local dist, todo = g.dist, g.todo
  local t_start, next_i, n_done, workers = os.time(), 1, 0, dist.size() - 1
  while workers > 0 do
    local msg, from = dist.recv_string()
    if msg ~= "ready" then
      local r = json.decode(msg)
      r.mpi_rank = from   -- where it ran
      n_done = n_done + 1
      append(g, r)
      g.results[#g.results + 1] = r
      local left = #todo - n_done
      print(done_line(n_done, #todo, r.key, r, "", left, (os.time() - t_start) / n_done * left))
      io.stdout:flush()
    end
    if next_i <= #todo then
      print(("[%d/%d] start %s on rank %d"):format(next_i, #todo, todo[next_i].key, from))
      io.stdout:flush()
      dist.send_string(tostring(next_i), from)
      next_i = next_i + 1
    else
      dist.send_string("stop", from)
      workers = workers - 1
    end
  end
end

-- The MPI work queue, a worker's side: asks rank 0 for a configuration,
-- trains it in a child process with one thread and sends the result line.
local function mpi_queue_worker(g)
  local dist = g.dist
  dist.send_string("ready", 0)
  while true do
    local msg = dist.recv_string(0)
    if msg == "stop" then break end
    local c = g.todo[tonumber(msg)]
    local r = run_job(g, config_job(g, c), ("%s/%s-r%d"):format(g.work, fnv1a(c.key), g.rank))
    dist.send_string(json.encode(r), 0)
  end
end

-- Successive halving under mpirun: rank 0 runs the rungs and hands each
-- run to a free worker rank as a job {config, epochs, resume}, with the
-- configuration's checkpoint when the run resumes one; the worker trains it
-- in a child process in a folder of its own and sends back the result line
-- and the new checkpoint, which rank 0 keeps. So the ranks share no files:
-- they may sit on machines without a common file system.
local function put_file(path, bytes)   -- whole or not at all: a rename over the old file
  local tmp = path .. ".part"
  cli.write_file(tmp, bytes)
  assert(os.rename(tmp, path))
end

-- Successive halving under mpirun, a worker's side: trains each job rank 0
-- sends in a folder of its own, and sends back the result line and the
-- checkpoint.
local function halving_worker(g)
  local dist = g.dist
  local mine = ("%s/rank%d"):format(g.work, g.rank)
  assert(sys.mkdir_p(mine))
  dist.send_string("ready", 0)
  while true do
    local msg = dist.recv_string(0)
    if msg == "stop" then break end
    local job = json.decode(msg)
    local ckpt_in = dist.recv_string(0)
    -- JSON gives every number back as a float: whole ones (epochs, samples)
    -- become integers again, so the flags read as they were written
    local c = {}
    for k, v in pairs(job.config) do c[k] = math.type(v) == "float" and math.tointeger(v) or v end
    local base = ("%s/%s"):format(mine, fnv1a(c.key))
    local ckpt = base .. ".ckpt"
    if job.resume then put_file(ckpt, ckpt_in) else os.remove(ckpt) end
    local r = run_job(g, rung_job(g, c, math.tointeger(job.epochs), job.resume, ckpt), base)
    dist.send_string(json.encode(r), 0)
    dist.send_string(r.status == "ok" and sys.read_file(ckpt) or "", 0)
  end
end

-- Rank 0's side: the idle workers, which carry over from one rung to the next.
local function workers_ready(g)
  if not g.idle then
    g.idle = {}
    for _ = 1, g.dist.size() - 1 do
      local msg, from = g.dist.recv_string()
      assert(msg == "ready", msg)
      g.idle[#g.idle + 1] = from
    end
  end
  return g.idle
end

-- The MPI scheduler of successive halving: runs items as run_local takes
-- them, each on a free worker rank.
local function run_items_mpi(g, items, on_result)
  local dist, idle = g.dist, workers_ready(g)
  local busy, next_i, finished, t_start = {}, 1, 0, os.time()
  local n_busy = 0
  while next_i <= #items or n_busy > 0 do
    while #idle > 0 and next_i <= #items do
      local it, w = items[next_i], table.remove(idle)
      print(("[%d/%d] start %s%s on rank %d"):format(next_i, #items, it.config.key, it.label or "", w))
      io.stdout:flush()
      dist.send_string(json.encode{ config = it.config, epochs = it.epochs, resume = it.resume }, w)
      dist.send_string(it.resume and sys.read_file(it.ckpt) or "", w)
      busy[w], n_busy, next_i = it, n_busy + 1, next_i + 1
    end
    local msg, from = dist.recv_string()
    local ckpt_bytes = dist.recv_string(from)
    local it = assert(busy[from], "a result from a rank with no job")
    busy[from], n_busy = nil, n_busy - 1
    idle[#idle + 1] = from
    local r = json.decode(msg)
    r.mpi_rank = from   -- where it ran
    if r.status == "ok" then put_file(it.ckpt, ckpt_bytes) end
    on_result(it, r)
    finished = finished + 1
    local left = #items - finished
    print(done_line(finished, #items, it.config.key .. (it.label or ""), r, (" on rank %d"):format(from), left,
      (os.time() - t_start) / finished * left))
    io.stdout:flush()
  end
end

-- The epochs of halving's rungs: --min-epochs, x ETA, ... up to --epochs.
local function rungs_of(args)
  local rungs, e = {}, args.min_epochs
  while e < args.epochs do rungs[#rungs + 1] = e; e = e * args.halving end
  rungs[#rungs + 1] = args.epochs
  return rungs
end

-- The items of rung k (to epochs) for the configurations alive that it has
-- no result for yet.
local function rung_items(g, alive, k, epochs)
  local items = {}
  for _, c in ipairs(alive) do
    if not g.done[c.key .. "@" .. k] then
      local ckpt = checkpoint_of(g.work, c.key)
      items[#items + 1] = { config = c, label = (" (rung %d, %d epochs)"):format(k, epochs),
        epochs = epochs, resume = k > 1, ckpt = ckpt, job = rung_job(g, c, epochs, k > 1, ckpt) }
    end
  end
  return items
end

-- The configurations of rung k that finished well, best first.
local function rung_survivors(g, alive, k, latest)
  local ok = {}
  for _, c in ipairs(alive) do
    local r = g.done[c.key .. "@" .. k]
    latest[c.key] = r
    if r and r.status == "ok" then ok[#ok + 1] = c end
  end
  table.sort(ok, function(x, y)
    local a, b = g.done[x.key .. "@" .. k].val_error, g.done[y.key .. "@" .. k].val_error
    return a < b or (a == b and x.key < y.key)
  end)
  return ok
end

-- Successive halving (run_items: the local or the MPI scheduler): each
-- configuration keeps one checkpoint, which the next rung resumes.
-- -> the budget in configuration-epochs.
local function halving(g, run_items)
  local args, eta, rungs = g.args, g.args.halving, rungs_of(g.args)
  local alive, budget, prev, latest = g.configs, 0, 0, {}
  for k, epochs in ipairs(rungs) do
    run_items(g, rung_items(g, alive, k, epochs), function(it, r)
      r.rung, r.epochs_target = k, epochs
      append(g, r)
      g.done[it.config.key .. "@" .. k] = r
    end)
    budget = budget + #alive * (epochs - prev)
    prev = epochs
    local ok = rung_survivors(g, alive, k, latest)
    print(("rung %d: %d configuration(s) trained to %d epochs, %d finished well%s"):format(k, #alive, epochs, #ok,
      k < #rungs and (", the best %d go on"):format(math.max(1, math.ceil(#ok / eta))) or ""))
    if k < #rungs then alive = table.move(ok, 1, math.max(1, math.ceil(#ok / eta)), 1, {}) end
  end
  g.results = {}
  for _, c in ipairs(g.configs) do if latest[c.key] then g.results[#g.results + 1] = latest[c.key] end end
  -- only the last rung's survivors are ranked: the others stopped early
  for _, r in ipairs(g.results) do if r.rung ~= #rungs then r.ranked_out = true end end
  print(("budget: %d configuration-epochs, against %d for every configuration trained to %d epochs")
    :format(budget, #g.configs * args.epochs, args.epochs))
  return budget
end

-- Under mpirun: every rank must run the same grid, and rank 0's flags are
-- the job's. -> dist (nil outside mpirun), rank
local function join_ranks(args)
  local dist = bbb.dist.available and bbb.dist.size() > 1 and bbb.dist or nil
  local rank = dist and dist.rank() or 0
  if dist then
    local mine = json.encode(args)
    if dist.broadcast_string(rank == 0 and mine or nil, 0) ~= mine then
      io.stderr:write(("grid.lua: rank %d was started with other flags than rank 0\n"):format(rank))
      dist.abort(2)
    end
  end
  return dist, rank
end

-- The configurations left to run; under mpirun rank 0's list, since the
-- results file is rank 0's.
local function todo_of(g)
  local todo = {}
  for _, c in ipairs(g.configs) do if not g.done[c.key] then todo[#todo + 1] = c end end
  if not g.dist then return todo end
  local keys, by_key = {}, {}
  for i, c in ipairs(todo) do keys[i] = c.key end
  for _, c in ipairs(g.configs) do by_key[c.key] = c end
  todo = {}
  for _, k in ipairs(json.decode(g.dist.broadcast_string(g.rank == 0 and json.encode(keys) or nil, 0))) do
    todo[#todo + 1] = by_key[k]
  end
  return todo
end

--- grid.lock_path(results) -> the file a grid on results locks while it
-- runs (in the folder of its runs).
function grid.lock_path(results)
  return results:gsub("%.jsonl$", "") .. ".runs/results.lock"
end

-- The grid of args: its identity, configurations, results so far and the
-- folder of its runs (made now), its header printed.
local function open_grid(args, o)
  local g = { args = args, select = args.select, results = {} }
  g.dist, g.rank = join_ranks(args)
  g.id, g.text = grid.identity(args)
  g.configs = grid.configurations(args)
  g.work = args.results:gsub("%.jsonl$", "") .. ".runs"
  local ok, err = sys.mkdir_for(args.results)
  if ok then ok, err = sys.mkdir_p(g.work) end
  -- the results file is one run's at a time (rank 0 alone writes it): a
  -- second grid on it would write its lines over the first one's. The lock
  -- is a file of its own, since every write replaces the results file.
  if ok and g.rank == 0 then
    g.lock, err = require("bbb.core").sys.lock(grid.lock_path(args.results))
    ok = g.lock ~= nil
    if not ok and err:find("being written by another run", 1, true) then
      err = ("'%s' is being written by another run"):format(args.results)
    end
  end
  if not ok then
    error({ usage = ("--results: %s"):format(err) }, 0)
  end
  g.done, g.results, g.lines = load_results(g)
  g.todo = todo_of(g)
  local script_dir = (arg and arg[0] or "scripts/grid.lua"):match("^(.*)/[^/]*$") or "."
  g.mnist_script = o.mnist_script or script_dir .. "/mnist.lua"
  g.budget = #g.configs * args.epochs   -- configuration-epochs trained
  if g.rank == 0 then
    print(("grid %s: %d configurations (%s), %d finished in %s, %d to run, %d at once, %d epochs each")
      :format(g.id, #g.configs, g.text, #g.configs - #g.todo, args.results, #g.todo,
        g.dist and g.dist.size() - 1 or args.jobs, args.epochs))
    io.stdout:flush()
  end
  return g
end

-- Trains what is left, by the scheduler the command asks for. A worker rank
-- under mpirun exits at its end, or returns "worker" with o.keep_dist
-- under --halving.
local function train(g, o)
  local dist = g.dist
  if dist and g.args.halving then
    if g.rank ~= 0 then
      halving_worker(g)
      if o.keep_dist then return "worker" end
      dist.finalize()
      os.exit(0)
    end
    g.budget = halving(g, run_items_mpi)
    -- every worker is idle once the last rung is in: each gets its stop
    for _, w in ipairs(workers_ready(g)) do dist.send_string("stop", w) end
  elseif dist then
    if g.rank ~= 0 then
      mpi_queue_worker(g)
      dist.finalize()
      os.exit(0)
    end
    mpi_queue_lead(g)
  elseif g.args.halving then
    g.budget = halving(g, run_local)
  else
    local items = {}
    for i, c in ipairs(g.todo) do items[i] = { config = c, job = config_job(g, c) } end
    run_local(g, items, function(_, r)
      append(g, r)
      g.results[#g.results + 1] = r
    end)
  end
end

--- grid.run(args [, o]) -> {ranked, results, budget, grid, grid_text,
-- checkpoint, args, work, mnist_script}: runs the grid; ranked holds the
-- results that finished well, best first, budget the configuration-epochs
-- trained, grid its id, and under --halving checkpoint(key) the file each
-- configuration's runs went on from (rank 0's copy). Under mpirun rank 0
-- gets the table and the other ranks exit when it is done; with
-- o.keep_dist they return {worker = true} instead and MPI stays up, so a
-- caller can run several grids in one job (table1.lua --protocol paper's
-- rows) and finalize at its end. o.mnist_script: the mnist.lua to run
-- (default: the one beside the running script).
function grid.run(args, o)
  o = o or {}
  local g = open_grid(args, o)
  if train(g, o) == "worker" then return { worker = true } end
  if g.lock then g.lock:release() end
  if g.dist and not o.keep_dist then g.dist.finalize() end
  local work = g.work
  return { ranked = grid.rank(g.results), results = g.results, budget = g.budget, grid = g.id,
           grid_text = g.text, args = args, work = work, mnist_script = g.mnist_script,
           checkpoint = args.halving and function(key) return checkpoint_of(work, key) end or nil }
end

-- The failures per axis value: "lr 0.001: 1/2  0.01: 0/2" (failed / runs).
local function print_failures(result)
  local results = result.results
  for _, a in ipairs(AXES) do
    local parts = {}
    for _, v in ipairs(result.args[a.name]) do
      local n, b = 0, 0
      for _, r in ipairs(results) do
        if tostring(r.config[a.name]) == tostring(v) or r.config[a.name] == v then
          n = n + 1
          if r.status ~= "ok" then b = b + 1 end
        end
      end
      parts[#parts + 1] = ("%s: %d/%d"):format(short(v), b, n)
    end
    print(("  %-10s %s"):format(a.name, table.concat(parts, "  ")))
  end
end

--- grid.report(result) -> result: prints the ranking by validation error
-- and the configurations that diverged or failed, per axis value (nothing
-- on a worker rank).
function grid.report(result)
  if result.worker then return result end
  local args, ranked, results = result.args, result.ranked, result.results
  local min = args.select == "val-error-min"
  print(("\nranking by %s (%d of %d configurations finished well; all in %s):")
    :format(min and "the lowest validation error over the epochs" or "validation error", #ranked, #results,
      args.results))
  for i = 1, math.min(args.top, #ranked) do
    local r = ranked[i]
    local at = min and r.best_epoch and (r.test_acc_at_best
      and ("  (epoch %d, test error there %.2f%%)"):format(r.best_epoch, 100 * (1 - r.test_acc_at_best))
      or ("  (epoch %d)"):format(r.best_epoch))
    print(("%3d. %6.2f%%  %s%s"):format(i, r.val_error, r.key, at or ""))
  end
  local bad = 0
  for _, r in ipairs(results) do if r.status ~= "ok" then bad = bad + 1 end end
  print(("\nconfigurations that diverged, gave non-finite values or failed: %d of %d"):format(bad, #results))
  if bad > 0 then print_failures(result) end
  return result
end

--- grid.final(result): --final's step: retrains the best configuration on
-- all the training images with --final-threads and tests it, its output
-- shown as it runs; raises when there is none or the run fails.
function grid.final(result)
  local args = result.args
  if #result.ranked == 0 then
    error("--final: no configuration finished well", 0)
  end
  local best = result.ranked[1]
  local c = { key = best.key }
  for _, a in ipairs(AXES) do c[a.name] = best.config[a.name] end
  local summary = result.work .. "/final.json"
  local argv = grid.mnist_argv(result.mnist_script, grid.mnist_config(args, c, { val = false, no_test = false, summary = summary,
    threads = args.final_threads or cores(), epochs = args.final_epochs or args.epochs }), args.mnist_flags)
  print(("\nfinal: %s on all training images, then the test set\n%s"):format(best.key, table.concat(argv, " ")))
  io.stdout:flush()
  local ok = sys.run(argv)
  local okj, sum = pcall(json.decode, sys.read_file(summary) or "")
  if not ok or not okj or type(sum) ~= "table" then
    error("--final: the run failed", 0)
  end
  print(("final %s: test error %.2f%% (posterior means), %.2f%% (MC ensemble)"):format(best.key,
    100 * (1 - sum.test_acc_mean), 100 * (1 - sum.test_acc_mc)))
end

return grid

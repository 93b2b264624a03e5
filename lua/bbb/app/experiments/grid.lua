--- bbb.app.experiments.grid: Hyperparameter grid search on a validation split (Blundell et al. 2015,
-- section 5.1; seed 002's grid by default): every configuration is a run of
-- scripts/mnist.lua (the shared training loop) in its own process with one
-- thread. Each finished configuration is appended to the results file as
-- one JSON line at once; rerunning the same command skips those, so a killed
-- grid resumes where it stopped. Under mpirun the configurations are spread
-- over the ranks: rank 0 hands them out one at a time (a rank that finishes
-- takes the next) and alone writes the results file.
--   mpirun -np 8 bbblua scripts/grid.lua
-- scripts/grid.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"

local grid = {}
local json = require "bbb.json"

-- The axes in a fixed order: flag, name in the results, converter, default.
local AXES = {
  { "lr", cli.positive_number(), "1e-3,1e-4,1e-5", "learning rates" },
  { "pi", cli.probability(), "0.25,0.5,0.75", "mixture weights pi of the wide component" },
  { "log_sigma1", cli.number(), "0,1,2", "-log sigma1 (wide component)" },
  { "log_sigma2", cli.number(), "6,7,8", "-log sigma2 (narrow component)" },
  { "samples", cli.positive_integer { max = 1000 }, "1,2,3,5", "MC samples per minibatch" },
  { "kl_weight", cli.choice_or_number({ "uniform", "blundell" }, { min = 0 }), "uniform",
    "KL weightings: uniform (1/M), blundell (2^(M-i)/(2^M-1)) or numbers" },
  { "optim", cli.choice { "adam", "sgd", "rmsprop" }, "adam", "optimizers: adam, sgd, rmsprop" },
}

local function list_of(conv, flag)
  return function(s)
    local out, seen = {}, {}
    for item in s:gmatch("[^,]+") do
      local v, err = conv(item)
      if v == nil then return nil, ("--%s: %s"):format(flag, err) end
      if not seen[tostring(v)] then out[#out + 1], seen[tostring(v)] = v, true end
    end
    if #out == 0 then return nil, ("--%s: expected a comma-separated list"):format(flag) end
    return out
  end
end

local sys = bbb.sys
local cores = sys.nproc

-- The selection metrics of --select.
grid.SELECT = { "val-error", "val-error-min" }
-- The training images of MNIST and Fashion-MNIST, which --val splits.
local TRAIN_IMAGES = 60000

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
    local flag = a[1]:gsub("_", "-")
    parser:option("--" .. flag, "Axis: " .. a[4] .. ".", a[3]):convert(list_of(a[2], flag))
  end
  recipe.declare(parser, { "epochs" })
  recipe.declare(parser, { "val" })
  recipe.declare(parser, { "hidden" })
  recipe.declare(parser, { "limit" })
  recipe.declare(parser, { "seed" })
  parser:option("--jobs", "Configurations trained at once (one thread each); default: the cores.")
    :convert(cli.positive_integer { max = 256 })
  parser:option("--results", "The results file (JSON lines).", "out/grid.jsonl")
    :convert(cli.output_path { ext = { "jsonl" } })
  parser:option("--top", "Configurations shown in the ranking.", "10"):convert(cli.positive_integer())
  parser:option("--halving", "Successive halving: train every configuration for --min-epochs, keep the "
    .. "best 1/ETA on the validation error, train those ETA times longer (resuming their checkpoints), "
    .. "and so on up to --epochs.")
    :convert(cli.integer { min = 2, max = 100 })
  parser:option("--min-epochs", "Epochs of the first rung of --halving.", "1"):convert(cli.positive_integer())
  parser:option("--select", "What ranks the configurations: val-error (the validation error after the "
    .. "last epoch) or val-error-min (the lowest validation error over the epochs, i.e. early stopping; the "
    .. "results then hold that epoch and its test error).", "val-error")
    :convert(cli.choice(grid.SELECT))
  parser:flag("--final", "Retrain the best configuration on all 60,000 images and test it.")
  parser:option("--final-epochs", "Epochs of the --final run (default: --epochs).")
    :convert(cli.positive_integer { max = 100000 })
  parser:option("--final-threads", "Threads of the --final run (default: the cores).")
    :convert(cli.threads())
  parser:argument("mnist_flags", "Flags for every scripts/mnist.lua run, after --."):args("*")
  return parser
end

--- grid.parse([argv]) -> args: the command line, checked.
function grid.parse(argv)
  argv = argv or arg
  local parser = grid.parser()
  local args = recipe.parse(parser, argv)
  args.jobs = args.jobs or cores()
  local train_n = math.min(args.limit or TRAIN_IMAGES, TRAIN_IMAGES)
  if args.val and args.val >= train_n then
    parser:error(("--val %d leaves no training images: the training set has %d%s"):format(args.val, train_n,
      args.limit and " (--limit)" or ""))
  end
  -- a flag the grid sets itself, given again for mnist.lua, would run every
  -- configuration with it while the results name the grid's value
  local own = { threads = true, seed = true, hidden = true, epochs = true, summary = true, val = true,
                limit = true, sigma1 = true, sigma2 = true }
  for _, a in ipairs(AXES) do own[a[1]] = true end
  for _, w in ipairs(args.mnist_flags) do
    local name = w:match("^%-%-([%w-]+)")
    local key = name and name:gsub("-", "_")
    if key and own[key] then
      parser:error(("--%s after -- is set by the grid itself (an axis or a grid flag): give it before --"):format(name))
    end
  end
  return args
end

--- grid.run(args [, {keep_dist = true}]) -> {ranked, results, budget, grid}:
-- runs the grid. Under mpirun rank 0 gets the table and the other ranks
-- exit when it is done; with keep_dist they return {worker = true} instead
-- and MPI stays up, so a caller can run several grids in one job (table1.lua
-- --protocol paper's rows) and finalize at its end.
function grid.run(args, o)
  o = o or {}
  -- Under mpirun: rank 0 coordinates, the other ranks train.
  local dist = bbb.dist.available and bbb.dist.size() > 1 and bbb.dist or nil
  local rank = dist and dist.rank() or 0
  if dist then
    -- every rank must run the same grid: rank 0's flags are the job's
    local mine = json.encode(args)
    if dist.broadcast_string(rank == 0 and mine or nil, 0) ~= mine then
      io.stderr:write(("grid.lua: rank %d was started with other flags than rank 0\n"):format(rank))
      dist.abort(2)
    end
  end
  local print = rank == 0 and print or function() end

  local function num(v) return type(v) == "number" and ("%.17g"):format(v) or tostring(v) end
  local function short(v) return type(v) == "number" and ("%g"):format(v) or tostring(v) end

  -- FNV-1a over the canonical description: the grid's identity.
  local function fnv1a(s)
    local h = 0x811c9dc5
    for i = 1, #s do h = ((h ~ s:byte(i)) * 0x01000193) & 0xffffffff end
    return ("%08x"):format(h)
  end

  local describe = {}
  for _, a in ipairs(AXES) do
    local vs = {}
    for i, v in ipairs(args[a[1]]) do vs[i] = num(v) end
    describe[#describe + 1] = a[1] .. "=" .. table.concat(vs, ",")
  end
  for _, k in ipairs { "epochs", "val", "hidden", "limit", "seed" } do
    describe[#describe + 1] = k .. "=" .. tostring(args[k])
  end
  describe[#describe + 1] = "mnist=" .. table.concat(args.mnist_flags, " ")
  if args.halving then describe[#describe + 1] = ("halving=%d min_epochs=%d"):format(args.halving, args.min_epochs) end
  -- (the default metric adds nothing, so the grids run before --select keep their identity)
  if args.select ~= "val-error" then describe[#describe + 1] = "select=" .. args.select end
  local grid_text = table.concat(describe, " ")
  local grid_id = fnv1a(grid_text)

  -- The configurations: the product of the axes, the first axis slowest.
  local configs = {}
  local function product(i, cur)
    if i > #AXES then
      local c, parts = {}, {}
      for k, a in ipairs(AXES) do
        c[a[1]] = cur[k]
        parts[#parts + 1] = a[1] .. "=" .. short(cur[k])
      end
      c.key = table.concat(parts, " ")
      configs[#configs + 1] = c
      return
    end
    for _, v in ipairs(args[AXES[i][1]]) do
      cur[i] = v
      product(i + 1, cur)
    end
    cur[i] = nil
  end
  product(1, {})

  -- Results so far: corrupted lines are skipped with a warning, a line of
  -- another grid is an error.
  local done, results = {}, {}
  do
    local f = io.open(args.results, "r")
    if f then
      local n = 0
      for line in f:lines() do
        n = n + 1
        if line:find("%S") then
          local ok, r = pcall(json.decode, line)
          if not ok or type(r) ~= "table" or type(r.key) ~= "string" or type(r.grid) ~= "string"
              or type(r.status) ~= "string" then
            io.stderr:write(("grid.lua: warning: skipping line %d of %s: not a result line (%s)\n")
              :format(n, args.results, ok and "fields missing" or tostring(r):gsub("^.-:%d+: ", "")))
          elseif r.grid ~= grid_id then
            io.stderr:write(("grid.lua: %s holds results of a different grid (line %d: grid %s, %s);\n"
              .. "this command's grid is %s (%s).\nGive another --results file, or the flags of that grid.\n")
              :format(args.results, n, r.grid, tostring(r.grid_text), grid_id, grid_text))
            os.exit(1)
          elseif not done[r.key .. (r.rung and ("@%d"):format(math.tointeger(r.rung) or 0) or "")] then
            r.rung = r.rung and math.tointeger(r.rung)
            done[r.key .. (r.rung and ("@" .. r.rung) or "")] = r
            results[#results + 1] = r
          end
        end
      end
      -- a line cut short by a kill gets its end, so the next one starts clean
      local size = f:seek("end")
      local last = size > 0 and f:seek("set", size - 1) and f:read(1)
      f:close()
      if last and last ~= "\n" then
        local fa = assert(io.open(args.results, "a"))
        fa:write("\n")
        fa:close()
      end
    end
  end

  local todo = {}
  for _, c in ipairs(configs) do if not done[c.key] then todo[#todo + 1] = c end end
  if dist then   -- the results file is rank 0's: its list of what is left is the job's
    local keys = {}
    for i, c in ipairs(todo) do keys[i] = c.key end
    local by_key = {}
    for _, c in ipairs(configs) do by_key[c.key] = c end
    todo = {}
    for _, k in ipairs(json.decode(dist.broadcast_string(rank == 0 and json.encode(keys) or nil, 0))) do
      todo[#todo + 1] = by_key[k]
    end
  end
  local work = args.results:gsub("%.jsonl$", "") .. ".runs"
  do
    local ok, err = sys.mkdir_for(args.results)
    if ok then ok, err = sys.mkdir_p(work) end
    if not ok then
      io.stderr:write(("grid.lua: --results: %s\n"):format(err))
      os.exit(2)
    end
  end
  print(("grid %s: %d configurations (%s), %d finished in %s, %d to run, %d at once, %d epochs each")
    :format(grid_id, #configs, grid_text, #configs - #todo, args.results, #todo,
      dist and dist.size() - 1 or args.jobs, args.epochs))
  io.stdout:flush()

  local script_dir = (arg and arg[0] or "scripts/grid.lua"):match("^(.*)/[^/]*$") or "."
  local mnist = script_dir .. "/mnist.lua"

  -- The mnist.lua command of one configuration, as an argument vector: it is
  -- started without a shell, so no value is ever read as shell syntax.
  local function command(c, o)
    local argv = sys.bbblua_argv(mnist, "--threads", o.threads, "--seed", args.seed,
      "--hidden", args.hidden, "--epochs", o.epochs, "--lr", num(c.lr), "--pi", num(c.pi),
      "--sigma1", num(math.exp(-c.log_sigma1)), "--sigma2", num(math.exp(-c.log_sigma2)),
      "--samples", c.samples, "--kl-weight", num(c.kl_weight), "--optim", c.optim,
      "--summary", o.summary)
    local function add(...) for _, w in ipairs { ... } do argv[#argv + 1] = tostring(w) end end
    if o.val then add("--val", o.val) end
    if args.limit then add("--limit", args.limit) end
    add(table.unpack(args.mnist_flags))
    return argv
  end

  local function read_file(path)
    local f = io.open(path, "r")
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return s
  end

  local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

  -- The result line of a finished run from its exit code, summary and log.
  local function outcome(c, rc, summary_path, log_path, seconds)
    local r = { grid = grid_id, grid_text = grid_text, key = c.key, config = {}, seconds = seconds }
    for _, a in ipairs(AXES) do r.config[a[1]] = c[a[1]] end
    local s = read_file(summary_path)
    local ok, sum = pcall(json.decode, s or "")
    if rc == 0 and s and ok and type(sum) == "table" then
      local last = sum.epochs and sum.epochs[#sum.epochs] or {}
      r.val_acc, r.epochs = last.val_acc, #(sum.epochs or {})
      r.test_acc_mean, r.test_acc_mc, r.sigma_mean = sum.test_acc_mean, sum.test_acc_mc, last.sigma_mean
      local nonfinite = not finite(r.val_acc)
      for _, e in ipairs(sum.epochs or {}) do
        nonfinite = nonfinite or not finite(e.elbo_per_example) or not finite(e.nll_per_example)
      end
      if nonfinite then
        r.status = "non-finite"
      else
        r.status, r.val_error = "ok", 100 * (1 - r.val_acc)
        if args.select == "val-error-min" then
          -- early stopping: the epoch of the lowest validation error (the
          -- first one on a tie) and the test error of the posterior means there
          local at = grid.best_val_epoch(sum.epochs)
          r.val_error, r.best_epoch = 100 * (1 - at.val_acc), math.tointeger(at.epoch)
          r.test_acc_at_best = at.test_acc
        end
      end
    else
      local log = read_file(log_path) or ""
      local last = log:match("([^\n]*)\n*$") or ""
      r.message = last:sub(1, 300)
      r.status = (log:find("not finite", 1, true) or log:lower():find("nan", 1, true)) and "diverged" or "failed"
    end
    return r
  end

  -- Every write and the close checked: a full disk stops the grid with the
  -- file named instead of reporting results it did not keep.
  local function append(r)
    local f, err = io.open(args.results, "a")
    local ok = f ~= nil
    if ok then ok, err = f:write(json.encode(r), "\n") end
    if ok then ok, err = f:flush() end
    if f then
      local closed, cerr = f:close()
      if ok and not closed then ok, err = false, cerr end
    end
    if not ok then
      io.stderr:write(("grid.lua: cannot write the results file %s: %s\n"):format(args.results, tostring(err)))
      os.exit(1)
    end
  end

  -- Under mpirun: a work queue. Workers ask rank 0 for a configuration, train
  -- it in a child process with one thread and send the result line back.
  local function report(r, n_done, t_start)
    append(r)
    results[#results + 1] = r
    local left = #todo - n_done
    local eta = n_done > 0 and (os.time() - t_start) / n_done * left or 0
    print(("done %d/%d: %s: %s%s  (%d s; %d left, about %d min)"):format(n_done, #todo, r.key, r.status,
      r.val_error and ("  validation error %.2f%%"):format(r.val_error) or (r.message and ("  " .. r.message) or ""),
      r.seconds, left, math.ceil(eta / 60)))
    io.stdout:flush()
  end

  local function run_mpi()
    if rank == 0 then
      local t_start, next_i, n_done, workers = os.time(), 1, 0, dist.size() - 1
      while workers > 0 do
        local msg, from = dist.recv_string()
        if msg ~= "ready" then
          n_done = n_done + 1
          report(json.decode(msg), n_done, t_start)
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
    else
      dist.send_string("ready", 0)
      while true do
        local msg = dist.recv_string(0)
        if msg == "stop" then break end
        local c = todo[tonumber(msg)]
        local base = ("%s/%s-r%d"):format(work, fnv1a(c.key), rank)
        local argv = command(c, { threads = 1, epochs = args.epochs, val = args.val, summary = base .. ".json" })
        local t0 = os.time()
        os.remove(base .. ".log")
        local ok, _, code = sys.run(argv, { stdout = base .. ".log", stderr = base .. ".log" })
        local r = outcome(c, ok and 0 or (math.tointeger(code) or 1), base .. ".json", base .. ".log", os.time() - t0)
        for _, ext in ipairs { ".json", ".log" } do
          if r.status == "ok" or ext ~= ".log" then os.remove(base .. ext) end
        end
        dist.send_string(json.encode(r), 0)
      end
    end
  end

  -- Runs items ({config =, argv = function(base) -> argv}), args.jobs at a
  -- time, each a child process polled twice a second; on_result(item, r)
  -- for each one that ends. Ctrl-C (or SIGTERM) stops the children, records
  -- nothing for them, and ends the grid with status 130: rerunning the same
  -- command takes up where it stopped.
  local function run_jobs(items, on_result)
    local running, next_i, finished = {}, 1, 0
    local t_start = os.time()
    local function launch(it, slot)
      local base = ("%s/%s-%d"):format(work, fnv1a(it.config.key), slot)
      os.remove(base .. ".json")
      os.remove(base .. ".log")
      local job, err = sys.start(it.argv(base), { stdin = "/dev/null", stdout = base .. ".log", stderr = base .. ".log" })
      if not job then
        io.stderr:write(("grid.lua: %s\n"):format(err))
        os.exit(1)
      end
      return { item = it, base = base, t0 = os.time(), job = job }
    end
    local function stop_all()
      for _, j in ipairs(running) do j.job:stop(9) end   -- their partial runs are not recorded
      for _, j in ipairs(running) do j.job:wait() end
      io.stderr:write(("\ngrid.lua: interrupted; the configurations finished are in %s, rerun the same "
        .. "command to go on\n"):format(args.results))
      os.exit(130)
    end
    bbb.core.sigint_trap(true)
    while next_i <= #items or #running > 0 do
      if bbb.core.sigint_pending() > 0 then stop_all() end
      while #running < args.jobs and next_i <= #items do
        local it = items[next_i]
        print(("[%d/%d] start %s%s"):format(next_i, #items, it.config.key, it.label or ""))
        io.stdout:flush()
        running[#running + 1] = launch(it, next_i)
        next_i = next_i + 1
      end
      sys.sleep(0.5)
      if bbb.core.sigint_pending() > 0 then stop_all() end
      for i = #running, 1, -1 do
        local j = running[i]
        local ended, how, code = j.job:poll()
        if ended then
          table.remove(running, i)
          local rc = how == "exit" and code or 128 + code
          local r = outcome(j.item.config, rc, j.base .. ".json", j.base .. ".log", os.time() - j.t0)
          on_result(j.item, r)
          finished = finished + 1
          local left = #items - finished
          local eta = finished > 0 and (os.time() - t_start) / finished * left or 0
          print(("done %d/%d: %s%s: %s%s  (%d s; %d left, about %d min)"):format(finished, #items, j.item.config.key,
            j.item.label or "", r.status, r.val_error and ("  validation error %.2f%%"):format(r.val_error)
            or (r.message and ("  " .. r.message) or ""), r.seconds, left, math.ceil(eta / 60)))
          io.stdout:flush()
          for _, ext in ipairs { ".json", ".log" } do
            if r.status == "ok" or ext ~= ".log" then os.remove(j.base .. ext) end
          end
        end
      end
    end
    bbb.core.sigint_trap(false)
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

  local function halving_worker()
    local mine = ("%s/rank%d"):format(work, rank)
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
      job.epochs = math.tointeger(job.epochs)
      local base = ("%s/%s"):format(mine, fnv1a(c.key))
      local ckpt = base .. ".ckpt"
      local argv
      if job.resume then
        put_file(ckpt, ckpt_in)
        argv = sys.bbblua_argv(mnist, "--resume", ckpt, "--epochs", job.epochs, "--summary", base .. ".json",
          "--threads", 1)
      else
        os.remove(ckpt)
        argv = command(c, { threads = 1, epochs = job.epochs, val = args.val, summary = base .. ".json" })
        argv[#argv + 1] = "--checkpoint"; argv[#argv + 1] = ckpt
      end
      os.remove(base .. ".json")
      local t0 = os.time()
      local ok, _, code = sys.run(argv, { stdin = "/dev/null", stdout = base .. ".log", stderr = base .. ".log" })
      local r = outcome(c, ok and 0 or (math.tointeger(code) or 1), base .. ".json", base .. ".log", os.time() - t0)
      dist.send_string(json.encode(r), 0)
      dist.send_string(r.status == "ok" and read_file(ckpt) or "", 0)
      os.remove(base .. ".json")
      if r.status == "ok" then os.remove(base .. ".log") end
    end
  end

  -- Rank 0's side: items as run_jobs takes them, each with .job; the idle
  -- workers carry over from one rung to the next.
  local idle
  local function workers_ready()
    if not idle then
      idle = {}
      for _ = 1, dist.size() - 1 do
        local msg, from = dist.recv_string()
        assert(msg == "ready", msg)
        idle[#idle + 1] = from
      end
    end
    return idle
  end
  local function run_items_mpi(items, on_result)
    workers_ready()
    local busy, next_i, finished, t_start = {}, 1, 0, os.time()
    local n_busy = 0
    while next_i <= #items or n_busy > 0 do
      while #idle > 0 and next_i <= #items do
        local it, w = items[next_i], table.remove(idle)
        print(("[%d/%d] start %s%s on rank %d"):format(next_i, #items, it.config.key, it.label or "", w))
        io.stdout:flush()
        dist.send_string(json.encode{ config = it.config, epochs = it.job.epochs, resume = it.job.resume }, w)
        dist.send_string(it.job.resume and read_file(it.job.ckpt) or "", w)
        busy[w], n_busy, next_i = it, n_busy + 1, next_i + 1
      end
      local msg, from = dist.recv_string()
      local ckpt_bytes = dist.recv_string(from)
      local it = assert(busy[from], "a result from a rank with no job")
      busy[from], n_busy = nil, n_busy - 1
      idle[#idle + 1] = from
      local r = json.decode(msg)
      if r.status == "ok" then put_file(it.job.ckpt, ckpt_bytes) end
      on_result(it, r)
      finished = finished + 1
      local left = #items - finished
      print(("done %d/%d: %s%s: %s%s  (%d s on rank %d; %d left, about %d min)"):format(finished, #items,
        it.config.key, it.label or "", r.status, r.val_error and ("  validation error %.2f%%"):format(r.val_error)
        or (r.message and ("  " .. r.message) or ""), r.seconds, from, left,
        math.ceil((os.time() - t_start) / finished * left / 60)))
      io.stdout:flush()
    end
  end

  local budget = #configs * args.epochs   -- configuration-epochs trained

  -- Successive halving: rungs of --min-epochs, x ETA, ... up to --epochs;
  -- each configuration keeps one checkpoint, which the next rung resumes.
  local function halving()
    local eta, rungs = args.halving, {}
    local e = args.min_epochs
    while e < args.epochs do rungs[#rungs + 1] = e; e = e * eta end
    rungs[#rungs + 1] = args.epochs
    local alive, budget, prev, latest = configs, 0, 0, {}
    for k, epochs in ipairs(rungs) do
      local items = {}
      for _, c in ipairs(alive) do
        local ckpt = ("%s/%s.ckpt"):format(work, fnv1a(c.key))
        if not done[c.key .. "@" .. k] then
          items[#items + 1] = { config = c, label = (" (rung %d, %d epochs)"):format(k, epochs),
            job = { epochs = epochs, resume = k > 1, ckpt = ckpt }, argv = function(base)
            if k == 1 then
              local argv = command(c, { threads = 1, epochs = epochs, val = args.val, summary = base .. ".json" })
              argv[#argv + 1] = "--checkpoint"; argv[#argv + 1] = ckpt
              return argv
            end
            return sys.bbblua_argv(mnist, "--resume", ckpt, "--epochs", epochs, "--summary", base .. ".json",
              "--threads", 1)
          end }
        end
      end
      local run_items = dist and run_items_mpi or run_jobs
      run_items(items, function(it, r)
        r.rung, r.epochs_target = k, epochs
        append(r)
        done[it.config.key .. "@" .. k] = r
      end)
      budget = budget + #alive * (epochs - prev)
      prev = epochs
      local ok = {}
      for _, c in ipairs(alive) do
        local r = done[c.key .. "@" .. k]
        latest[c.key] = r
        if r and r.status == "ok" then ok[#ok + 1] = c end
      end
      table.sort(ok, function(x, y)
        local a, b = done[x.key .. "@" .. k].val_error, done[y.key .. "@" .. k].val_error
        return a < b or (a == b and x.key < y.key)
      end)
      print(("rung %d: %d configuration(s) trained to %d epochs, %d finished well%s"):format(k, #alive, epochs, #ok,
        k < #rungs and (", the best %d go on"):format(math.max(1, math.ceil(#ok / eta))) or ""))
      if k < #rungs then alive = table.move(ok, 1, math.max(1, math.ceil(#ok / eta)), 1, {}) end
    end
    results = {}
    for _, c in ipairs(configs) do if latest[c.key] then results[#results + 1] = latest[c.key] end end
    -- only the last rung's survivors are ranked: the others stopped early
    for _, r in ipairs(results) do if r.rung ~= #rungs then r.ranked_out = true end end
    print(("budget: %d configuration-epochs, against %d for every configuration trained to %d epochs")
      :format(budget, #configs * args.epochs, args.epochs))
    return budget
  end

  if dist and args.halving then
    if rank ~= 0 then
      halving_worker()
      if o.keep_dist then return { worker = true } end
      dist.finalize()
      os.exit(0)
    end
    budget = halving()
    -- every worker is idle once the last rung is in: each gets its stop
    for _, w in ipairs(workers_ready()) do dist.send_string("stop", w) end
  elseif dist then
    run_mpi()
    if rank ~= 0 then dist.finalize(); os.exit(0) end
  elseif args.halving then
    budget = halving()
  else
    local items = {}
    for i, c in ipairs(todo) do
      items[i] = { config = c, argv = function(base)
        return command(c, { threads = 1, epochs = args.epochs, val = args.val, summary = base .. ".json" })
      end }
    end
    run_jobs(items, function(_, r)
      append(r)
      results[#results + 1] = r
    end)
  end

  -- Ranking by validation error
  local ranked = {}
  for _, r in ipairs(results) do if r.status == "ok" and not r.ranked_out then ranked[#ranked + 1] = r end end
  table.sort(ranked, function(a, b) return a.val_error < b.val_error or (a.val_error == b.val_error and a.key < b.key) end)
  local min = args.select == "val-error-min"
  print(("\nranking by %s (%d of %d configurations finished well; all in %s):")
    :format(min and "the lowest validation error over the epochs" or "validation error", #ranked, #results,
      args.results))
  for i = 1, math.min(args.top, #ranked) do
    local r = ranked[i]
    print(("%3d. %6.2f%%  %s%s"):format(i, r.val_error, r.key, min and r.best_epoch
      and ("  (epoch %d, test error there %.2f%%)"):format(r.best_epoch, 100 * (1 - r.test_acc_at_best)) or ""))
  end

  -- Diverged or non-finite configurations, per axis value
  local bad = 0
  for _, r in ipairs(results) do if r.status ~= "ok" then bad = bad + 1 end end
  print(("\nconfigurations that diverged, gave non-finite values or failed: %d of %d"):format(bad, #results))
  if bad > 0 then
    for _, a in ipairs(AXES) do
      local parts = {}
      for _, v in ipairs(args[a[1]]) do
        local n, b = 0, 0
        for _, r in ipairs(results) do
          if tostring(r.config[a[1]]) == tostring(v) or r.config[a[1]] == v then
            n = n + 1
            if r.status ~= "ok" then b = b + 1 end
          end
        end
        parts[#parts + 1] = ("%s: %d/%d"):format(short(v), b, n)
      end
      print(("  %-10s %s"):format(a[1], table.concat(parts, "  ")))
    end
  end

  if args.final then
    if #ranked == 0 then
      io.stderr:write("grid.lua: --final: no configuration finished well\n")
      os.exit(1)
    end
    local best = ranked[1]
    local c = { key = best.key }
    for _, a in ipairs(AXES) do c[a[1]] = best.config[a[1]] end
    local summary = work .. "/final.json"
    local argv = command(c, { threads = args.final_threads or cores(), epochs = args.final_epochs or args.epochs,
      summary = summary })
    print(("\nfinal: %s on all training images, then the test set\n%s"):format(best.key, table.concat(argv, " ")))
    io.stdout:flush()
    local ok = sys.run(argv)
    local s = read_file(summary)
    local okj, sum = pcall(json.decode, s or "")
    if not ok or not okj or type(sum) ~= "table" then
      io.stderr:write("grid.lua: --final: the run failed\n")
      os.exit(1)
    end
    print(("final %s: test error %.2f%% (posterior means), %.2f%% (MC ensemble)"):format(best.key,
      100 * (1 - sum.test_acc_mean), 100 * (1 - sum.test_acc_mc)))
  end
  if dist and not o.keep_dist then dist.finalize() end
  return { ranked = ranked, results = results, budget = budget, grid = grid_id,
           -- under --halving: the checkpoint each configuration's runs went on from (rank 0's copy)
           checkpoint = args.halving and function(key) return ("%s/%s.ckpt"):format(work, fnv1a(key)) end or nil }
end

return grid

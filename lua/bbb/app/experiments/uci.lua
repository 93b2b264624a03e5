--- The UCI benchmark experiment: what scripts/uci.lua runs. The regression
-- protocol of Hernandez-Lobato and Adams (2015), as used since by Gal and
-- Ghahramani (2016) and Lakshminarayanan et al. (2017): random 90/10
-- train/test splits, one hidden layer of 50 units, inputs and target
-- standardised on the training part, test scores with their standard errors
-- over the splits, beside the published numbers. Early stopping looks at
-- --val-fraction of each training part; unless --no-refit the model is then
-- trained again on the whole training part for the epochs that were best.
-- run(config) raises {usage = message} for bad input, {signal = N} when
-- stopped by a signal.
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local tab = require "bbb.app.tabular"

local M = {}

M.SETS = {
  boston = { spec = "data/r/MASS:Boston", target = "medv" },
  concrete = { spec = "data/r/modeldata:concrete", target = "compressive_strength" },
  -- classification, from r-cran-mlbench (rows with a missing value dropped)
  breastcancer = { spec = "data/r/mlbench:BreastCancer", target = "Class", ignore = { "Id" } },
  pima = { spec = "data/r/mlbench:PimaIndiansDiabetes", target = "diabetes" },
  sonar = { spec = "data/r/mlbench:Sonar", target = "Class" },
  ionosphere = { spec = "data/r/mlbench:Ionosphere", target = "Class" },
}
-- {rmse, se, ll, se} as published (Lakshminarayanan et al. 2017, Table 1;
-- VI from Hernandez-Lobato and Adams 2015, MC dropout from Gal and Ghahramani 2016)
M.PUBLISHED = {
  boston = { VI = { 4.32, 0.29, -2.90, 0.07 }, PBP = { 3.01, 0.18, -2.57, 0.09 },
             ["MC dropout"] = { 2.97, 0.85, -2.46, 0.25 }, ["deep ensembles"] = { 3.28, 1.00, -2.41, 0.25 } },
  concrete = { VI = { 7.19, 0.12, -3.39, 0.02 }, PBP = { 5.67, 0.09, -3.16, 0.02 },
               ["MC dropout"] = { 5.23, 0.53, -3.04, 0.09 }, ["deep ensembles"] = { 6.03, 0.58, -3.06, 0.18 } },
}
M.METHODS = { "bbb-weight", "bbb-local", "bbb-flipout", "dropout", "mlp", "ensemble" }
local SCRIPT = "build/bbblua scripts/uci.lua"

--- parser() -> uci.lua's command line.
function M.parser()
  local parser = recipe.parser("uci.lua", "The UCI regression benchmark (20 random 90/10 splits, 50 hidden units).",
    { defaults = { epochs = "2000", batch = "32", lr = "0.003", prior_sigma = "1", dropout = "0.05", test_samples = "100",
      patience = "200", weight_decay = "1e-4" }, outputs = { "out" } })
  flags.option(parser, "--sets", "Comma-separated: boston, concrete (regression), breastcancer, pima, sonar, ionosphere "
    .. "(classification), or FILE.csv:TARGET.", "boston,concrete")
    :convert(cli.list(function(s) return s end, { unique = true }))
  flags.option(parser, "--methods", "Comma-separated, of " .. table.concat(M.METHODS, ", ") .. ".", table.concat(M.METHODS, ","))
    :convert(cli.list(cli.choice(M.METHODS), { unique = true }))
  flags.option(parser, "--splits", "Random splits.", "20"):convert(cli.positive_integer { max = 1000 })
  recipe.declare(parser, { "epochs" })
  recipe.declare(parser, { "patience" })
  recipe.declare(parser, { "val_fraction" })
  recipe.declare(parser, { "no_refit" })
  recipe.declare(parser, { "batch" })
  recipe.declare(parser, { "lr" })
  recipe.declare(parser, { "prior_sigma" })
  recipe.declare(parser, { "dropout" })
  recipe.declare(parser, { "kl_weight" })
  recipe.declare(parser, { "samples" })
  recipe.declare(parser, { "weight_decay" })
  recipe.declare(parser, { "test_samples" })
  recipe.declare(parser, { "seed" })
  recipe.declare(parser, { "threads" })
  flags.option(parser, "--out", "Write OUT.json and OUT.csv (table, command, commit)."):convert(cli.output_path())
  return parser
end

--- parse([argv]) -> config: the command line, checked; config.command is
-- the command as --out's files keep it.
function M.parse(argv)
  argv = argv or arg
  local config = recipe.parse(M.parser(), argv)
  config.command = SCRIPT .. " " .. table.concat(argv, " ")
  return config
end

local function fail(msg) error({ usage = tostring(msg) }, 0) end

-- The data sets of --sets, read (rows with a missing cell left out, said).
local function read_sets(args)
  local sets = {}
  for _, s in ipairs(args.sets) do
    local file, target = s:match("^(.+):([^:]+)$")
    local set = M.SETS[s] or (file and { spec = file, target = target })
    if not set then fail(("--sets: '%s' is not a known set nor FILE:TARGET"):format(s)) end
    local ok, ds = pcall(tab.read, set.spec, { target = set.target, ignore = set.ignore, drop_missing = true })
    if not ok then fail(ds) end
    if (ds.n_dropped or 0) > 0 then
      print(("uci.lua: %s: %d rows with a missing value left out"):format(s, ds.n_dropped))
    end
    sets[#sets + 1] = { name = s, ds = ds }
  end
  return sets
end

-- Stopped by a signal: the splits so far are not a result.
local function stop_if_interrupted(info)
  if info.status ~= "interrupted" then return info end
  error({ signal = info.signal or 2, message = "interrupted; nothing was written" }, 0)
end

-- Split k of a method on a data set -> its test scores, the best epoch.
local function one_split(args, ds, method, k)
  local gen = bbb.Generator(args.seed * 1000 + k)
  local tr_idx, _, te_idx = tab.split(ds.n, { test = 0.1 }, gen)
  local full, te = tab.subset(ds, tr_idx), tab.subset(ds, te_idx)
  local kind = method:match("^bbb") and "bbb" or method
  local o = { hidden = { 50 }, estimator = method:match("^bbb%-(.*)"), prior_sigma = args.prior_sigma,
    dropout = args.dropout, epochs = args.epochs, patience = args.patience, batch = args.batch, lr = args.lr,
    weight_decay = kind == "dropout" and args.weight_decay or 0, kl_weight = args.kl_weight, samples = args.samples,
    jobs = kind == "ensemble" and args.threads or nil }   -- members --threads at a time, a process each
  local tr2, va2 = tab.split(full.n, { val = args.val_fraction }, gen)
  local tr, va = tab.subset(full, tr2), tab.subset(full, va2)
  o.generator = bbb.Generator(args.seed * 1000 + k + 500)
  local m = tab.new(ds, full.x, full.y, kind, o)
  local info = stop_if_interrupted(tab.train(m, tr, va, o))
  if not args.no_refit then
    o.generator, o.epochs = bbb.Generator(args.seed * 1000 + k + 500), math.max(info.best_epoch, 1)
    m = tab.new(ds, full.x, full.y, kind, o)
    stop_if_interrupted(tab.train(m, full, nil, o))
  end
  local s = tab.score(m, te, args.test_samples)
  return s, info.best_epoch
end

-- Every set x method over --splits, progress on stderr -> the rows: each
-- score's mean and standard error over the splits.
local function run_all(args, sets, t_start)
  local rows, total, done = {}, #sets * #args.methods * args.splits, 0
  for _, set in ipairs(sets) do
    for _, method in ipairs(args.methods) do
      local per, t0 = {}, bbb.core.clock()
      for k = 1, args.splits do
        local s, best = one_split(args, set.ds, method, k)
        s.best_epoch = best
        for key, v in pairs(s) do per[key] = per[key] or {}; per[key][k] = v end
        done = done + 1
        local el = bbb.core.clock() - t_start
        io.stderr:write(("\r%s %s split %d/%d: %s %.3f LL %.3f | %d/%d runs, ETA %.0f s   "):format(set.name, method, k,
          args.splits, s.rmse and "RMSE" or "accuracy", s.rmse or s.accuracy, s.ll, done, total, el / done * (total - done)))
      end
      local r = { set = set.name, method = method, splits = args.splits, seconds = bbb.core.clock() - t0 }
      for key, list in pairs(per) do r[key], r[key .. "_se"] = tab.mean_se(list) end
      rows[#rows + 1] = r
      io.stderr:write("\n")
    end
  end
  return rows
end

-- OUT.json (the rows, the published numbers, the command, commit and
-- environment) and OUT.csv (the rows).
local function write_outputs(result, out, t_start)
  local cmd, commit = result.command, result.commit
  local doc = { command = cmd, commit = commit, date = os.date("!%Y-%m-%d %H:%M UTC"), rows = result.rows,
    published = result.published, seconds = bbb.core.clock() - t_start }
  doc.environment = bbb.core.environment()   -- what a replay of these numbers pins
  cli.write_file(out .. ".json", bbb.json.encode(doc) .. "\n")
  local keys = { "rmse", "accuracy", "ll", "cover50", "cover90", "cover95", "ece", "best_epoch" }
  local head = { "set", "method", "splits", "seconds" }
  for _, k in ipairs(keys) do head[#head + 1] = k; head[#head + 1] = k .. "_se" end
  local csv = { "# " .. cmd .. " (commit " .. commit .. ")", table.concat(head, ",") }
  for _, r in ipairs(result.rows) do
    local line = { r.set, r.method, r.splits, ("%.1f"):format(r.seconds) }
    for _, k in ipairs(keys) do
      line[#line + 1] = r[k] and ("%.4f"):format(r[k]) or ""
      line[#line + 1] = r[k] and ("%.4f"):format(r[k .. "_se"]) or ""
    end
    csv[#csv + 1] = table.concat(line, ",")
  end
  cli.write_file(out .. ".csv", table.concat(csv, "\n") .. "\n")
end

--- run(config) -> result: every set and method over the splits, written to
-- OUT.json and OUT.csv with --out; result holds rows (a set and method
-- each: its scores' means and standard errors, its seconds), published,
-- command, commit and out (when written), which report prints.
function M.run(args)
  local sets = read_sets(args)
  bbb.set_num_threads(args.threads)
  -- the commit the run starts from (HEAD may move while it runs)
  local commit = require("bbb.app.sys").output { "git", "rev-parse", "--short", "HEAD" } or "?"
  local t_start = bbb.core.clock()
  local result = { rows = run_all(args, sets, t_start), published = M.PUBLISHED, commit = commit,
    command = args.command or SCRIPT }
  if args.out then
    local ok, err = pcall(write_outputs, result, args.out, t_start)
    -- hours of splits are not lost to a file that could not be written
    if not ok then M.report(result); error(err, 0) end
    result.out = args.out
  end
  return result
end

--- report(result): the table, ours beside the published numbers, and the
-- files written.
function M.report(result)
  print(table.concat(tab.bench_lines(result.rows, result.published), "\n"))
  if result.out then print("wrote " .. result.out .. ".json and " .. result.out .. ".csv") end
end

return M

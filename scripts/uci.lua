--- uci: the UCI regression benchmark of Hernandez-Lobato and Adams (2015),
-- as used since by Gal and Ghahramani (2016) and Lakshminarayanan et al.
-- (2017): random 90/10 train/test splits, one hidden layer of 50 units,
-- inputs and target standardised on the training part, test RMSE and test
-- log-likelihood with their standard errors over the splits, printed beside
-- the published numbers. Rows: Bayes by Backprop with each estimator
-- (weight, local, flipout), MC dropout and a plain MLP (both with a learned
-- noise level). Early stopping looks at --val of each training part; with
-- --refit (the default) the model is then trained again on the whole
-- training part for the epochs that were best.
--   nice -n 10 build/bbblua scripts/uci.lua --out doc/results/uci
local recipe = require "bbb.app.recipe"
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local tab = require "bbb.app.tabular"

local SETS = {
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
local PUBLISHED = {
  boston = { VI = { 4.32, 0.29, -2.90, 0.07 }, PBP = { 3.01, 0.18, -2.57, 0.09 },
             ["MC dropout"] = { 2.97, 0.85, -2.46, 0.25 }, ["deep ensembles"] = { 3.28, 1.00, -2.41, 0.25 } },
  concrete = { VI = { 7.19, 0.12, -3.39, 0.02 }, PBP = { 5.67, 0.09, -3.16, 0.02 },
               ["MC dropout"] = { 5.23, 0.53, -3.04, 0.09 }, ["deep ensembles"] = { 6.03, 0.58, -3.06, 0.18 } },
}
local METHODS = { "bbb-weight", "bbb-local", "bbb-flipout", "dropout", "mlp", "ensemble" }

local parser = recipe.parser("uci.lua", "The UCI regression benchmark (20 random 90/10 splits, 50 hidden units).",
  { defaults = { epochs = "2000", batch = "32", lr = "0.003", prior_sigma = "1", dropout = "0.05" }, outputs = { "out" } })
parser:option("--sets", "Comma-separated: boston, concrete (regression), breastcancer, pima, sonar, ionosphere "
  .. "(classification), or FILE.csv:TARGET.", "boston,concrete")
  :convert(cli.list(function(s) return s end, { unique = true }))
parser:option("--methods", "Comma-separated, of " .. table.concat(METHODS, ", ") .. ".", table.concat(METHODS, ","))
  :convert(cli.list(cli.choice(METHODS), { unique = true }))
parser:option("--splits", "Random splits.", "20"):convert(cli.positive_integer { max = 1000 })
recipe.declare(parser, { "epochs" })
parser:option("--patience", "Epochs without a better validation log-likelihood before stopping.", "200")
  :convert(cli.positive_integer { max = 1000000 })
recipe.declare(parser, { "val_fraction" })
parser:flag("--no-refit", "Keep the early-stopped model instead of training again on the whole training part.")
recipe.declare(parser, { "batch" })
recipe.declare(parser, { "lr" })
recipe.declare(parser, { "prior_sigma" })
recipe.declare(parser, { "dropout" })
recipe.declare(parser, { "kl_weight" })
recipe.declare(parser, { "samples" })
parser:option("--weight-decay", "Adam weight decay of the dropout net.", "1e-4"):convert(cli.nonnegative_number())
recipe.declare(parser, { "pred_samples" })
recipe.declare(parser, { "seed" })
recipe.declare(parser, { "threads" })
parser:option("--out", "Write OUT.json and OUT.csv (table, command, commit)."):convert(cli.output_path())
local args = recipe.parse(parser)
local function fail(msg) io.stderr:write("uci.lua: ", tostring(msg), "\n"); os.exit(2) end

local methods, sets = args.methods, {}
for _, s in ipairs(args.sets) do
  local file, target = s:match("^(.+):([^:]+)$")
  local set = SETS[s] or (file and { spec = file, target = target })
  if not set then fail(("--sets: '%s' is not a known set nor FILE:TARGET"):format(s)) end
  local ok, ds = pcall(tab.read, set.spec, { target = set.target, ignore = set.ignore, drop_missing = true })
  if not ok then fail(ds) end
  if (ds.n_dropped or 0) > 0 then
    print(("uci.lua: %s: %d rows with a missing value left out"):format(s, ds.n_dropped))
  end
  sets[#sets + 1] = { name = s, ds = ds }
end
bbb.set_num_threads(args.threads)

local function run(ds, method, k)
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
  -- stopped by a signal: the splits so far are not a result; its exit status
  local function stop_if_interrupted(info)
    if info.status ~= "interrupted" then return info end
    io.stderr:write("\nuci.lua: interrupted; nothing was written\n")
    os.exit(128 + (info.signal or 2))
  end
  local info = stop_if_interrupted(tab.train(m, tr, va, o))
  if not args.no_refit then
    o.generator, o.epochs = bbb.Generator(args.seed * 1000 + k + 500), math.max(info.best_epoch, 1)
    m = tab.new(ds, full.x, full.y, kind, o)
    stop_if_interrupted(tab.train(m, full, nil, o))
  end
  local s = tab.score(m, te, args.pred_samples)
  return s, info.best_epoch
end

-- the commit the run starts from (HEAD may move while it runs)
local commit = require("bbb.app.sys").output { "git", "rev-parse", "--short", "HEAD" } or "?"
local rows, t_start = {}, bbb.core.clock()
local total, done = #sets * #methods * args.splits, 0
for _, set in ipairs(sets) do
  for _, method in ipairs(methods) do
    local per, t0 = {}, bbb.core.clock()
    for k = 1, args.splits do
      local s, best = run(set.ds, method, k)
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
print(table.concat(tab.bench_lines(rows, PUBLISHED), "\n"))
if args.out then
  local cmd = "build/bbblua scripts/uci.lua " .. table.concat(arg, " ")
  local doc = { command = cmd, commit = commit, date = os.date("!%Y-%m-%d %H:%M UTC"), rows = rows, published = PUBLISHED,
    seconds = bbb.core.clock() - t_start }
  doc.environment = bbb.core.environment()   -- what a replay of these numbers pins
  cli.write_file(args.out .. ".json", bbb.json.encode(doc) .. "\n")
  local keys = { "rmse", "accuracy", "ll", "cover50", "cover90", "cover95", "ece", "best_epoch" }
  local head = { "set", "method", "splits", "seconds" }
  for _, k in ipairs(keys) do head[#head + 1] = k; head[#head + 1] = k .. "_se" end
  local csv = { "# " .. cmd .. " (commit " .. commit .. ")", table.concat(head, ",") }
  for _, r in ipairs(rows) do
    local line = { r.set, r.method, r.splits, ("%.1f"):format(r.seconds) }
    for _, k in ipairs(keys) do
      line[#line + 1] = r[k] and ("%.4f"):format(r[k]) or ""
      line[#line + 1] = r[k] and ("%.4f"):format(r[k .. "_se"]) or ""
    end
    csv[#csv + 1] = table.concat(line, ",")
  end
  cli.write_file(args.out .. ".csv", table.concat(csv, "\n") .. "\n")
  print("wrote " .. args.out .. ".json and " .. args.out .. ".csv")
end

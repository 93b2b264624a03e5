--- The fit experiment: a Bayesian MLP (or a baseline) fitted to a table of
-- the user's own, its uncertainty scored; what scripts/fit.lua runs.
-- Reads a CSV (or an R data set, FOLDER:NAME), standardises inputs and (for
-- regression) the target on the training rows, splits train / validation /
-- test (or takes --test FILE), trains by Bayes by Backprop (or the plain and
-- MC-dropout baselines) with early stopping on the validation
-- log-likelihood, and prints test RMSE or accuracy, test log-likelihood and
-- calibration (50/90/95% interval coverage, or ECE). --save writes one
-- checkpoint holding the model and its preprocessing for scripts/predict.lua.
--   build/bbblua scripts/fit.lua --data table.csv --target price --save out/price.ckpt
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local tab = require "bbb.app.tabular"

local M = {}

-- The config of the run in progress: M.run sets it, the steps below read it.
local args

local function hidden_list(s)
  local out = {}
  for w in (tostring(s) .. ","):gmatch("([^,]*),") do
    local v = math.tointeger(tonumber(w))
    if not v or v < 1 or v > 65536 then return nil, ("expected units per layer like 50 or 100,100, got '%s'"):format(s) end
    out[#out + 1] = v
  end
  return out
end

--- DEFAULTS: fit.lua's own defaults of the shared flags (bbb.app.flags),
-- as their command-line text.
M.DEFAULTS = { estimator = "local", epochs = "1000", batch = "32", lr = "0.003", prior_sigma = "1", dropout = "0.05",
  test_samples = "100" }

--- parser() -> fit.lua's command line.
function M.parser()
  local parser = recipe.parser("fit.lua", "Fit a Bayesian MLP to a table and score how sure it is.",
    { defaults = M.DEFAULTS, outputs = { "plot", "save_split", "summary" } })
    :epilog("--data takes a CSV file with a header row, or FOLDER:NAME for data set NAME of an R package "
      .. "folder (scripts/bootstrap unpacks data/r/MASS, data/r/modeldata, data/r/mlbench), e.g. data/r/MASS:Boston.")
  flags.option(parser, "--data", "The table (CSV, or FOLDER:NAME)."):args(1):count(1)
  recipe.declare(parser, { "target" })
  flags.option(parser, "--task", "regression or classification (default: classification when the target holds categories).")
    :convert(cli.choice { "regression", "classification" })
  flags.option(parser, "--test", "A separate test table (default: --test-fraction of --data).")
  recipe.declare(parser, { "test_fraction" })
  recipe.declare(parser, { "val_fraction" })
  recipe.declare(parser, { "split" })
  flags.option(parser, "--save-split", "Write the train/validation/test row numbers here (JSON), to score another tool on them.")
    :convert(cli.output_path { ext = { "json" } })
  recipe.declare(parser, { "ignore" })
  flags.option(parser, "--categorical", "A CSV column to read as categories, numbers or not (repeat for more)."):count("*")
  recipe.declare(parser, { "missing" })
  recipe.declare(parser, { "unseen" })
  recipe.declare(parser, { "delimiter" })
  flags.option(parser, "--model", "bbb (Bayes by Backprop), mlp (plain), dropout (MC dropout) or ensemble (--members plain "
    .. "nets from different initialisations, trained --threads at a time, each in a process of its own).", "bbb")
    :convert(cli.choice { "bbb", "mlp", "dropout", "ensemble" })
  recipe.declare(parser, { "members" })
  recipe.declare(parser, { "estimator" })
  flags.option(parser, "--hidden", "Units per hidden layer, comma-separated.", "50"):convert(hidden_list)
  recipe.declare(parser, { "epochs" })
  recipe.declare(parser, { "patience" })
  flags.option(parser, "--min-epochs", "Never stop before this many epochs.", "50"):convert(cli.nonnegative_integer { max = 1000000 })
  recipe.declare(parser, { "no_refit" })
  flags.option(parser, "--noise", "Regression noise: homo (one sd), hetero (an sd per row: a second output of the net) or "
    .. "auto (both trained, the better on the validation rows kept).", "auto"):convert(cli.choice { "homo", "hetero", "auto" })
  flags.option(parser, "--likelihood", "Regression noise distribution: gaussian, or student-t (heavy tails: a few rows far "
    .. "off do not widen every interval; one scale, with --df degrees of freedom).", "gaussian")
    :convert(cli.choice { "gaussian", "student-t" })
  flags.option(parser, "--df", ("Degrees of freedom of --likelihood student-t (%d to %d; fewer: heavier tails).")
    :format(tab.DF_MIN, tab.DF_MAX), "4"):convert(cli.integer { min = tab.DF_MIN, max = tab.DF_MAX })
  flags.option(parser, "--tune", "Choose the learning rate, width and prior scale (those not given) on the validation rows: "
    .. "on, off, or auto (on for tables of at most 200,000 training cells).", "auto")
    :convert(cli.choice { "on", "off", "auto" })
  flags.flag(parser, "--conformal", "Regression: also give split-conformal intervals, calibrated on the validation rows.")
  recipe.declare(parser, { "batch" })
  recipe.declare(parser, { "lr" })
  recipe.declare(parser, { "samples" })
  recipe.declare(parser, { "prior_sigma" })
  recipe.declare(parser, { "rho_init" })
  recipe.declare(parser, { "dropout" })
  recipe.declare(parser, { "kl_weight" })
  recipe.declare(parser, { "weight_decay" })
  recipe.declare(parser, { "test_samples" })
  flags.option(parser, "--every", "Print the validation figures every N epochs (0: never).", "50")
    :convert(cli.nonnegative_integer { max = 1000000 })
  recipe.declare(parser, { "seed" })
  recipe.declare(parser, { "threads" })
  recipe.declare(parser, { "save" })
  recipe.declare(parser, { "plot" })
  recipe.declare(parser, { "summary" })
  return parser
end

--- parse([argv]) -> config: the command line, checked; config.given names
-- the flags given on it.
function M.parse(argv)
  argv = argv or arg
  local parser = M.parser()
  local config = recipe.parse(parser, argv)
  config.given = cli.given(parser, argv)
  return config
end


-- A problem with the user's input: recipe.main prints it and exits 2.
local function fail(msg)
  error({ usage = (tostring(msg):gsub("^bbb%.data%.", "")) }, 0)
end

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

local function interrupted(info)   -- stopped by a signal: no model, no scores, its exit status
  if info.status ~= "interrupted" then return end
  error({ signal = info.signal or 2, message = ("interrupted in epoch %d; nothing was saved"):format(info.epochs + 1) }, 0)
end

-- The table, without rows whose target is missing, its target checked.
local function read_table(read)
  local ok, ds = pcall(tab.read, args.data, read)
  if not ok then fail(ds) end
  if not ds.y then fail(("no target column '%s'"):format(args.target)) end
  tab.centre_target(ds)
  if ds.y_offset then
    print(("fit.lua: '%s' is kept less %.17g: float32 would hold it in steps too coarse for its spread")
      :format(args.target, ds.y_offset))
  end
  local no_target
  ok, ds, no_target = pcall(tab.drop_missing_target, ds)
  if not ok then fail(ds) end
  if no_target > 0 then print(("fit.lua: %d rows without a value of '%s' left out"):format(no_target, args.target)) end
  ds.no_target = no_target
  if args.task == "regression" and ds.target.categorical then
    fail(("the target '%s' holds categories (%s, ...): use --task classification"):format(args.target, ds.classes[1]))
  end
  -- numbers read as classes (by --task classification or --categorical): a
  -- few (0/1, grades 1-7) are classes, many are a quantity
  if ds.target.categorical and #ds.classes > 20 then
    local numbers = 0
    for _, c in ipairs(ds.classes) do if tonumber(c) then numbers = numbers + 1 end end
    if numbers == #ds.classes then
      fail(("the target '%s' holds %d distinct numbers: a quantity, not classes; use --task regression")
        :format(args.target, #ds.classes))
    end
  end
  -- a class per row (names, ids) is no classification: nothing to learn
  if ds.target.categorical and ds.n >= 20 and #ds.classes >= 0.5 * ds.n then
    fail(("the target '%s' holds %d distinct values in %d rows: an identifier, not classes to learn")
      :format(args.target, #ds.classes, ds.n))
  end
  if ds.x:size(2) == 0 then fail(("no column is left to predict '%s' from: every other one is --ignore'd"):format(args.target)) end
  local id, levels = tab.identifier_column(ds, args.categorical)
  if id then
    fail(("column '%s' holds %d distinct values in %d rows: an identifier, not a feature; leave it out with "
      .. "--ignore %s (predict.lua --id %s writes it beside each prediction), or pass --categorical %s to use it")
      :format(id, levels, ds.n, id, id, id))
  end
  return ds
end

-- The row numbers of train, validation and test: --split's, or drawn.
local function split_rows(ds, gen)
  local ok, tr_idx, va_idx, te_idx
  if args.split then
    local kind = require("bbb.app.sys").kind(args.split, true)
    if kind and kind ~= "file" then fail(("--split: %s is a %s, not a file"):format(args.split, kind)) end
    ok, tr_idx, va_idx, te_idx = pcall(tab.read_split, args.split, ds.n)
    if not ok then fail("--split: " .. tostring(tr_idx)) end
    if args.test then te_idx = nil end
  else
    -- the rows left to train on
    local n_test = args.test and 0 or math.floor(args.test_fraction * ds.n + 0.5)
    local n_train = ds.n - n_test - math.floor(args.val_fraction * (ds.n - n_test) + 0.5)
    if n_train < math.max(10, ds.n // 4) then
      fail(("--val-fraction %g and --test-fraction %g leave %d of the %d rows to train on (at least %d needed)")
        :format(args.val_fraction, args.test and 0 or args.test_fraction, n_train, ds.n, math.max(10, ds.n // 4)))
    end
    ok, tr_idx, va_idx, te_idx = pcall(tab.split, ds.n, { val = args.val_fraction, test = args.test and 0 or args.test_fraction }, gen)
    if not ok then fail(tr_idx) end
  end
  if args.save_split then
    local left = ds.n_dropped + (ds.no_target or 0)
    tab.write_split(args.save_split, { train = tr_idx, validation = va_idx, test = te_idx }, ds.n, left)
    if left > 0 then
      print(("fit.lua: --save-split numbers the %d rows kept, in file order: the %d rows left out (missing "
        .. "cells or target) have no number"):format(ds.n, left))
    end
  end
  return { train = tr_idx, validation = va_idx, test = te_idx }
end

-- The test rows: --test's file (read as the model reads it) or the split's.
local function test_rows(ds, model, rows, read)
  if not args.test then return rows.test and tab.subset(ds, rows.test) end
  local ok, te = pcall(tab.read_for, model, args.test, read)
  if not ok then fail(args.test .. ": " .. tostring(te)) end
  local bad = te.y and tab.unscorable_target(te)
  if not te.y then fail(("--test: %s has no column '%s' to score the model on"):format(args.test, args.target)) end
  if bad then fail(("--test: %s: %s"):format(args.test, bad)) end
  for name, count in pairs(te.unseen or {}) do
    print(("fit.lua: note: %s, column '%s': %d rows hold a category the training rows never did; read as no level")
      :format(args.test, name, count))
  end
  return te
end

-- --tune: the learning rate, width and (bbb) prior scale chosen on the
-- validation rows, each setting trained with one noise sd; the choice goes
-- into run.build and run.train_opts.
local TUNE_BUDGET = 200000   -- training rows x features below which auto tunes
-- The third axis of the grid: what keeps each model from overfitting, two
-- values each, so BBB and MC dropout get the same budget (12 trainings).
local function regulariser_axis(given)
  if args.model == "bbb" and not given.prior_sigma then return "prior_sigma", { 0.3, 1 } end
  if args.model == "dropout" and not given.dropout then return "dropout", { 0.05, 0.2 } end
  return nil, { false }
end

local function tune(run)
  local tr, va, ds = run.tr, run.va, run.ds
  if va and args.tune == "auto" and tr.n * ds.x:size(2) > TUNE_BUDGET then
    run.tune_skipped = ("--tune auto: %d training rows x %d features is over %d cells; the defaults train as given")
      :format(tr.n, ds.x:size(2), TUNE_BUDGET)
  end
  if not (va and (args.tune == "on" or (args.tune == "auto" and tr.n * ds.x:size(2) <= TUNE_BUDGET))) then return end
  local given = args.given
  local grid = { lr = given.lr and { args.lr } or { 0.001, 0.003, 0.01 },
                 hidden = given.hidden and { args.hidden } or { { 50 }, { 100 } } }
  local axis, values = regulariser_axis(given)
  local best, t_tune = nil, bbb.core.clock()
  for _, lr in ipairs(grid.lr) do
    for _, hidden in ipairs(grid.hidden) do
      for _, v in ipairs(values) do
        local o = copy(run.build)
        o.hidden, o.noise, o.members = hidden, "homo", math.min(args.members, 2)
        if axis then o[axis] = v end
        local t_opts = copy(run.train_opts)
        t_opts.lr, t_opts.progress, t_opts.every = lr, "off", 0
        local got = tab.train(tab.new(ds, tr.x, tr.y, args.model, o), tr, va, t_opts)
        interrupted(got)
        print(("  tune: lr %g, hidden %s%s: best smoothed validation log-likelihood %.4f at epoch %d")
          :format(lr, table.concat(hidden, ","), axis and (", %s %g"):format(axis:gsub("_", " "), v) or "",
            got.best_ll, got.best_epoch))
        if not best or got.best_ll > best.ll then best = { ll = got.best_ll, lr = lr, hidden = hidden, v = v } end
      end
    end
  end
  run.train_opts.lr, run.build.hidden = best.lr, best.hidden
  run.tuned = { lr = best.lr, hidden = best.hidden, seconds = bbb.core.clock() - t_tune }
  if axis then run.build[axis], run.tuned[axis] = best.v, best.v end
  print(("tune: lr %g, hidden %s%s chosen on the validation rows (%.1f s)"):format(best.lr,
    table.concat(best.hidden, ","), axis and (", %s %g"):format(axis:gsub("_", " "), best.v) or "", run.tuned.seconds))
end

-- The net: with --noise auto (regression), both noise models trained and
-- the one better on the validation rows kept.
local function train(run)
  local noises = { args.noise == "hetero" and "hetero" or "homo" }
  if run.ds.target and not run.ds.target.categorical and args.noise == "auto" and run.va and not run.build.df then
    noises = { "homo", "hetero" }
  end
  local model, info
  for _, noise in ipairs(noises) do
    run.build.noise = noise
    local m = tab.new(run.ds, run.tr.x, run.tr.y, args.model, run.build)
    local t0 = bbb.core.clock()
    local got = tab.train(m, run.tr, run.va, run.train_opts)
    interrupted(got)
    print(("trained %d epochs in %.1f s (%s%s); best smoothed validation log-likelihood %.4f at epoch %d"):format(got.epochs,
      bbb.core.clock() - t0, got.status, m.task == "regression" and (", noise " .. noise) or "", got.best_ll, got.best_epoch))
    if not info or got.best_ll > info.best_ll then model, info = m, got end
  end
  run.build.noise = model.noise
  if #noises > 1 then print(("noise model: %s (the better on the validation rows)"):format(model.noise)) end
  return model, info
end

local function line(task, name, s)
  if task == "regression" then
    local conf = s.conformal95 and ("   conformal 95%% %.1f%%"):format(100 * s.conformal95) or ""
    print(("%-10s RMSE %.4f   log-likelihood %.4f   coverage of the 50/90/95%% intervals %.1f%% / %.1f%% / %.1f%%%s")
      :format(name, s.rmse, s.ll, 100 * s.cover50, 100 * s.cover90, 100 * s.cover95, conf))
  else
    print(("%-10s accuracy %.2f%%   log-likelihood %.4f   ECE %.4f"):format(name, 100 * s.accuracy, s.ll, s.ece))
  end
end

-- Calibration on the validation rows by the net that did not train on them
-- (a classifier's temperature, --conformal's multipliers), then, for an
-- uncalibrated regression, the refit on training and validation rows: the
-- model to test and save. A calibration holds for the net it was fitted to
-- (a refit net is another, sharper one), so a calibrated model is kept.
local function calibrate_and_refit(run, model, info, summary)
  local va = run.va
  summary.validation = tab.score(model, va, args.test_samples)
  line(model.task, "validation", summary.validation)
  if model.task == "classification" then
    local T, info = tab.fit_temperature(model, va, args.test_samples)
    summary.temperature, summary.temperature_fit = T, info
    if info.bound then
      print(("temperature %.3f: held at the floor %d validation rows with %d wrong can show "
        .. "(an error rate of 1/%d), not fitted lower"):format(T, info.n, info.errors, info.n + 2))
    else
      print(("temperature %.3f (fitted on the validation rows)"):format(T))
    end
  elseif args.conformal then
    model.conformal = tab.conformal(model, va, args.test_samples)
    summary.conformal = model.conformal
    print(("conformal multipliers of the predictive sd, 50/90/95%%: %s / %s / %s (from %d validation rows)")
      :format(tostring(model.conformal["0.5"]), tostring(model.conformal["0.9"]), tostring(model.conformal["0.95"]), va.n))
  end
  if args.no_refit then return model end
  if model.task == "classification" or model.conformal then
    print("no refit: the calibration holds for the net it was fitted to")
    return model
  end
  local all = tab.subset(run.ds, bbb.cat({ run.rows.train, run.rows.validation }, 1))
  local again = tab.new(run.ds, all.x, all.y, args.model, run.build)
  again.temperature, again.conformal = model.temperature, model.conformal
  local o = copy(run.train_opts)
  o.epochs, o.progress = math.max(1, info.best_epoch), "off"
  local t0 = bbb.core.clock()
  interrupted(tab.train(again, all, nil, o))
  print(("refit on the %d training and validation rows: %d epochs in %.1f s"):format(all.n, o.epochs, bbb.core.clock() - t0))
  summary.refit = { rows = all.n, epochs = o.epochs }
  return again
end

-- The test rows scored (and plotted) with the draws predict.lua --seed makes.
local function score_test(run, model, summary)
  if run.te then
    local s, p = tab.score(model, run.te, args.test_samples, args.seed)   -- the draws predict.lua --seed makes
    if model.task == "regression" then s.crps_mc = tab.crps_mc(model, p, run.te.y, args.seed) end
    summary.test = s
    line(model.task, "test", s)
    if args.plot then
      local okp, err = pcall(tab.plot, model, p, run.te.y, args.plot, ("%s: %s on the test rows"):format(args.target, args.model))
      if not okp then error("no plot: " .. (tostring(err):gsub("^[^\n]-:%d+: ", "")), 0) end
      print("plot: " .. args.plot)
    end
  end
end

local function test_and_save(run, model, summary)
  -- a failure while scoring still leaves the trained model saved
  local ok, err = pcall(score_test, run, model, summary)
  if args.summary then cli.write_file(args.summary, require("bbb.json").encode(summary) .. "\n") end
  if args.save then
    local rows = {}
    for k, part in pairs(run.rows) do rows[k] = part:totable() end
    tab.save(args.save, model, { data = args.data, target = args.target, seed = args.seed, split = rows })
    print("saved " .. args.save)
  end
  if not ok then error(err, 0) end
end

-- What became of missing cells, for the first line of the report.
local function missing_note(ds, nums, cats, cols)
  local parts = {}
  if ds.n_dropped > 0 then parts[#parts + 1] = ds.n_dropped .. " rows dropped for missing values" end
  if nums + cats > 0 then
    parts[#parts + 1] = ("%d missing cells in %d columns imputed: %d numbers by the training median with a "
      .. "was-missing indicator, %d categories as no level"):format(nums + cats, cols, nums, cats)
  end
  return #parts > 0 and table.concat(parts, "; ") or "none missing"
end

-- The flags of one model only, by the models they act on.
local MODEL_FLAGS = { members = { "ensemble" }, weight_decay = { "mlp", "dropout", "ensemble" }, dropout = { "dropout" },
  prior_sigma = { "bbb" }, rho_init = { "bbb" }, kl_weight = { "bbb" }, samples = { "bbb" }, estimator = { "bbb" } }

-- A flag that cannot act in this run is refused before any work, naming it.
local function check_flags(given)
  for flag, models in pairs(MODEL_FLAGS) do
    local acts = false
    for _, m in ipairs(models) do acts = acts or m == args.model end
    if given[flag] and not acts then
      fail(("--%s acts on --model %s only; this run fits --model %s"):format(flag:gsub("_", "-"),
        table.concat(models, ", "), args.model))
    end
  end
  if args.epochs < 1 then fail("--epochs must be at least 1: a model trained for no epoch is its initialisation") end
  if args.likelihood == "student-t" and args.noise == "hetero" then
    fail("--likelihood student-t has one noise scale: it does not go with --noise hetero")
  end
  if given.df and args.likelihood ~= "student-t" then fail("--df is the degrees of freedom of --likelihood student-t") end
end

-- Once the task is known: regression's flags refused for classes.
local function check_task_flags(task, given)
  if task ~= "classification" then return end
  for _, flag in ipairs { "conformal", "noise", "likelihood", "df" } do
    if given[flag] then
      fail(("--%s is for regression; '%s' holds classes"):format(flag, args.target))
    end
  end
end

-- What asked for cannot happen at this size, said on one line and kept in
-- the summary (the user could not know in advance).
local function note_skipped(run, summary)
  local skipped = {}
  if not run.va then
    if args.given.tune and args.tune == "on" then skipped[#skipped + 1] = "--tune on: no validation rows to tune on" end
    if args.conformal then skipped[#skipped + 1] = "--conformal: no validation rows to calibrate on" end
  end
  if run.tune_skipped then skipped[#skipped + 1] = run.tune_skipped end
  for _, why in ipairs(skipped) do print("fit.lua: skipped " .. why) end
  if #skipped > 0 then summary.skipped = skipped end
end

--- run(config) -> summary: reads, splits, tunes, trains, calibrates, tests
-- and saves as config (fit.parse's) says, printing as it goes; the
-- summary is what --summary writes. Raises {usage = message} for bad input,
-- {signal = N} when stopped by a signal.
function M.run(config)
  args = config
  -- a plot asked for is checked before the work, not after it
  if args.plot and not require("bbb.app.sys").find_program("gnuplot") then fail("--plot: gnuplot not found (install gnuplot-nox)") end
  check_flags(args.given)
  bbb.set_num_threads(args.threads)
  local gen = bbb.Generator(args.seed)
  local read = { target = args.target, task = args.task, ignore = args.ignore, drop_missing = args.missing == "drop",
                 keep_missing = args.missing == "impute", unseen = args.unseen == "warn" and "ignore" or "error",
                 delimiter = args.delimiter, categorical = #args.categorical > 0 and args.categorical or nil }
  local run = { ds = read_table(read) }
  run.rows = split_rows(run.ds, gen)
  run.tr, run.va = tab.subset(run.ds, run.rows.train), run.rows.validation and tab.subset(run.ds, run.rows.validation)
  run.build = { hidden = args.hidden, estimator = args.estimator, prior_sigma = args.prior_sigma, members = args.members,
    rho_init = args.rho_init, dropout = args.dropout, generator = gen,
    df = args.likelihood == "student-t" and args.df or nil }
  local model = tab.new(run.ds, run.tr.x, run.tr.y, args.model, run.build)
  check_task_flags(model.task, args.given)
  run.te = test_rows(run.ds, model, run.rows, read)
  local ds, tr, va, te = run.ds, run.tr, run.va, run.te
  local nums, cats, cols = tab.missing_cells(ds)   -- one pass over the rows, for the report and the summary
  print(("fit.lua: %s, %d rows x %d features (%s); %s of '%s'; train %d, validation %d, test %d"):format(args.data,
    ds.n, ds.x:size(2), missing_note(ds, nums, cats, cols), model.task, args.target, tr.n, va and va.n or 0, te and te.n or 0))
  print(("model: %s %s"):format(args.model, tostring(model.net):gsub("\n%s*", " ")))
  io.stdout:flush()
  run.train_opts = { epochs = args.epochs, batch = args.batch, lr = args.lr, samples = args.samples,
    patience = args.patience, min_epochs = args.min_epochs, weight_decay = args.weight_decay, generator = gen,
    every = args.every, kl_weight = args.kl_weight, progress = args.every == 0 and "bar" or "off",
    jobs = args.model == "ensemble" and math.min(args.threads, args.members) or nil }
  tune(run)
  local info
  model, info = train(run)
  local summary = { data = args.data, target = args.target, task = model.task, model = args.model, seed = args.seed,
    noise = model.noise, likelihood = model.task == "regression" and args.likelihood or nil, df = model.df, tune = run.tuned, epochs = info.best_epoch, trained_epochs = info.epochs,
    rows = { train = tr.n, validation = va and va.n or 0, test = te and te.n or 0 } }
  summary.imputed = { numbers = nums, categories = cats, rows_dropped = ds.n_dropped }
  note_skipped(run, summary)
  if va then model = calibrate_and_refit(run, model, info, summary) end
  test_and_save(run, model, summary)
end

return M

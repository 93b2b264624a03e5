--- The predict experiment: what scripts/predict.lua runs. A model of
-- scripts/fit.lua reads new rows the way it was trained to and writes one
-- line of predictions with their uncertainty per row, scored when the rows
-- hold the target. run(config) raises {usage = message} for bad input.
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local sys = require "bbb.app.sys"
local tab = require "bbb.app.tabular"
local json = require "bbb.json"

local M = {}

--- parser() -> predict.lua's command line.
function M.parser()
  local parser = recipe.parser("predict.lua", "Predict with uncertainty from a model saved by scripts/fit.lua --save.",
    { outputs = { "out", "plot", "summary" }, defaults = { test_samples = "100" } })
  flags.option(parser, "--model", "The checkpoint written by fit.lua --save."):count(1)
  flags.option(parser, "--data", "The rows to predict (CSV, or FOLDER:NAME for an R data set)."):count(1)
  flags.option(parser, "--out", "Where the predictions go (CSV).", "out/predictions.csv"):convert(cli.output_path { ext = { "csv" } })
  recipe.declare(parser, { "delimiter" })
  recipe.declare(parser, { "missing" })
  flags.option(parser, "--id", "A column of --data (an id) to copy, as written, beside each row's prediction.")
  flags.flag(parser, "--keep-columns", "Copy every column of --data, as written, beside each row's prediction.")
  recipe.declare(parser, { "unseen" })
  recipe.declare(parser, { "test_samples" })
  recipe.declare(parser, { "seed" })
  recipe.declare(parser, { "threads" })
  recipe.declare(parser, { "plot" })
  recipe.declare(parser, { "summary" })
  return parser
end

--- parse([argv]) -> config: the command line, checked.
function M.parse(argv)
  return recipe.parse(M.parser(), argv or arg)
end

local function fail(msg) error({ usage = (tostring(msg):gsub("^bbb%.data%.", "")) }, 0) end

-- The model and the rows, read as it was trained; notes on what was left out.
local function read_rows(args)
  local ok, model = pcall(tab.load, args.model)
  if not ok then fail(model) end
  local ds
  ok, ds = pcall(tab.read_for, model, args.data, { delimiter = args.delimiter, drop_missing = args.missing == "drop",
    keep_missing = args.missing == "impute", unseen = args.unseen == "warn" and "ignore" or "error" })
  if not ok then fail(args.data .. ": " .. tostring(ds)) end
  for name, count in pairs(ds.unseen or {}) do
    print(("predict.lua: note: column '%s': %d rows hold a category the training rows never did; read as no level")
      :format(name, count))
  end
  if #ds.ignored > 0 then
    print(("predict.lua: note: %s holds columns the model does not use, left out: %s"):format(args.data,
      table.concat(ds.ignored, ", ")))
  end
  return model, ds
end

-- The columns --id or --keep-columns copy, read before any prediction.
local function kept_columns(args, ds)
  if not (args.id or args.keep_columns) then return nil end
  local what = args.id and "--id" or "--keep-columns"
  if args.missing == "drop" then fail(what .. ": with --missing drop some rows get no prediction; use impute") end
  local names = args.id and { args.id } or tab.header(args.data, args.delimiter)
  local ok, kept = pcall(tab.kept_columns, args.data, names, args.delimiter)
  if not ok then fail(what .. ": " .. tostring(kept):gsub("^%-%-keep%-columns: ", "")) end
  if #kept > 0 and #kept[1].values ~= ds.n then
    fail(("%s changed while it was read: %d rows of predictions, %d of %s"):format(args.data, ds.n, #kept[1].values, what))
  end
  return kept
end

-- One set of draws (seeded by --seed, as fit.lua's test scores) for the
-- rows and the scores; rows without the target are predicted, not scored.
-- -> scores or nil, the predictive of every row.
local function predict_and_score(args, model, ds)
  local scored, no_target = ds, 0
  if ds.y then
    local okd
    okd, scored, no_target = pcall(tab.drop_missing_target, ds)
    if not okd then ds.y, scored, no_target = nil, ds, 0 end   -- no row has the target: nothing to score
  end
  local s, p, ps
  if ds.y and no_target == 0 then
    s, p = tab.score(model, ds, args.test_samples, args.seed)
    ps = p
  else
    p = tab.seeded(model, args.seed, tab.predict, model, ds.x, args.test_samples)
    if ds.y then s, ps = tab.score(model, scored, args.test_samples, args.seed) end
  end
  if s and model.task == "regression" then s.crps_mc = tab.crps_mc(model, ps, scored.y, args.seed) end
  return s, p
end

-- The scores printed, and the plot drawn, when the rows hold the target.
local function report(args, model, ds, s, p)
  if not ds.y then
    if args.plot then
      print(("predict.lua: no plot: %s has no column '%s' to compare with"):format(args.data, model.prep.target.name))
    end
    return
  end
  if model.task == "regression" then
    print(("RMSE %.4f   log-likelihood %.4f   coverage of the 50/90/95%% intervals %.1f%% / %.1f%% / %.1f%%")
      :format(s.rmse, s.ll, 100 * s.cover50, 100 * s.cover90, 100 * s.cover95))
  else
    print(("accuracy %.2f%%   log-likelihood %.4f   ECE %.4f"):format(100 * s.accuracy, s.ll, s.ece))
  end
  if args.plot then
    local okp, err = pcall(tab.plot, model, p, ds.y, args.plot, ("%s: %s"):format(model.prep.target.name, args.data))
    if not okp then error("no plot: " .. (tostring(err):gsub("^[^\n]-:%d+: ", "")), 0) end
    print("plot: " .. args.plot)
  end
end

--- run(config) -> summary: the predictions written to config.out; the
-- summary is what --summary writes.
function M.run(args)
  -- a plot asked for is checked before the work, not after it
  if args.plot and not sys.find_program("gnuplot") then fail("--plot: gnuplot not found (install gnuplot-nox)") end
  if args.id and args.keep_columns then fail("--keep-columns copies every column, --id one: give one of them") end
  bbb.set_num_threads(args.threads)
  bbb.manual_seed(args.seed)
  -- the file is read more than once (its header, its rows, the columns
  -- kept): it must be the same file at the end as at the start
  local before = sys.fingerprint(args.data)
  local model, ds = read_rows(args)
  local kept = kept_columns(args, ds)
  if sys.fingerprint(args.data) ~= before then
    fail(("%s changed while it was read (replaced or written to): run again on a file that stays put"):format(args.data))
  end
  local s, p = predict_and_score(args, model, ds)
  local okw, werr = pcall(cli.write_file, args.out, { table.concat(tab.rows(model, p, ds.y, kept), "\n"), "\n" })
  if not okw then fail((tostring(werr):gsub("^[^\n]-:%d+: ", ""):gsub("^cli%.write_file: ", ""))) end
  print(("predict.lua: %d rows of %s -> %s (%s, %s)"):format(ds.n, args.data, args.out, model.task, model.kind))
  local nums, cats = tab.missing_cells(ds)
  if nums + cats > 0 then
    print(("predict.lua: %d missing cells imputed as the model was trained: %d numbers by the training median, "
      .. "%d categories as no level"):format(nums + cats, nums, cats))
  end
  local summary = { model = args.model, data = args.data, rows = ds.n, seed = args.seed, test_samples = args.test_samples,
    scores = s or json.null, imputed = { numbers = nums, categories = cats } }
  if args.summary then cli.write_file(args.summary, json.encode(summary) .. "\n") end
  report(args, model, ds, s, p)
  return summary
end

return M

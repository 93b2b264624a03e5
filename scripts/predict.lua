--- predict: predictions with their uncertainty from a model of scripts/fit.lua.
-- Reads the rows of --data the way the model was trained to (its columns,
-- its categories, its scaling) and writes one line per row: for regression
-- the predictive mean, its standard deviation split into the epistemic
-- (weights) and aleatoric (noise) parts, and the 50/90/95% interval bounds;
-- for classification the predicted class, each class's probability, the
-- predictive entropy and the mutual information (epistemic part), in nats.
-- A column the model needs that is missing, or a category it never saw, is
-- an error naming it. When the rows hold the target too, the scores and
-- --plot (predicted vs observed, or the calibration curve) come with them.
--   build/bbblua scripts/predict.lua --model out/price.ckpt --data new.csv --out predictions.csv
local recipe = require "bbb.app.recipe"
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local tab = require "bbb.app.tabular"

local parser = recipe.parser("predict.lua", "Predict with uncertainty from a model saved by scripts/fit.lua --save.",
  { outputs = { "out", "plot", "summary" } })
parser:option("--model", "The checkpoint written by fit.lua --save."):count(1)
parser:option("--data", "The rows to predict (CSV, or FOLDER:NAME for an R data set)."):count(1)
parser:option("--out", "Where the predictions go (CSV).", "out/predictions.csv"):convert(cli.output_path { ext = { "csv" } })
parser:option("--delimiter", "The CSV delimiter of --data (one character).", ",")
parser:option("--missing", "A missing cell: impute (as the model was trained to), drop (no prediction for the row) "
  .. "or error.", "impute"):convert(cli.choice { "impute", "drop", "error" })
parser:option("--id", "A column of --data (an id) to copy, as written, beside each row's prediction.")
parser:flag("--keep-columns", "Copy every column of --data, as written, beside each row's prediction.")
parser:option("--unseen", "A category the training rows never held: warn (read as no level, with a count) or error.", "warn")
  :convert(cli.choice { "warn", "error" })
recipe.declare(parser, { "pred_samples" })
recipe.declare(parser, { "seed" })
recipe.declare(parser, { "threads" })
parser:option("--plot", "PNG (needs the target in --data): predicted vs observed with 95% intervals, or calibration.")
  :convert(cli.output_path { ext = { "png", "svg" } })
parser:option("--summary", "Write the scores (when --data holds the target) as JSON here.")
  :convert(cli.output_path { ext = { "json" } })
local args = recipe.parse(parser)

local function fail(msg)
  io.stderr:write("predict.lua: ", (tostring(msg):gsub("^bbb%.data%.", "")), "\n")
  os.exit(2)
end

-- a plot asked for is checked before the work, not after it
if args.plot and not require("bbb.app.sys").find_program("gnuplot") then fail("--plot: gnuplot not found (install gnuplot-nox)") end
bbb.set_num_threads(args.threads)
bbb.manual_seed(args.seed)
if args.id and args.keep_columns then fail("--keep-columns copies every column, --id one: give one of them") end
local ok, model = pcall(tab.load, args.model)
if not ok then fail(model) end
-- the file is read more than once (its header, its rows, the columns kept):
-- it must be the same file at the end as at the start
local before = require("bbb.app.sys").fingerprint(args.data)
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
local kept
if args.id or args.keep_columns then
  local what = args.id and "--id" or "--keep-columns"
  if args.missing == "drop" then fail(what .. ": with --missing drop some rows get no prediction; use impute") end
  local names = args.id and { args.id } or tab.header(args.data, args.delimiter)
  ok, kept = pcall(tab.kept_columns, args.data, names, args.delimiter)
  if not ok then fail(what .. ": " .. tostring(kept):gsub("^%-%-keep%-columns: ", "")) end
end
if kept and #kept > 0 and #kept[1].values ~= ds.n then
  fail(("%s changed while it was read: %d rows of predictions, %d of %s"):format(args.data, ds.n, #kept[1].values,
    args.id and "--id" or "--keep-columns"))
end
if require("bbb.app.sys").fingerprint(args.data) ~= before then
  fail(("%s changed while it was read (replaced or written to): run again on a file that stays put"):format(args.data))
end
-- one set of draws (seeded by --seed, as fit.lua's test scores) for the rows and the scores
local s, p
local scored, no_target = ds, 0
if ds.y then
  local okd
  okd, scored, no_target = pcall(tab.drop_missing_target, ds)
  if not okd then ds.y, scored, no_target = nil, ds, 0 end   -- no row has the target: nothing to score
end
local ps   -- the predictive of the scored rows
if ds.y and no_target == 0 then s, p = tab.score(model, ds, args.pred_samples, args.seed); ps = p
else
  p = tab.seeded(model, args.seed, tab.predict, model, ds.x, args.pred_samples)
  -- rows without the target are predicted, not scored
  if ds.y then s, ps = tab.score(model, scored, args.pred_samples, args.seed) end
end
if s and model.task == "regression" then s.crps_mc = tab.crps_mc(model, ps, scored.y, args.seed) end
local lines = tab.rows(model, p, ds.y, kept)
local okw, werr = pcall(cli.write_file, args.out, { table.concat(lines, "\n"), "\n" })
if not okw then fail((tostring(werr):gsub("^[^\n]-:%d+: ", ""):gsub("^cli%.write_file: ", ""))) end
print(("predict.lua: %d rows of %s -> %s (%s, %s)"):format(ds.n, args.data, args.out, model.task, model.kind))
local miss_nums, miss_cats = tab.missing_cells(ds)
if miss_nums + miss_cats > 0 then
  print(("predict.lua: %d missing cells imputed as the model was trained: %d numbers by the training median, "
    .. "%d categories as no level"):format(miss_nums + miss_cats, miss_nums, miss_cats))
end
if args.summary then
  cli.write_file(args.summary, require("bbb.json").encode { model = args.model, data = args.data, rows = ds.n,
    seed = args.seed, pred_samples = args.pred_samples, scores = s or require("bbb.json").null,
    imputed = { numbers = miss_nums, categories = miss_cats } } .. "\n")
end
if ds.y then
  if model.task == "regression" then
    print(("RMSE %.4f   log-likelihood %.4f   coverage of the 50/90/95%% intervals %.1f%% / %.1f%% / %.1f%%")
      :format(s.rmse, s.ll, 100 * s.cover50, 100 * s.cover90, 100 * s.cover95))
  else
    print(("accuracy %.2f%%   log-likelihood %.4f   ECE %.4f"):format(100 * s.accuracy, s.ll, s.ece))
  end
  if args.plot then
    local okp, err = pcall(tab.plot, model, p, ds.y, args.plot, ("%s: %s"):format(model.prep.target.name, args.data))
    if not okp then fail("no plot: " .. (tostring(err):gsub("^[^\n]-:%d+: ", ""))) end
    print("plot: " .. args.plot)
  end
elseif args.plot then
  print(("predict.lua: no plot: %s has no column '%s' to compare with"):format(args.data, model.prep.target.name))
end

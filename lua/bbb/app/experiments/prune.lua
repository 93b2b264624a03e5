--- bbb.app.experiments.prune: Weight pruning by signal-to-noise ratio (Blundell et al. 2015, section
-- 5.1): removes growing fractions of a trained Bayesian network's weights,
-- lowest |mu| / sigma first, and reports the test error with posterior means
-- and with an MC ensemble, beside pruning by |mu| alone.
-- scripts/prune.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"

local prune = {}

-- Test error (%) by fraction removed. The paper: Table 2, 2x1200 units,
-- scale-mixture prior. Seed 003: 2x400 units, Gaussian prior, MC test
-- accuracy after 10 epochs of plain SGD (97.75% before pruning).
local PAPER = { [0] = 1.24, [0.5] = 1.24, [0.75] = 1.24, [0.95] = 1.29, [0.98] = 1.39 }
local SEED003 = { [0] = 2.25, [0.1] = 2.23, [0.25] = 2.21, [0.5] = 2.44, [0.75] = 3.98, [0.95] = 27.41,
                  [0.99] = 62.47, [1] = 90.2 }
local DEFAULT_FRACTIONS = "0,0.1,0.25,0.5,0.75,0.9,0.95,0.98,0.99,1"

local fraction = cli.number { min = 0, max = 1 }
local function fraction_list(s)
  local out = {}
  for item in s:gmatch("[^,]+") do
    local v, err = fraction(item)
    if not v then return nil, "--fractions: " .. err end
    out[#out + 1] = v
  end
  if #out == 0 then return nil, "--fractions: expected a comma-separated list of numbers in [0, 1]" end
  table.sort(out)
  return out
end

--- prune.parser() -> the command line of the experiment.
function prune.parser()
  local parser = recipe.parser("prune.lua", "Prune a trained Bayes-by-Backprop network by signal-to-noise "
    .. "ratio |mu|/sigma (and by |mu| as the baseline) and report test error against the fraction "
    .. "of weights removed. Without --from it first trains a model with scripts/mnist.lua.", { outputs = { "out" } })
    :epilog("Writes PREFIX-snr-hist.png (SNR histogram, log scale, with the cut points), "
      .. "PREFIX-error.png (test error against fraction removed) and PREFIX-pruned.ckpt "
      .. "(the model pruned by SNR at --save-fraction).\n"
      .. "Example: bbblua scripts/prune.lua --out out/p -- --preset adam-400 --epochs 20")
  flags.option(parser, "--from", "A checkpoint of a trained Bayesian model (bbb.save, mnist.lua --save).")
  recipe.declare_model_prior(parser)
  flags.option(parser, "--fractions", "Fractions of the weights to remove.", DEFAULT_FRACTIONS)
    :convert(fraction_list)
  flags.option(parser, "--save-fraction", "Fraction for the pruned checkpoint (below 1: a model keeps a weight).", "0.95")
    :convert(cli.number { min = 0, below = 1 })
  recipe.declare(parser, { "test_samples" })
  recipe.declare(parser, { "test_limit" })
  flags.option(parser, "--out", "Prefix of the files written.", "out/prune/run"):convert(cli.output_path())
  recipe.declare(parser, { "threads" })
  recipe.declare(parser, { "seed" })
  parser:argument("mnist_flags", "Without --from: flags for scripts/mnist.lua after --, "
    .. "e.g. -- --preset adam-400 --epochs 20 (default: its defaults).", nil):args("*")
  recipe.declare(parser, { "no_plot" })
  return parser
end

--- prune.parse([argv]) -> args: the command line, checked.
function prune.parse(argv)
  return (recipe.parse(prune.parser(), argv))
end

local function fail(msg, ...) error(msg:format(...), 0) end

-- Without --from: the default model, trained by mnist.lua itself (the one
-- training path); returns its checkpoint's path.
local function train_default(args)
  local from = args.out .. "-model.ckpt"
  local argv = recipe.argv_of{ seed = args.seed, threads = args.threads, save = from }
  table.move(args.mnist_flags, 1, #args.mnist_flags, #argv + 1, argv)
  print("training: mnist " .. table.concat(argv, " "))
  io.stdout:flush()
  local mnist = require "bbb.app.experiments.mnist"
  local r = mnist.run(mnist.parse(argv))
  mnist.report(r)
  if r.status == "interrupted" then recipe.interrupted("prune.lua", r) end
  return from
end

-- The model of checkpoint `from`, refused unless it has Bayesian layers;
-- and the flags it was trained with.
local function load_model(args, from)
  local okl, net, info = pcall(bbb.load, from, { prior = args._prior })
  if not okl then fail("--from: %s", tostring(net):gsub("^[^\n]-:%d+: ", "")) end
  if not net then fail("--from: %s holds no model", from) end
  local has_bayes = false
  net:apply(function(m) if m.weight_rho then has_bayes = true end end)
  if not has_bayes then
    fail("--from: %s has no Bayesian layers (BayesLinear) to prune: %s", from, (tostring(net):gsub("%s+", " ")))
  end
  return net, info.meta.args or {}
end

-- Test errors (%) with posterior means and the MC ensemble, every model
-- sampling from the same generator.
local function errors(args, model, test_set)
  local g = bbb.Generator(args.seed)
  model:apply(function(m) if m.weight_rho then m.generator = g end end)
  local mean = 1 - bbb.train.accuracy(model, test_set)
  local mc = 1 - bbb.train.accuracy(model, test_set, { samples = args.test_samples })
  return 100 * mean, 100 * mc
end

local function ref(t, f)
  for k, v in pairs(t) do if math.abs(k - f) < 1e-9 then return ("%.2f"):format(v) end end
  return "-"
end

-- One fraction's row: pruned by SNR and by |mu|, each tested; the SNR model
-- at --save-fraction is saved.
local function prune_row(args, net, saved, test_set, f)
  local row = { fraction = f }
  for _, by in ipairs { "snr", "magnitude" } do
    local m = net:clone()
    local _, pinfo = bbb.nn.prune(m, { fraction = f, by = by })
    row.kept, row.total = pinfo.kept, pinfo.total
    row[by .. "_mean"], row[by .. "_mc"] = errors(args, m, test_set)
    if by == "snr" and math.abs(f - args.save_fraction) < 1e-12 then
      bbb.save(args.out .. "-pruned.ckpt", { model = m, args = saved })
      row.saved = true
    end
  end
  print(("%-9s %10d | %7.2f%% %7.2f%% | %8.2f%% %7.2f%% | %8s %8s"):format(("%g%%"):format(100 * f),
    row.kept, row.snr_mean, row.snr_mc, row.magnitude_mean, row.magnitude_mc, ref(PAPER, f), ref(SEED003, f)))
  io.stdout:flush()
  return row
end

--- prune.run(args) -> {from, rows, snr, test_samples, out, fractions}: prunes
-- the model by SNR and by |mu| at each fraction, tests each, saves the
-- model pruned by SNR at --save-fraction and the table; rows[i] holds
-- fraction, kept, total and snr_mean, snr_mc, magnitude_mean, magnitude_mc
-- (test errors in %).
function prune.run(args)
  bbb.set_num_threads(args.threads)
  bbb.manual_seed(args.seed)
  local from = args.from or train_default(args)
  local net, saved = load_model(args, from)
  local dataset = saved.dataset or "mnist"
  local pixel_scale = tonumber(saved.pixel_scale) or 126
  local test_set = require("bbb.app.recipe").load_images(dataset, { split = "test", scale = 1 / pixel_scale,
    limit = args.test_limit })
  print(("%s: %s, %d test images, pixels / %g"):format(from, tostring(net):gsub("%s+", " "), test_set.n, pixel_scale))

  -- SNR of every weight before pruning, for the histogram and the cut points
  local snr = bbb.nn.prune_scores(net, "snr")
  local rows, t0 = {}, os.time()
  print(("%-9s %10s | %8s %8s | %8s %8s | %8s %8s"):format("removed", "weights", "SNR mean", "SNR MC",
    "|mu| mean", "|mu| MC", "paper", "seed003"))
  for _, f in ipairs(args.fractions) do rows[#rows + 1] = prune_row(args, net, saved, test_set, f) end
  print(("test error in %%: posterior means and an MC ensemble of %d samples; paper: Table 2 (2x1200, "
    .. "scale mixture); seed003: 2x400 Gaussian prior, MC; %d s"):format(args.test_samples, os.time() - t0))

  local saved_any = false
  for _, r in ipairs(rows) do saved_any = saved_any or r.saved end
  if not saved_any then
    local m = net:clone()
    bbb.nn.prune(m, { fraction = args.save_fraction, by = "snr" })
    bbb.save(args.out .. "-pruned.ckpt", { model = m, args = saved })
  end
  print(("pruned model (%g%% removed by SNR) saved to %s-pruned.ckpt"):format(100 * args.save_fraction, args.out))
  cli.write_file(args.out .. "-table.json", bbb.json.encode{ from = from, test_samples = args.test_samples, environment = bbb.core.environment(),
    rows = rows })
  return { from = from, rows = rows, snr = snr, test_samples = args.test_samples, out = args.out,
           fractions = args.fractions, no_plot = args.no_plot }
end

-- The SNR histogram over log10 bins, with the cut points; the file, or nil
-- when no weight has a positive SNR.
local function snr_histogram(r)
  local lo, hi, logs = math.huge, -math.huge, {}
  for _, v in ipairs(r.snr) do
    if v > 0 then
      local l = math.log(v, 10)
      logs[#logs + 1] = l
      lo, hi = math.min(lo, l), math.max(hi, l)
    end
  end
  if #logs == 0 then return nil end
  local bins = 60
  if hi <= lo then hi = lo + 1 end
  local width = (hi - lo) / bins
  local counts, xs = {}, {}
  for b = 1, bins do counts[b], xs[b] = 0, lo + (b - 0.5) * width end
  for _, l in ipairs(logs) do
    local b = math.min(bins, math.floor((l - lo) / width) + 1)
    counts[b] = counts[b] + 1
  end
  local peak = 0
  for b = 1, bins do peak = math.max(peak, counts[b]) end
  local sorted = table.move(r.snr, 1, #r.snr, 1, {})
  table.sort(sorted)
  local series = { { x = xs, y = counts, title = "weights", style = "lines" } }
  for _, f in ipairs(r.fractions) do
    local k = math.floor(f * #sorted + 0.5)
    if k >= 1 and k < #sorted and sorted[k] > 0 and (f == 0.5 or f == 0.75 or f == 0.9 or f == 0.95 or f == 0.98) then
      local c = math.log(sorted[k], 10)
      series[#series + 1] = { x = { c, c }, y = { 0, peak }, title = ("cut %g%%"):format(100 * f) }
    end
  end
  return require("bbb.app.plot").lines{ file = r.out .. "-snr-hist.png", title = "Signal-to-noise ratio |mu|/sigma of every weight",
    xlabel = "log10 SNR", ylabel = "weights per bin", series = series }
end

--- prune.plot(result): the SNR histogram and the test error against the
-- fraction removed (not with --no-plot).
function prune.plot(r)
  if r.no_plot then return end
  local hist = snr_histogram(r)
  if hist then print("wrote " .. hist) end
  local xs, snr_err, mag_err = {}, {}, {}
  local all_positive = true
  for i, row in ipairs(r.rows) do
    xs[i], snr_err[i], mag_err[i] = 100 * row.fraction, row.snr_mc, row.magnitude_mc
    all_positive = all_positive and row.snr_mc > 0 and row.magnitude_mc > 0
  end
  local file = require("bbb.app.plot").lines{ file = r.out .. "-error.png", title = "Test error after pruning",
    xlabel = "weights removed (%)", ylabel = "test error, MC ensemble (%)", logy = all_positive,
    series = { { x = xs, y = snr_err, title = "by SNR |mu|/sigma", style = "linespoints" },
               { x = xs, y = mag_err, title = "by |mu|", style = "linespoints" } } }
  print("wrote " .. file)
end

return prune

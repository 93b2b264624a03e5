--- The pictures of a training run: what scripts/plot_run.lua runs. Curves
-- from its JSONL log and, from a checkpoint, histograms of the posterior's
-- means, standard deviations and signal-to-noise ratios per Bayesian layer.
-- run(config) reads the run, plot(result) draws it; every failure is a
-- message (exit status 1, as for a log or checkpoint that cannot be read).
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local json = require "bbb.json"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"

local M = {}

--- parser() -> plot_run.lua's command line.
function M.parser()
  local parser = recipe.parser("plot_run.lua", "Plot a training run: ELBO, complexity and NLL per "
    .. "example and train/validation/test accuracy against epochs from the JSONL log that "
    .. "--log wrote; with a checkpoint, histograms of mu, sigma and |mu|/sigma per layer.", {})
  parser:argument("log", "The run's JSONL log (scripts/mnist.lua --log).")
  parser:argument("checkpoint", "A checkpoint of the model (optional).")
    :args("?")
  flags.option(parser, "--out", "Prefix of the PNG files (default: out/<log name>).")
    :convert(function(s)
      if s == "" or s:sub(-1) == "/" then return nil, "--out: expected a file name prefix, got '" .. s .. "'" end
      return s
    end)
  flags.option(parser, "--bins", "Histogram bins.", "60"):convert(cli.positive_integer { max = 10000 })
  recipe.declare_model_prior(parser)
  return parser
end

--- parse([argv]) -> config: the command line, checked.
function M.parse(argv)
  return cli.parse(M.parser(), argv or arg)
end

local function fail(msg, ...) error(msg:format(...), 0) end

-- The log: one JSON object per line; a line that does not parse is skipped
-- with a warning (a run killed while writing leaves at most one). A resumed
-- run logs again the epochs after its checkpoint: the last record of an
-- epoch is the one kept. -> the records, in the order of their epochs.
local function read_log(path)
  do   -- a FIFO would block the open, a device never end
    local kind = require("bbb.core").sys.kind(path, true)
    if not kind then fail("cannot open %s: no such file", path) end
    if kind ~= "file" then fail("cannot open %s: it is a %s, not a file", path, kind) end
  end
  local f, err = io.open(path, "r")
  if not f then fail("cannot open %s", err) end
  local by_epoch, n_line = {}, 0
  for line in f:lines() do
    n_line = n_line + 1
    if line:match("%S") then
      local ok, rec = pcall(json.decode, line, ("%s line %d"):format(path, n_line))
      if ok and type(rec) == "table" and tonumber(rec.epoch) then
        by_epoch[tonumber(rec.epoch)] = rec
      else
        io.stderr:write(("plot_run.lua: skipping line %d of %s: %s\n"):format(n_line, path,
          ok and "not an epoch record" or tostring(rec)))
      end
    end
  end
  f:close()
  local recs = {}
  for _, rec in pairs(by_epoch) do recs[#recs + 1] = rec end
  table.sort(recs, function(a, b) return tonumber(a.epoch) < tonumber(b.epoch) end)
  if #recs == 0 then fail("%s holds no epoch records", path) end
  return recs
end

-- The curves of the records that hold them, one per {key, title}; each
-- value times scale.
local function curves(recs, which, scale)
  local out = {}
  for _, s in ipairs(which) do
    local x, y = {}, {}
    for _, r in ipairs(recs) do
      local v = tonumber(r[s[1]])
      if v then x[#x + 1], y[#y + 1] = tonumber(r.epoch), scale * v end
    end
    if #y > 0 then out[#out + 1] = { x = x, y = y, title = s[2], style = "linespoints" } end
  end
  return out
end

--- run(config) -> result: the model of the checkpoint (first: one that
-- cannot be opened is refused before any plot) and the log's curves;
-- result holds log, checkpoint, model, prefix (of the files), bins, losses
-- and accs (the series plot draws).
function M.run(args)
  local model
  if args.checkpoint then
    local ok, m = pcall(bbb.load, args.checkpoint, { prior = args.prior })
    if not ok then fail("%s", tostring(m):gsub("^[^\n]-:%d+: ", "")) end
    model = m
  end
  local prefix = args.out or ("out/" .. args.log:match("([^/]*)$"):gsub("%.[^.]*$", ""))
  local recs = read_log(args.log)
  return { log = args.log, checkpoint = args.checkpoint, model = model, prefix = prefix, bins = args.bins,
    losses = curves(recs, { { "elbo_per_example", "-ELBO per example" },
      { "complexity_per_example", "complexity per example" }, { "nll_per_example", "NLL per example" } }, 1),
    accs = curves(recs, { { "train_acc", "train (last MC sample)" }, { "val_acc", "validation (posterior mean)" },
      { "test_acc", "test (posterior mean)" } }, 100) }
end

-- The weights of each Bayesian layer of the model: mu, log10 sigma and the
-- SNR in dB, a histogram series each.
local function posterior_series(model)
  local mus, sigmas, snrs = {}, {}, {}
  local k = 0
  model:apply(function(l)
    if l.weight_mu and l.weight_rho then
      k = k + 1
      local name = ("layer %d (%d -> %d)"):format(k, l.n_in, l.n_out)
      local sigma = l.weight_rho:softplus()
      mus[#mus + 1] = { values = l.weight_mu, title = name }
      sigmas[#sigmas + 1] = { values = sigma:log() * (1 / math.log(10)), title = name }
      snrs[#snrs + 1] = { values = (l.weight_mu:abs() / sigma + 1e-30):log() * (10 / math.log(10)), title = name }
    end
  end)
  return k, mus, sigmas, snrs
end

--- plot(result): the loss and accuracy curves, and with a checkpoint the
-- posterior's histograms, as PNGs named from result.prefix; prints each
-- file written. Raises a message when the checkpoint has no Bayesian layer.
function M.plot(result)
  local plot = require "bbb.app.plot"
  local prefix, log, written = result.prefix, result.log, {}
  local positive = true
  for _, c in ipairs(result.losses) do for _, v in ipairs(c.y) do positive = positive and v > 0 end end
  written[#written + 1] = plot.lines{ file = prefix .. "-loss.png", title = "Training objective per example (" .. log .. ")",
    xlabel = "epoch", ylabel = positive and "nats per example (log scale)" or "nats per example",
    logy = positive, series = result.losses }
  if #result.accs > 0 then
    written[#written + 1] = plot.lines{ file = prefix .. "-accuracy.png", title = "Accuracy (" .. log .. ")",
      xlabel = "epoch", ylabel = "accuracy (%)", series = result.accs }
  end
  if result.model then
    local k, mus, sigmas, snrs = posterior_series(result.model)
    if k == 0 then fail("%s has no Bayesian layers to show", result.checkpoint) end
    local bins = result.bins
    written[#written + 1] = plot.histogram{ file = prefix .. "-mu.png", title = "Posterior means of the weights",
      xlabel = "mu", ylabel = "density", density = true, bins = bins, series = mus }
    written[#written + 1] = plot.histogram{ file = prefix .. "-sigma.png",
      title = "Posterior standard deviations of the weights", xlabel = "log10 sigma", ylabel = "density",
      density = true, bins = bins, series = sigmas }
    written[#written + 1] = plot.histogram{ file = prefix .. "-snr.png",
      title = "Signal-to-noise ratio |mu|/sigma of the weights", xlabel = "SNR (dB) = 10 log10(|mu|/sigma)",
      ylabel = "density", density = true, bins = bins, series = snrs }
  end
  for _, file in ipairs(written) do print("wrote " .. file) end
  return written
end

return M

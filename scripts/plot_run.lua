--- Pictures of a training run: curves from its JSONL log and, from a
-- checkpoint, histograms of the posterior's means, standard deviations and
-- signal-to-noise ratios per Bayesian layer.
-- bbblua scripts/plot_run.lua RUN.jsonl [CKPT] [--out PREFIX]
local bbb = require "bbb"
local argparse = require "argparse"
local cli = require "bbb.app.cli"
local json = require "bbb.json"

local parser = argparse("plot_run.lua", "Plot a training run: ELBO, complexity and NLL per "
  .. "example and train/validation/test accuracy against epochs from the JSONL log that "
  .. "--log wrote; with a checkpoint, histograms of mu, sigma and |mu|/sigma per layer.")
parser:argument("log", "The run's JSONL log (scripts/mnist.lua --log).")
parser:argument("checkpoint", "A checkpoint of the model (optional).")
  :args("?")
parser:option("--out", "Prefix of the PNG files (default: out/<log name>).")
  :convert(function(s)
    if s == "" or s:sub(-1) == "/" then return nil, "--out: expected a file name prefix, got '" .. s .. "'" end
    return s
  end)
parser:option("--bins", "Histogram bins.", "60"):convert(cli.positive_integer { max = 10000 })
require("bbb.app.recipe").declare_model_prior(parser)
local args = cli.parse(parser)

local function fail(msg, ...)
  io.stderr:write("plot_run.lua: ", msg:format(...), "\n")
  os.exit(1)
end

-- The model first: a checkpoint that cannot be opened is refused before any plot.
local model
if args.checkpoint then
  local ok, m = pcall(bbb.load, args.checkpoint, { prior = args.prior })
  if not ok then fail("%s", tostring(m):gsub("^[^\n]-:%d+: ", "")) end
  model = m
end

local prefix = args.out or ("out/" .. args.log:match("([^/]*)$"):gsub("%.[^.]*$", ""))

-- The log: one JSON object per line; a line that does not parse is skipped
-- with a warning (a run killed while writing leaves at most one). A resumed
-- run logs again the epochs after its checkpoint: the last record of an
-- epoch is the one kept.
do   -- a FIFO would block the open, a device never end
  local kind = require("bbb.core").sys.kind(args.log, true)
  if not kind then fail("cannot open %s: no such file", args.log) end
  if kind ~= "file" then fail("cannot open %s: it is a %s, not a file", args.log, kind) end
end
local f, err = io.open(args.log, "r")
if not f then fail("cannot open %s", err) end
local by_epoch, n_line = {}, 0
for line in f:lines() do
  n_line = n_line + 1
  if line:match("%S") then
    local ok, rec = pcall(json.decode, line, ("%s line %d"):format(args.log, n_line))
    if ok and type(rec) == "table" and tonumber(rec.epoch) then
      by_epoch[tonumber(rec.epoch)] = rec
    else
      io.stderr:write(("plot_run.lua: skipping line %d of %s: %s\n"):format(n_line, args.log,
        ok and "not an epoch record" or tostring(rec)))
    end
  end
end
f:close()
local recs = {}
for _, rec in pairs(by_epoch) do recs[#recs + 1] = rec end
table.sort(recs, function(a, b) return tonumber(a.epoch) < tonumber(b.epoch) end)
if #recs == 0 then fail("%s holds no epoch records", args.log) end

local function column(key)
  local x, y = {}, {}
  for _, r in ipairs(recs) do
    local v = tonumber(r[key])
    if v then x[#x + 1], y[#y + 1] = tonumber(r.epoch), v end
  end
  return #y > 0 and { x = x, y = y } or nil
end

local written = {}
local function add(file) written[#written + 1] = file end

local losses = {}
for _, s in ipairs { { "elbo_per_example", "-ELBO per example" }, { "complexity_per_example", "complexity per example" },
                     { "nll_per_example", "NLL per example" } } do
  local c = column(s[1])
  if c then c.title, c.style = s[2], "linespoints"; losses[#losses + 1] = c end
end
local positive = true
for _, c in ipairs(losses) do for _, v in ipairs(c.y) do positive = positive and v > 0 end end
add(require("bbb.app.plot").lines{ file = prefix .. "-loss.png", title = "Training objective per example (" .. args.log .. ")",
  xlabel = "epoch", ylabel = positive and "nats per example (log scale)" or "nats per example",
  logy = positive, series = losses })

local accs = {}
for _, s in ipairs { { "train_acc", "train (last MC sample)" }, { "val_acc", "validation (posterior mean)" },
                     { "test_acc", "test (posterior mean)" } } do
  local c = column(s[1])
  if c then
    for i, v in ipairs(c.y) do c.y[i] = 100 * v end
    c.title, c.style = s[2], "linespoints"
    accs[#accs + 1] = c
  end
end
if #accs > 0 then
  add(require("bbb.app.plot").lines{ file = prefix .. "-accuracy.png", title = "Accuracy (" .. args.log .. ")",
    xlabel = "epoch", ylabel = "accuracy (%)", series = accs })
end

if model then
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
  if k == 0 then fail("%s has no Bayesian layers to show", args.checkpoint) end
  add(require("bbb.app.plot").histogram{ file = prefix .. "-mu.png", title = "Posterior means of the weights",
    xlabel = "mu", ylabel = "density", density = true, bins = args.bins, series = mus })
  add(require("bbb.app.plot").histogram{ file = prefix .. "-sigma.png", title = "Posterior standard deviations of the weights",
    xlabel = "log10 sigma", ylabel = "density", density = true, bins = args.bins, series = sigmas })
  add(require("bbb.app.plot").histogram{ file = prefix .. "-snr.png", title = "Signal-to-noise ratio |mu|/sigma of the weights",
    xlabel = "SNR (dB) = 10 log10(|mu|/sigma)", ylabel = "density", density = true, bins = args.bins,
    series = snrs })
end

for _, file in ipairs(written) do print("wrote " .. file) end

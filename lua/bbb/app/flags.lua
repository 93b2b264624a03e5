--- bbb.app.flags: the registry of the scripts' command-line flags.
-- A flag is declared one way. A shared flag (below: one help, one default,
-- one check) is declared by name through recipe.parser or recipe.declare; a
-- script may replace its default there, in the open. A flag only one script
-- has is declared through flags.option or flags.flag, which refuse a shared
-- name. The flags spec reads every script and holds the line: no parser
-- call outside this registry, and a name that two scripts declare on their
-- own is either made shared here or listed in flags.DISTINCT with what it
-- means in each. Old spellings are refused with a pointer (flags.RENAMED).
-- A default given as a function is computed when a parser is built, never
-- when this module loads.
local cli = require "bbb.app.cli"

local flags = {}
local SHARED = {}
flags.SHARED = SHARED

local E = math.exp

-- name: the Lua key (underscores); the flag is --name with dashes.
local function def(name, help, default, convert, extra)
  local f = extra or {}
  f.name, f.help, f.default, f.convert = name, help, default, convert
  f.long = "--" .. name:gsub("_", "-")
  if SHARED[name] then error("flags: --" .. name .. " defined twice", 2) end
  SHARED[name] = f
end

-- A prior: a built-in name, or a Lua file that returns one.
local function prior_choice()
  local kinds = {}
  for i, k in ipairs(require("bbb.core").prior_kinds()) do kinds[i] = k.kind end
  local builtin = cli.choice(kinds)
  return function(s)
    if type(s) == "string" and s:find("%.lua$") then return s end
    local v, err = builtin(s)
    if v == nil then return nil, err .. " (or a .lua file returning a prior)" end
    return v
  end
end

-- The run
def("seed", "Random seed.", "1", function() return cli.integer() end)
def("threads", "Threads for GEMM and elementwise passes (every count gives the same numbers; default: the "
  .. "cores).", function() return tostring(require("bbb.app.sys").nproc()) end,
  function() return cli.threads() end)
def("epochs", "Training epochs.", "30", function() return cli.nonnegative_integer { max = 100000 } end)
def("batch", "Minibatch size.", "128", function() return cli.positive_integer() end)
-- Data
def("dataset", "mnist or fashion.", "mnist", function() return cli.choice { "mnist", "fashion" } end)
def("pixel_scale", "Divide pixels by this (the paper: 126).", "126",
  function() return cli.positive_number { max = 1e9 } end)
def("val", "Hold out the last N training images for validation.", nil, function() return cli.positive_integer() end)
def("val_fraction", "Share of the training rows held out for early stopping.", "0.1",
  function() return cli.number { above = 0, below = 1 } end)
def("limit", "Use only the first N training images (smoke runs).", nil, function() return cli.positive_integer() end)
def("test_limit", "Use only the first N test images.", nil, function() return cli.positive_integer() end)
def("no_test", "Read no test image: train and report on the --val images only, as a recipe is chosen (grid.lua: "
  .. "its --final run still tests the configuration chosen).", nil, nil, { flag = true })
-- The network
def("hidden", "Units per hidden layer.", "400", function() return cli.positive_integer { max = 1 << 16 } end)
def("layers", "Hidden layers.", "2", function() return cli.positive_integer { max = 64 } end)
def("activation", "relu, sigmoid or tanh.", "relu", function() return cli.choice { "relu", "sigmoid", "tanh" } end)
def("dropout", "Dropout probability of the dropout model.", "0.5", function() return cli.number { min = 0, below = 1 } end)
def("rho_init", "Initial rho (sigma = softplus(rho)).", "-5", function() return cli.number { min = -100, max = 20 } end)
def("mu_init", "Initial means uniform in [-s, s] (default 1/sqrt(fan-in)).", nil,
  function() return cli.nonnegative_number() end)
def("estimator", "weight (one weight sample per minibatch), local (local reparameterization) or flipout.",
  "weight", function() return cli.choice { "weight", "local", "flipout" } end)
-- The prior
def("prior", "Prior: mixture, gaussian, laplace, or a Lua file returning a prior (as examples/priors/student_t.lua).",
  "mixture", prior_choice)
def("pi", "Mixture weight of the wide component.", "0.25", function() return cli.probability() end)
def("sigma1", "Wide component's sigma (gaussian: its sigma; laplace: its scale b).", "1",
  function() return cli.positive_number() end)
def("sigma2", "Narrow component's sigma (default e^-7).", tostring(E(-7)), function() return cli.positive_number() end)
def("prior_sigma", "Sigma of the Gaussian prior.", "0.1", function() return cli.positive_number() end)
-- The free energy
def("samples", "MC samples per minibatch in training.", "1", function() return cli.positive_integer { max = 1000 } end)
def("kl_weight", "Weight of each minibatch's complexity term: uniform (1/M), blundell (2^(M-i)/(2^M-1)) "
  .. "or a number >= 0.", "uniform", function() return cli.choice_or_number({ "uniform", "blundell" }, { min = 0 }) end)
def("kl", "Complexity term: mc (log q - log p at the sample) or analytic (Gaussian prior only).", "mc",
  function() return cli.choice { "mc", "analytic" } end)
def("reduction", "mean (loss per example) or sum (summed over the minibatch).", "mean",
  function() return cli.choice { "mean", "sum" } end)
def("test_samples", "MC samples (weight draws) per prediction.", "10", function() return cli.positive_integer { max = 100000 } end)
-- The optimizer
def("optim", "adam, sgd or rmsprop.", "adam", function() return cli.choice { "adam", "sgd", "rmsprop" } end)
def("lr", "Learning rate.", "0.001", function() return cli.positive_number { max = 1e6 } end)
def("lr_decay", "Learning rate multiplied by this after each epoch.", "0.95",
  function() return cli.positive_number { max = 10 } end)
def("momentum", "SGD momentum.", "0.9", function() return cli.number { min = 0, below = 1 } end)
def("rho_lr_scale", "The learning rate of every rho (sigma = softplus(rho)) is --lr times this.", "1",
  function() return cli.positive_number { max = 1e6 } end)
-- Outputs
def("log", "Append one JSON line per epoch to this file (flushed each epoch).", nil,
  function() return cli.output_path { ext = { "jsonl", "json", "log" } } end, { output = true })
def("checkpoint", "Write the training state here (every --checkpoint-every epochs, at the end and on "
  .. "Ctrl-C or SIGTERM).", nil, function() return cli.output_path() end, { output = true })
def("checkpoint_every", "Epochs between checkpoints.", "1", function() return cli.positive_integer() end)
def("resume", "Continue the run saved in this checkpoint (same flags, or none).", nil, nil)
def("save", "Write the trained model as a checkpoint (safetensors) here.", nil,
  function() return cli.output_path() end, { output = true })
def("summary", "Write the run's figures (the scores; for training, the per-epoch history too) as JSON here.", nil,
  function() return cli.output_path { ext = { "json" } } end, { output = true })
def("distributed", "Data-parallel training over MPI: mpirun -np N bbblua SCRIPT --distributed. Each rank "
  .. "takes a shard of every global batch (--batch is the global size); rank 0 prints, logs and writes "
  .. "checkpoints.", nil, nil, { flag = true })
def("plot", "PNG: predicted vs observed with 95% intervals, or the calibration curve (needs the target).", nil,
  function() return cli.output_path { ext = { "png", "svg" } } end, { output = true })
def("json", "Also write the figures as JSON here (what the tests read).", nil,
  function() return cli.output_path { ext = { "json" } } end, { output = true })
def("no_plot", "Skip the figures.", nil, nil, { flag = true })
-- Tables (fit.lua, predict.lua, reference.lua)
def("target", "The column to predict.", nil, nil, { count = 1 })
def("delimiter", "The CSV delimiter of --data (one character).", ",", nil)
def("ignore", "A column to leave out (repeat for more).", nil, nil, { count = "*" })
def("missing", "A missing cell: impute (a number gets the training median plus a column saying it was missing, "
  .. "a category no level; a saved model imputes as it was trained to), drop (leave the row out) or error.", "impute",
  function() return cli.choice { "impute", "drop", "error" } end)
def("unseen", "A category the training rows never held: warn (read as no level, with a count) or error.", "warn",
  function() return cli.choice { "warn", "error" } end)
def("test_fraction", "Share of rows held out for the test.", "0.1", function() return cli.number { min = 0, below = 1 } end)
def("split", "Take the train/validation/test rows from this file (JSON, as fit.lua --save-split writes it).", nil, nil)
def("patience", "Stop after this many epochs without a better (smoothed) validation log-likelihood.", "100",
  function() return cli.positive_integer { max = 1000000 } end)
def("no_refit", "Keep the net trained on the training rows, early-stopped on the validation rows, instead of "
  .. "training a second net on both for the epochs the first chose.", nil, nil, { flag = true })
def("weight_decay", "Adam's weight decay of the non-Bayesian nets (mlp, dropout).", "0",
  function() return cli.nonnegative_number() end)
-- Several nets
def("members", "Nets in an ensemble.", "5", function() return cli.integer { min = 2, max = 100 } end)
def("jobs", "Processes at a time (each its own training run, chain or agent; default: the cores).",
  function() return tostring(require("bbb.app.sys").nproc()) end, function() return cli.positive_integer { max = 256 } end)
def("noise_n", "Images in each noise set (out-of-distribution detection).", "1000",
  function() return cli.positive_integer { max = 1000000 } end)
def("select", "What ranks the configurations: val-error (the validation error after the last epoch) or "
  .. "val-error-min (the lowest validation error over the epochs, i.e. early stopping; the results then hold "
  .. "that epoch and its test error).", "val-error", function() return cli.choice { "val-error", "val-error-min" } end)
def("reps", "Timed repetitions per measurement; the median is reported (1..1000).", "20",
  function() return cli.integer { min = 1, max = 1000 } end)
def("debug", "Show a Lua traceback with errors.", nil, nil, { flag = true })


--- flags.RENAMED: old spelling -> the flag that replaced it. A command line
-- with an old spelling is refused with a pointer, never read as the new.
flags.RENAMED = {
  ["--pred-samples"] = "--test-samples",
}

--- flags.DISTINCT: names that two scripts declare on their own for different
-- ideas, with what each means; any other name two scripts share must be a
-- shared flag. The flags spec holds every own flag to this.
flags.DISTINCT = {
  ["--checkpoint-every"] = "bandit: steps between a run's checkpoints (0: none); elsewhere: epochs between them",
  ["--data"] = "fit, predict, reference: a table (CSV or FOLDER:NAME); bandit scripts: the Mushroom .rda file",
  ["--from"] = "figure2: table1's rows (JSON); prune: a checkpoint; shift: a folder of trained models",
  ["--halving"] = "grid: turns successive halving on (its ETA); table1: the paper protocol's ETA (always on)",
  ["--hidden"] = "fit, reference: a comma list of widths, one per layer (the shared --hidden is one width "
    .. "for --layers layers)",
  ["--kl"] = "bandit: the complexity term's divisor (size, capacity, seen, blundell); elsewhere: how the "
    .. "complexity term is computed (mc or analytic)",
  ["--methods"] = "each experiment's own list of methods",
  ["--min-epochs"] = "fit: never stop early before this; grid, table1: the epochs of halving's first rung",
  ["--model"] = "fit, mnist, shift: the kind of net to train; predict: the checkpoint to predict with",
  ["--noise-sigma"] = "regression: fixes the likelihood's sd; reference: the sd, or infer to sample it",
  ["--out"] = "each script's output: a folder, a file or a prefix of files, as its help says",
  ["--results"] = "grid: the results of its configurations; bandit_ablation: its finished runs",
  ["--resume"] = "bandit: a switch, each run goes on from its own checkpoint; elsewhere: the checkpoint file "
    .. "to go on from",
  ["--rows"] = "bandit_ablation: the table's rows to run; bench_csv: the rows of the timed file",
  ["--seeds"] = "shift: how many seeds from --seed; bandit_ablation: a comma list of seeds",
  ["--sets"] = "ood: the out-of-distribution sets; uci: the data sets",
  ["--steps"] = "bandit scripts: bandit steps per run; benchmarks: timed steps",
  ["--task"] = "fit, reference: regression or classification; regression: the 1-d task (toy, paper, sine)",
  ["--units"] = "table1: the widths to run, a list (a row each); figure2: the width of its nets",
  ["--updates"] = "bandit: minibatch updates after each step; bench_bandit: timed updates",
}

-- The script a parser belongs to (recipe.parser names it).
local function owner(parser)
  return parser._bbb_script or error("flags: the parser was not made by recipe.parser", 3)
end

local function check_own(parser, names)
  local script = owner(parser)
  local long = names:match("%-%-[%w%-]+") or names
  if SHARED[long:sub(3):gsub("-", "_")] and not flags.DISTINCT[long] then
    error(("flags: %s declares %s, a shared flag: declare it by name (recipe.declare)"):format(script, long), 3)
  end
end

--- flags.option(parser, names, help [, default]) -> the argparse option
-- (chain :convert, :count, :args on it): a flag of one script.
function flags.option(parser, names, help, default)
  check_own(parser, names)
  return parser:option(names, help, default)
end

--- flags.flag(parser, names, help) -> the argparse flag: a script's own
-- switch.
function flags.flag(parser, names, help)
  check_own(parser, names)
  return parser:flag(names, help)
end

--- flags.axis(parser, name, help [, default]) -> the argparse option: a
-- search axis (grid.lua, table1.lua), a comma list of values. An axis over
-- a shared flag keeps its name: it is the same idea, searched.
function flags.axis(parser, name, help, default)
  local long = "--" .. name:gsub("_", "-")
  if not SHARED[name] then check_own(parser, long) else owner(parser) end
  return parser:option(long, help, default)
end

--- flags.build(parser, name [, default]): declares the shared flag name on
-- parser; default (false: none) replaces the registry's for this script.
function flags.build(parser, name, default, alias)
  local f = SHARED[name] or error(("flags: no shared flag %s"):format(tostring(name)), 2)
  if f.flag then return parser:flag(f.long, f.help) end
  if default == nil then default = f.default end
  if type(default) == "function" then default = default() end
  local o = parser:option(f.long .. (alias and (" " .. alias) or ""), f.help, default or nil)
  if f.convert then o:convert(f.convert()) end
  if f.count then o:count(f.count) end
  return o
end

--- flags.check_renamed(argv) -> nil or the message for the first old
-- spelling on argv ("--pred-samples is now --test-samples").
function flags.check_renamed(argv)
  for _, w in ipairs(argv or {}) do
    if w == "--" then return nil end
    local name = type(w) == "string" and w:match("^(%-%-[%w%-]+)")
    if name and flags.RENAMED[name] then
      return ("%s is now %s (one name per idea)"):format(name, flags.RENAMED[name])
    end
  end
  return nil
end

return flags

--- The scripts, their flags and what each flag takes, written here from
-- the scripts' --help rather than read from the code under test, so the same
-- cases run against any build. Each script has small-work flags (few images,
-- one epoch), so a value accepted by mistake ends soon, as "silent".

local INT = { "abc", "", "nan", "inf", "1.5", "-1", "1e400", "3abc", "0x", "1 2" }
local POS_INT = { "0", table.unpack(INT) }
local SEED = { "abc", "", "nan", "inf", "1.5", "1e400", "3abc", "0x", "1 2" }
local NUM = { "abc", "", "nan", "inf", "-inf", "1e400", "3abc", "1..2", "0x" }
local NONNEG = { "-1", "-1e-3", table.unpack(NUM) }
local POS = { "0", "-1", table.unpack(NUM) }
local PROB = { "1.5", "-0.1", "2", table.unpack(NUM) }
local CHOICE = { "nope", "", "x y" }
local LIST = { "", ",", "nope", "a,,b" }
local NUM_LIST = { "", ",", "abc", "1,abc", "nan", "1,,2", "inf" }
local IN = { "fx/missing.file", "fx/dir", "fx/fifo", "/dev/zero", "fx/empty", "fx/garbage", "" }
local OUT = { "fx/fifo", "/dev/zero", "fx/precious.txt/sub/x.out", "", "fx/dir" }
local PREFIX = { "", "fx/precious.txt/sub/x" }

local KINDS = {
  int = INT, pos_int = POS_INT, seed = SEED, num = NUM, nonneg = NONNEG, pos = POS, prob = PROB,
  choice = CHOICE, list = LIST, num_list = NUM_LIST, input = IN, output = OUT, prefix = PREFIX,
}

-- What each flag takes, by name; SCRIPTS below overrides where a script
-- gives a name another meaning.
local FLAG = {
  seed = "seed", threads = "pos_int", epochs = "int", samples = "pos_int", hidden = "pos_int", batch = "pos_int",
  limit = "pos_int", ["test-limit"] = "pos_int", ["test-samples"] = "pos_int", ["test-samples"] = "pos_int",
  jobs = "pos_int", layers = "pos_int", splits = "pos_int", repeats = "pos_int", probes = "pos_int",
  ["noise-n"] = "pos_int", ["mlp-hidden"] = "pos_int", ["mlp-layers"] = "pos_int", ["decide-samples"] = "pos_int",
  ["cnn-hidden"] = "pos_int", chunk = "pos_int", bins = "pos_int", ["base-hidden"] = "pos_int", steps = "pos_int",
  seeds = "pos_int", ["final-threads"] = "pos_int", updates = "pos_int", top = "pos_int", ["min-epochs"] = "pos_int",
  n = "pos_int", val = "int", shift = "int", patience = "int", ["checkpoint-every"] = "int", every = "int",
  buffer = "pos_int", refit = "pos_int", ["mlp-epochs"] = "int", ["final-epochs"] = "pos_int", ["base-epochs"] = "int",
  round = "pos_int", ["sigma-steps"] = "int", halving = "pos_int",
  lr = "pos", sigma1 = "pos", sigma2 = "pos", ["prior-sigma"] = "pos", ["noise-sigma"] = "pos",
  ["pixel-scale"] = "pos", ["mlp-lr"] = "pos", sigma = "pos", ["sigma-final"] = "pos", ["prior-sigma-in"] = "pos",
  ["lr-decay"] = "pos", ["base-lr-decay"] = "pos", ["rho-lr-scale"] = "pos",
  ["kl-weight"] = "nonneg", ["weight-decay"] = "nonneg", momentum = "nonneg", beta = "nonneg",
  ["rho-init"] = "num", ["mu-init"] = "num",
  pi = "prob", dropout = "prob", ["val-fraction"] = "prob", ["test-fraction"] = "prob", ["save-fraction"] = "prob",
  ["prior-mix"] = "prob",
  preset = "choice", dataset = "choice", model = "choice", activation = "choice", estimator = "choice",
  reduction = "choice", optim = "choice", task = "choice", schedule = "choice", kl = "choice", band = "choice",
  ["band-of"] = "choice", protocol = "choice", select = "choice", ["noise-model"] = "choice",
  ["mlp-optim"] = "choice", ["base-activation"] = "choice",
  methods = "list", sets = "list", agents = "list", rows = "list", channels = "num_list", fractions = "num_list",
  xrange = "num_list", yrange = "num_list", units = "num_list",
  data = "input", prior = "input", from = "input", test = "input", resume = "input", ["from-bbb"] = "input",
  ["from-mlp"] = "input", ["from-dropout"] = "input", ["causes-from"] = "input",
  log = "output", checkpoint = "output", save = "output", curves = "output", summary = "output", plot = "output",
  results = "output", out = "output", dir = "prefix", ["save-models"] = "prefix",
}

local SMALL_MNIST = { "--limit", "200", "--test-limit", "100", "--hidden", "8", "--threads", "1", "--test-samples", "1",
  "--epochs", "1" }
-- base: small-work flags; flags: the flags the script takes (from --help);
-- kinds: this script's own meaning of a name.
local SCRIPTS = {
  mnist = { base = SMALL_MNIST, flags = "preset dataset model shift cnn-hidden channels hidden layers activation dropout prior pi sigma1 sigma2 samples estimator kl-weight reduction optim lr lr-decay momentum rho-init rho-lr-scale mu-init batch epochs seed threads test-samples pixel-scale val limit test-limit log checkpoint checkpoint-every resume save curves summary" },
  ood = { base = { "--limit", "200", "--test-limit", "100", "--hidden", "8", "--base-hidden", "8", "--epochs", "1",
      "--base-epochs", "1", "--noise-n", "50", "--threads", "1", "--test-samples", "1", "--out", "ood/o" },
    flags = "preset dataset sets from-bbb from-mlp from-dropout noise-n test-samples hidden layers activation prior pi sigma1 sigma2 rho-init mu-init reduction epochs lr lr-decay batch base-hidden base-activation base-epochs base-lr-decay dropout pixel-scale limit test-limit chunk seed threads out save-models",
    kinds = { out = "prefix" } },
  regression = { base = { "--task", "toy", "--steps", "3", "--no-plot", "--no-mlp", "--threads", "1" },
    flags = "preset task n epochs steps optim lr schedule activation layers hidden samples prior-sigma noise-sigma mu-init rho-init kl kl-weight beta band band-of test-samples xrange yrange mlp-layers mlp-hidden mlp-optim mlp-lr mlp-epochs seed threads out log" },
  grid = { base = { "--epochs", "1", "--limit", "100", "--val", "50", "--hidden", "8", "--jobs", "1", "--lr", "0.001",
      "--pi", "0.25", "--log-sigma1", "0", "--log-sigma2", "6", "--samples", "1", "--results", "grid/g.jsonl" },
    flags = "lr pi log-sigma1 log-sigma2 samples kl-weight optim epochs val hidden limit seed jobs results top halving min-epochs select final-epochs final-threads",
    kinds = { lr = "num_list", pi = "num_list", ["log-sigma1"] = "num_list", ["log-sigma2"] = "num_list",
      samples = "num_list", ["kl-weight"] = "list", optim = "list" } },
  prune = { base = { "--from", "fx/mnist.ckpt", "--test-limit", "100", "--no-plot", "--threads", "1", "--out", "prune/p" },
    flags = "from prior fractions save-fraction test-samples test-limit out threads seed", kinds = { out = "prefix" } },
  table1 = { base = { "--epochs", "1", "--limit", "200", "--threads", "1", "--jobs", "1", "--methods", "sgd", "--out", "t1/t.json" },
    flags = "units methods epochs threads seed protocol halving min-epochs jobs select lr samples limit out" },
  bandit = { base = { "--steps", "5", "--repeats", "1", "--jobs", "1", "--no-plot", "--agents", "eps5", "--out", "bandit_out" },
    flags = "agents steps updates batch buffer lr sigma sigma-final sigma-steps noise-model prior-sigma prior-sigma-in prior-mix rho-init kl decide-samples dropout refit seed repeats jobs out data checkpoint-every",
    kinds = { out = "prefix", ["prior-sigma-in"] = "nonneg" } },   -- 0: the input layer takes --prior-sigma
  figure2 = { base = { "--epochs", "1", "--limit", "200", "--test-limit", "100", "--threads", "1", "--units", "8",
      "--round", "1", "--val", "50", "--dir", "f2" },
    flags = "units methods epochs round from val seed threads limit test-limit dir", kinds = { units = "pos_int" } },
  fit = { base = { "--data", "fx/small.csv", "--target", "y", "--epochs", "2", "--threads", "1" },
    flags = "data target task test test-fraction val-fraction ignore categorical delimiter model estimator hidden epochs patience batch lr samples prior-sigma rho-init dropout kl-weight weight-decay test-samples every seed threads save plot",
    kinds = { target = "column", ignore = "column", categorical = "column", delimiter = "delimiter", hidden = "num_list" } },
  predict = { base = { "--model", "fx/model.ckpt", "--data", "fx/small.csv", "--threads", "1", "--out", "pred/p.csv" },
    flags = "model data out delimiter test-samples seed threads plot", kinds = { model = "input", delimiter = "delimiter" } },
  uci = { base = { "--sets", "fx/small.csv:y", "--splits", "1", "--epochs", "2", "--methods", "mlp", "--threads", "1",
      "--out", "uci/u" },
    flags = "sets methods splits epochs patience val-fraction batch lr prior-sigma dropout kl-weight samples weight-decay test-samples seed threads out",
    kinds = { out = "prefix" } },
  plot_run = { base = { "fx/run.jsonl", "fx/run.ckpt", "--out", "plots/r" }, flags = "out bins prior",
    kinds = { out = "prefix" } },
  bandit_ablation = { base = { "--rows", "paper", "--seeds", "1", "--steps", "5", "--results", "abl/a.jsonl" },
    flags = "rows seeds steps probes results causes-from data" },
  bandit_inspect = { base = { "fx/missing.safetensors" }, flags = "test-samples data" },
}
KINDS.column = { "nope", "" }
KINDS.delimiter = { "", "ab", "\n" }


-- argv for a script: its small-work flags without those named in drop, then extra.
local function argv(t, script, drop, extra)
  local a = { t.bbblua, t.S .. script .. ".lua" }
  local skip = false
  for _, w in ipairs(SCRIPTS[script].base) do
    if skip then skip = false
    elseif drop[w] then skip = true
    else a[#a + 1] = w end
  end
  for _, w in ipairs(extra) do a[#a + 1] = w end
  return a
end

-- The flags of a script, in order, with their kind.
local function flags_of(script)
  local s, list = SCRIPTS[script], {}
  for flag in s.flags:gmatch("%S+") do
    local kind = (s.kinds and s.kinds[flag]) or FLAG[flag]
    assert(KINDS[kind], ("battery: no kind for %s --%s"):format(script, flag))
    list[#list + 1] = { flag = flag, kind = kind }
  end
  return list
end

local function script_names()
  local names = {}
  for name in pairs(SCRIPTS) do names[#names + 1] = name end
  table.sort(names)
  return names
end

return { SCRIPTS = SCRIPTS, KINDS = KINDS, argv = argv, flags_of = flags_of, script_names = script_names }

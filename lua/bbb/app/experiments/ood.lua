--- bbb.app.experiments.ood: Uncertainty that earns its keep: a Bayes-by-Backprop MLP against a plain
-- MLP and an MC-dropout MLP of the same size, on the in-distribution test
-- set, the other data set (dataset shift), N(0, 1) noise and uniform noise:
-- entropies, mutual information, AUROC of in against out, calibration.
-- scripts/ood.lua is its command line:
--
--   local config = ood.parse(arg)      -- or ood.options{ hidden = 16, ... }
--   local result = ood.run(config)     -- plain numbers, strings and tables
--   ood.report(result)                 -- the tables and the targets
--   ood.plot(result)                   -- the pictures
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"

local ood = {}
local metrics = bbb.metrics

local E = math.exp
local INPUTS = 28 * 28       -- MNIST and Fashion-MNIST images
local LOG2 = math.log(2)
local TINY = 1e-12
local KEEP_PASSES = 5    -- images whose per-pass predicted class is kept (seed 000)
local NOISE_PANELS = 8   -- noise images whose class probabilities are drawn

-- Presets set every flag not given explicitly.
ood.PRESETS = {
  s1 = { about = "seed 001 as written: MNIST, pixels in [0, 1]; BNN 784-512-512-10 sigmoid, Gaussian "
         .. "prior N(0, 6^2) (its prior_var = 6 is a standard deviation), mu ~ U(-0.6, 0.6), rho -6, "
         .. "summed NLL + KL / M, Adam lr 1e-3 divided by 1.1 per epoch, batch 128, 20 epochs; "
         .. "MLP 784-400-400-10 ReLU, Adam lr 1e-3, 10 epochs; 1,000 N(0, 1) images, 100 passes, "
         .. "entropy in bits (it reports MLP 0.1446, BNN 0.9909)",
         flags = { dataset = "mnist", hidden = 512, layers = 2, activation = "sigmoid", prior = "gaussian",
                   sigma1 = 6, mu_init = 0.6, rho_init = -6, pixel_scale = 255, reduction = "sum",
                   lr = 1e-3, lr_decay = 1 / 1.1, batch = 128, epochs = 20, base_hidden = 400,
                   base_activation = "relu", base_epochs = 10, base_lr_decay = 1, test_samples = 100 } },
  s0 = { about = "seed 000: Fashion-MNIST, 784-400-400-10 ReLU, mixture pi 0.5, sigma1 1, sigma2 e^-6, "
         .. "batch 100, Adam lr 1e-3, 30 epochs; evaluated on MNIST (it reports 87.7% with posterior "
         .. "means, 88.3% with 100 samples)",
         flags = { dataset = "fashion", hidden = 400, layers = 2, activation = "relu", prior = "mixture",
                   pi = 0.5, sigma1 = 1, sigma2 = E(-6), batch = 100, lr = 1e-3, epochs = 30, test_samples = 100 } },
}
local SET_NAMES = { "mnist", "fashion", "normal", "uniform" }
local KINDS = { "bbb", "mlp", "dropout" }
local NAMES = { mnist = "MNIST", fashion = "Fashion-MNIST", normal = "N(0,1) noise", uniform = "uniform noise" }
local ACT = { relu = bbb.nn.ReLU, sigmoid = bbb.nn.Sigmoid, tanh = bbb.nn.Tanh }

local epilog = { "Models: each of bbb, mlp and dropout is trained through bbb.train.fit unless "
  .. "--from-<model> names a checkpoint of it (from scripts/mnist.lua --save, --checkpoint, or this "
  .. "script's --save-models); a checkpoint's pixel scale and data set come from its saved flags.",
  "Evaluation sets: the in-distribution test set, the other data set's test set, --noise-n images "
  .. "of N(0, 1) noise (in the model's input space, as seed 001) and of uniform noise over the pixel "
  .. "range [0, 255 / pixel-scale]. Entropies and mutual information are in bits.",
}


--- ood.parser() -> the command line of the experiment.
function ood.parser()
  local parser = recipe.parser("ood.lua", "Out-of-distribution entropy, dataset shift and calibration: "
    .. "Bayes by Backprop against a plain MLP and an MC-dropout MLP.", {
    presets = ood.PRESETS, outputs = { "out", "save_models" },
    -- BBB's prior: a Gaussian, sigma 1. Under the scale mixture the
    -- narrow spike holds the weights at a tiny sigma (0.017-0.024 per layer
    -- after training), so the posterior's draws barely disagree on any image;
    -- under the Gaussian the posterior stays wide (sigma 0.42 / 0.27 / 0.03)
    -- at the same accuracy, and its draws disagree on images unlike MNIST's
    -- (doc/notebook/experiments.md, "Out of distribution: the prior decides").
    defaults = { epochs = "20", test_samples = "100", threads = "2", prior = "gaussian", sigma1 = "1" },
    flags = { "dataset" } })
  parser:epilog(table.concat(epilog, "\n") .. "\n" .. parser._epilog)
  flags.option(parser, "--sets", "Out-of-distribution sets to evaluate (the other data set, normal, uniform).")
    :args("+"):convert(cli.choice(SET_NAMES))
  flags.option(parser, "--from-bbb", "Load the Bayes-by-Backprop model from this checkpoint instead of training it.")
  flags.option(parser, "--from-mlp", "Load the plain MLP from this checkpoint.")
  flags.option(parser, "--from-dropout", "Load the dropout MLP from this checkpoint.")
  recipe.declare(parser, { "noise_n" })
  recipe.declare(parser, { "test_samples", "hidden", "layers", "activation", "prior", "pi", "sigma1", "sigma2",
    "rho_init", "mu_init", "reduction", "epochs", "lr", "lr_decay", "batch" })
  flags.option(parser, "--base-hidden", "Baselines' units per hidden layer (default --hidden).")
    :convert(cli.positive_integer { max = 1 << 16 })
  flags.option(parser, "--base-activation", "Baselines' activation (default --activation).")
    :convert(cli.choice { "relu", "sigmoid", "tanh" })
  flags.option(parser, "--base-epochs", "Baselines' training epochs (default --epochs).")
    :convert(cli.nonnegative_integer { max = 100000 })
  flags.option(parser, "--base-lr-decay", "Baselines' learning-rate decay (default --lr-decay).")
    :convert(cli.positive_number())
  recipe.declare(parser, { "dropout", "pixel_scale", "limit", "test_limit" })
  flags.option(parser, "--chunk", "Images per prediction pass (bounds memory: samples x chunk x classes).", "2500")
    :convert(cli.positive_integer())
  recipe.declare(parser, { "seed", "threads" })
  flags.option(parser, "--out", "Prefix of the output files: the figures as JSON in PREFIX.json, the pictures in "
    .. "PREFIX-*.png.", "out/ood"):convert(cli.output_path())
  flags.option(parser, "--save-models", "Write each trained model to PREFIX-<model>.safetensors.")
    :convert(cli.output_path())
  return parser
end

--- ood.parse([argv]) -> args: the command line, checked, the preset applied.
function ood.parse(argv)
  argv = argv or arg
  local args = recipe.parse(ood.parser(), argv)
  args._default_run = #argv == 0
  for _, k in ipairs { "hidden", "activation", "epochs", "lr_decay" } do
    if args["base_" .. k] == nil then args["base_" .. k] = args[k] end
  end
  return args
end

--- ood.options(t) -> config: the settings in t ({hidden = 16, ...}, keys as
-- the flags' names with underscores), checked as the same flags on a command
-- line would be.
function ood.options(t)
  return ood.parse(recipe.argv_of(t))
end

-- Bad input: recipe.main prints "ood.lua: message" and exits 2.
local function fail(msg, ...)
  error({ usage = msg:format(...) }, 0)
end

local function clock() return (bbb.core.clock or os.clock)() end

--------------------------------------------------------------------------
-- Checkpoints: loaded and checked before any data is read.

local function layers_of(net)
  local list = {}
  net:apply(function(m) list[#list + 1] = m end)
  return list
end

local function has(net, name)
  for _, m in ipairs(layers_of(net)) do
    if m.__name == name then return true end
  end
  return false
end

-- The values a model takes per image: a dense net's first width, or a
-- convolutional net's (bbb.nn.lenet: a 1 x 28 x 28 view) channels times
-- the pixels of its view.
local function first_width(net)
  for _, m in ipairs(layers_of(net)) do
    if m.n_in then return m.n_in end
    if m.in_channels then
      for _, v in ipairs(layers_of(net)) do
        if v.__name == "View" and v.sizes then
          local n = 1
          for _, d in ipairs(v.sizes) do n = n * d end
          return m.in_channels == v.sizes[1] and n or nil
        end
      end
      return nil
    end
  end
end

local function last_width(net)
  local w
  for _, m in ipairs(layers_of(net)) do
    if m.n_out then w = m.n_out end
  end
  return w
end

-- The model --from-<kind> names, refused unless it fits the experiment:
-- MNIST-sized inputs, ten classes, the layers its kind needs, and trained on
-- the in-distribution data set.
local function load_model(config, kind)
  local path, flag = config["from_" .. kind], "--from-" .. kind
  local ok, net, info = pcall(bbb.load, path, { prior = config._prior })
  if not ok then fail("%s: %s", flag, (tostring(net):gsub("^[^\n]-:%d+: ", ""))) end
  if not net then fail("%s: %s holds no model", flag, path) end
  local n_in, n_out = first_width(net), last_width(net)
  if n_in ~= INPUTS then
    fail("%s: %s takes inputs of %s values, but %s images have %d pixels", flag, path,
      tostring(n_in), config.dataset, INPUTS)
  end
  if n_out ~= 10 then fail("%s: %s has %s outputs, but %s has 10 classes", flag, path, tostring(n_out), config.dataset) end
  local bayes, dropout = has(net, "BayesLinear") or has(net, "BayesConv2d"), has(net, "Dropout")
  if kind == "bbb" and not bayes then fail("%s: %s holds no Bayesian layer", flag, path) end
  if kind ~= "bbb" and bayes then fail("%s: %s is a Bayesian model (use --from-bbb)", flag, path) end
  if kind == "dropout" and not dropout then fail("%s: %s has no dropout layer", flag, path) end
  if kind == "mlp" and dropout then fail("%s: %s has dropout layers (use --from-dropout)", flag, path) end
  local saved = type(info.meta.args) == "table" and info.meta.args or {}
  if saved.dataset and saved.dataset ~= config.dataset then
    fail("%s: %s was trained on %s, but the in-distribution set is %s (--dataset)", flag, path,
      tostring(saved.dataset), config.dataset)
  end
  return { net = net, pixel_scale = tonumber(saved.pixel_scale) or config.pixel_scale, path = path }
end

local function load_models(config)
  local loaded = {}
  for _, kind in ipairs(KINDS) do
    if config["from_" .. kind] then loaded[kind] = load_model(config, kind) end
  end
  return loaded
end

--------------------------------------------------------------------------
-- Data: raw pixels 0..255, scaled per model.

local function load_images(name, opts)
  return require("bbb.app.recipe").load_images(name, opts)
end

-- The evaluation sets, the in-distribution test set first: name, label, and
-- raw (pixels scaled per model) or fixed (inputs as they are).
local function load_sets(config, other)
  local wanted = { [other] = true, normal = true, uniform = true }
  if config.sets then
    wanted = {}
    for _, s in ipairs(config.sets) do
      if s ~= config.dataset then wanted[s] = true end
    end
  end
  local raw_test = load_images(config.dataset, { split = "test", scale = 1, limit = config.test_limit })
  local noise_gen = bbb.Generator(config.seed + 1000)
  local sets = { { name = config.dataset, label = NAMES[config.dataset] .. " test (in)", raw = raw_test,
    y = raw_test.y, is_in = true } }
  if wanted[other] then
    local ds = load_images(other, { split = "test", scale = 1, limit = config.test_limit })
    sets[#sets + 1] = { name = other, label = NAMES[other] .. " test", raw = ds }
  end
  if wanted.normal then
    -- seed 001 feeds torch.randn to the network directly: noise in input space
    sets[#sets + 1] = { name = "normal", label = "N(0,1) noise",
      fixed = bbb.randn({ config.noise_n, INPUTS }, 0, 1, noise_gen) }
  end
  if wanted.uniform then
    sets[#sets + 1] = { name = "uniform", label = "uniform noise",
      raw = { x = bbb.rand({ config.noise_n, INPUTS }, 0, 255, noise_gen) } }
  end
  return sets
end

local function inputs(set, pixel_scale)
  if set.fixed then return set.fixed end
  return set.raw.x * (1 / pixel_scale)
end

--------------------------------------------------------------------------
-- Models: loaded, or trained through bbb.train.fit.

local function sizes_for(config, hidden, n_classes)
  local s = { INPUTS }
  for _ = 1, config.layers do s[#s + 1] = hidden end
  s[#s + 1] = n_classes
  return s
end

local function build(config, kind, gen, n_classes)
  if kind == "bbb" then
    -- --sigma1 is the Gaussian's sigma and the Laplace's b too
    local prior = bbb.prior.from_config { kind = config.prior, pi = config.pi, sigma1 = config.sigma1,
      sigma2 = config.sigma2, sigma = config.sigma1, b = config.sigma1 }
    return bbb.nn.bayes_mlp(sizes_for(config, config.hidden, n_classes), { prior = prior,
      activation = ACT[config.activation], rho_init = config.rho_init, mu_scale = config.mu_init, generator = gen })
  end
  return bbb.nn.mlp(sizes_for(config, config.base_hidden, n_classes), { activation = ACT[config.base_activation],
    generator = gen, dropout = kind == "dropout" and config.dropout or nil })
end

local function save_model(config, kind, net)
  local path = config.save_models .. "-" .. kind .. ".safetensors"
  local saved = recipe.saved_args(config)
  saved.threads, saved.sets, saved.model = nil, nil, kind
  bbb.save(path, { model = net, args = saved })
  print("  saved " .. path)
end

-- Model number k of KINDS, trained on train_set and tested on raw_test.
local function train_model(config, kind, k, train_set, raw_test)
  local gen = bbb.Generator(config.seed + k)
  local net = build(config, kind, gen, #raw_test.classes)
  local epochs = kind == "bbb" and config.epochs or config.base_epochs
  local decay = kind == "bbb" and config.lr_decay or config.base_lr_decay
  local elbo = bbb.elbo.ELBO { n_data = train_set.n, batch_size = config.batch,
    reduction = kind == "bbb" and config.reduction or "mean" }
  local opt = bbb.optim.Adam(net, { lr = config.lr })
  local test = { x = raw_test.x * (1 / config.pixel_scale), y = raw_test.y, n = raw_test.n }
  print(("training %s: %s, %d epochs"):format(kind, tostring(net):gsub("\n%s*", " "), epochs))
  io.stdout:flush()
  local result = bbb.train.fit {
    model = net, elbo = elbo, optimizer = opt, schedule = bbb.optim.schedule.exponential(opt, decay),
    data = train_set, test = test, batch_size = config.batch, epochs = epochs, generator = gen,
    print = function(rec)
      return ("  %-7s epoch %2d  nll/ex %.4f  train %.2f%%  test %.2f%%  %.1f s"):format(kind, rec.epoch,
        rec.nll_per_example, 100 * (rec.train_acc or 0), 100 * (rec.test_acc or 0), rec.seconds)
    end,
  }
  if result.status == "interrupted" then
    error({ signal = result.signal or 2, message = "interrupted while training " .. kind }, 0)
  end
  if config.save_models then save_model(config, kind, net) end
  return { net = net, pixel_scale = config.pixel_scale }
end

-- Every model of KINDS, loaded or trained (the training images read only
-- when a model is trained).
local function ready_models(config, loaded, raw_test)
  local train_set
  local function train_data()
    train_set = train_set or load_images(config.dataset,
      { split = "train", scale = 1 / config.pixel_scale, limit = config.limit })
    return train_set
  end
  local models = {}
  for k, kind in ipairs(KINDS) do
    models[kind] = loaded[kind] or train_model(config, kind, k, train_data(), raw_test)
    if loaded[kind] then print(("%s: loaded %s (pixels / %g)"):format(kind, loaded[kind].path, loaded[kind].pixel_scale)) end
  end
  -- MC dropout: the dropout layers keep sampling in evaluation; predict's
  -- mode = "mean" would turn them off.
  models.dropout.net:apply(function(m) if m.__name == "Dropout" then m.mode = "sample" end end)
  return models
end

--------------------------------------------------------------------------
-- Evaluation: every row (a model and how it predicts) on every set,
-- in chunks of --chunk images so at most samples x chunk x classes floats
-- of per-pass probabilities exist at a time.

local function rows_of(config)
  return {
    { key = "bbb_mean", label = "BBB posterior mean", model = "bbb", mc = false },
    { key = "bbb_mc", label = ("BBB MC %d"):format(config.test_samples), model = "bbb", mc = true },
    { key = "mlp", label = "MLP", model = "mlp", mc = false },
    { key = "dropout_mc", label = ("MC dropout %d"):format(config.test_samples), model = "dropout", mc = true },
  }
end

local function cat(list)
  return #list == 1 and list[1] or bbb.cat(list, 1)
end

-- Seed 001's entropy: exp of the mean log-softmax (not normalised), in bits,
-- with its log2(p + 1e-10).
local function seed_entropy(stack)
  local p = stack:clamp(TINY):log():mean(1):exp()
  return (p * (p + 1e-10):log()):sum(2):neg() * (1 / LOG2)
end

-- One row on one set: per-image probabilities and entropies (tensors), the
-- predicted class of each pass for the first images, and on the
-- in-distribution set accuracy, NLL and calibration.
local function evaluate(config, m, row, set)
  local x = inputs(set, m.pixel_scale)
  local n = x:size(1)
  local parts = { mean = {}, predictive = {}, expected = {}, mi = {}, seed = {} }
  local passes
  for start = 1, n, config.chunk do
    local len = math.min(config.chunk, n - start + 1)
    local xc = x:narrow(1, start, len)
    if row.mc then
      local _, stack = m.net:predict(xc, { samples = config.test_samples, keep_samples = "tensor" })
      local u = metrics.uncertainty(stack, 2)
      parts.mean[#parts.mean + 1] = u.mean
      parts.predictive[#parts.predictive + 1] = u.predictive
      parts.expected[#parts.expected + 1] = u.expected
      parts.mi[#parts.mi + 1] = u.mutual_information
      parts.seed[#parts.seed + 1] = seed_entropy(stack)
      if start == 1 then passes = stack:narrow(2, 1, math.min(KEEP_PASSES, len)):argmax(3) end
    else
      local p = m.net:predict(xc, { mode = "mean" })
      local h = metrics.entropy(p, 2)
      parts.mean[#parts.mean + 1] = p
      parts.predictive[#parts.predictive + 1] = h
      parts.seed[#parts.seed + 1] = seed_entropy(p:reshape { 1, len, p:size(2) })
    end
  end
  local r = { probs = cat(parts.mean), predictive = cat(parts.predictive), seed = cat(parts.seed), passes = passes }
  r.confidence = r.probs:max(2)
  if row.mc then r.expected, r.mi = cat(parts.expected), cat(parts.mi) end
  if set.is_in then
    r.acc = metrics.accuracy(r.probs, set.y)
    r.nll = metrics.nll(r.probs, set.y)
    r.ece = metrics.ece(r.probs, set.y, 15)
    r.brier = metrics.brier(r.probs, set.y)
    r.aurc = metrics.aurc(r.confidence, metrics.correct(r.probs, set.y))
    r.bins = metrics.reliability(r.probs, set.y, 15)
  end
  return r
end

-- evals[row key][set name] = evaluate's answer, with a progress line each.
local function evaluate_all(config, rows, sets, models)
  local evals = {}
  local n_jobs, done = #rows * #sets, 0
  local progress = bbb.progress.new { total = n_jobs }
  for _, row in ipairs(rows) do
    evals[row.key] = {}
    for _, set in ipairs(sets) do
      progress.label = ("%s on %s"):format(row.label, set.label)
      progress:update(done)
      local t0 = clock()
      evals[row.key][set.name] = evaluate(config, models[row.model], row, set)
      done = done + 1
      progress:clear()
      print(("evaluated %s on %s (%d/%d, %.1f s)"):format(row.label, set.label, done, n_jobs, clock() - t0))
      io.stdout:flush()
      progress:update(done)
    end
  end
  progress:finish()
  return evals
end

-- Each set after the first against the in-distribution set (bbb.metrics.detection:
-- AUROC, AUPR in and out, FPR at 95% TPR), by predictive entropy, by
-- 1 - max probability and (for the MC rows) by mutual information.
local function score_sets(rows, sets, evals)
  for _, row in ipairs(rows) do
    local base = evals[row.key][sets[1].name]
    for s = 2, #sets do
      local r = evals[row.key][sets[s].name]
      r.detect_h = metrics.detection(base.predictive, r.predictive)
      r.detect_p = metrics.detection(base.confidence:neg(), r.confidence:neg())
      if row.mc then r.detect_mi = metrics.detection(base.mi, r.mi) end
    end
  end
end

--------------------------------------------------------------------------
-- The result: plain numbers, strings and tables of them.

local function mean_of(t) return t and t:mean():item() end
local function list_of(t) return t:reshape(-1):totable() end

-- One row on one set as figures: means over the set (entropies in bits),
-- AUROC against the in-distribution set, and on that set acc, NLL and ECE.
local function figures_of(r)
  return { acc = r.acc, nll = r.nll, ece = r.ece, brier = r.brier, aurc = r.aurc, entropy = mean_of(r.predictive),
    mi = mean_of(r.mi), expected_entropy = mean_of(r.expected), seed001_entropy = mean_of(r.seed),
    auroc_entropy = r.detect_h and r.detect_h.auroc, auroc_mi = r.detect_mi and r.detect_mi.auroc,
    detection = r.detect_h and { entropy = r.detect_h, max_prob = r.detect_p, mi = r.detect_mi } }
end

-- The first images' predicted class in each pass of the BNN, with their labels.
local function passes_of(set, r)
  local images = {}
  for i = 1, r.passes:size(2) do
    images[i] = { label = set.raw.classes[math.tointeger(set.raw.y[i])],
      classes = r.passes:narrow(2, i, 1):reshape(-1):totable() }
  end
  return { set = set.name, images = images }
end

-- What the pictures draw: per-image entropies, the reliability bins, class
-- probabilities on the first noise images, and the BNN's passes.
local function picture_data(result, rows, sets, evals, other)
  result.entropies, result.reliability = {}, {}
  for _, row in ipairs(rows) do
    result.entropies[row.key] = {}
    for _, set in ipairs(sets) do result.entropies[row.key][set.name] = list_of(evals[row.key][set.name].predictive) end
    result.reliability[row.key] = evals[row.key][sets[1].name].bins
  end
  if evals.bbb_mc.normal then
    local pb, pm = evals.bbb_mc.normal.probs, evals.mlp.normal.probs
    result.noise_probs = { bbb_mc = {}, mlp = {} }
    for i = 1, math.min(NOISE_PANELS, pb:size(1)) do
      result.noise_probs.bbb_mc[i], result.noise_probs.mlp[i] = list_of(pb[i]), list_of(pm[i])
    end
  end
  if evals.bbb_mc[other] then
    -- the other data set is always the second set when it is evaluated
    result.passes = { passes_of(sets[1], evals.bbb_mc[sets[1].name]), passes_of(sets[2], evals.bbb_mc[other]) }
  end
end

-- Where each model came from: {source = "trained"} or {source = "loaded",
-- path =}, with the pixel scale it takes.
local function models_of(models)
  local t = {}
  for _, kind in ipairs(KINDS) do
    local m = models[kind]
    t[kind] = { source = m.path and "loaded" or "trained", path = m.path, pixel_scale = m.pixel_scale }
  end
  return t
end

local function summarize(config, rows, sets, evals, other, times, models)
  local result = { config = recipe.saved_args(config), default_run = config._default_run == true,
    dataset = config.dataset, other = other, classes = sets[1].raw.classes, times = times,
    models = models_of(models), rows = {}, sets = {}, figures = {} }
  for i, row in ipairs(rows) do
    result.rows[i] = { key = row.key, label = row.label, model = row.model, mc = row.mc }
    result.figures[row.key] = {}
    for _, set in ipairs(sets) do result.figures[row.key][set.name] = figures_of(evals[row.key][set.name]) end
  end
  for i, set in ipairs(sets) do result.sets[i] = { name = set.name, label = set.label, is_in = set.is_in == true } end
  picture_data(result, rows, sets, evals, other)
  return result
end

local function verdict(ok) return type(ok) == "string" and ok or ok and "met" or "missed" end

-- The seeds' targets that apply to this run: each {key, text, measured (the
-- figures as the table shows them), values (those figures), verdict ("met",
-- "missed" or why it counts as met)}.
local function targets_of(result)
  local list = {}
  local function target(key, text, measured, values, ok)
    list[#list + 1] = { key = key, text = text, measured = measured, values = values, verdict = verdict(ok) }
  end
  local function find(key, set) return result.figures[key] and result.figures[key][set] end
  local c, times = result.config, result.times
  local bn, mn = find("bbb_mc", "normal"), find("mlp", "normal")
  if c.preset == "s1" and bn and mn then
    local hb, hm, hs = bn.entropy, mn.entropy, bn.seed001_entropy
    target("s1_noise_entropy", "seed 001: BNN entropy on N(0,1) noise >= 0.99 bits (seed: 0.9909)",
      ("%.4f bits (seed's variant %.4f)"):format(hb, hs), { hb, hs }, hb >= 0.99)
    target("s1_noise_entropy_vs_mlp", "seed 001: BNN noise entropy >= 3x our MLP's (seed MLP: 0.1446)",
      ("%.4f vs 3 x %.4f = %.4f"):format(hb, hm, 3 * hm), { hb, hm }, hb >= 3 * hm)
  end
  if result.dataset == "mnist" and find("bbb_mc", "fashion") then
    local b, mm, d = find("bbb_mc", "fashion"), find("mlp", "fashion"), find("dropout_mc", "fashion")
    target("auroc_mi", "MNIST vs Fashion-MNIST: BBB AUROC by MI >= 0.95", ("%.4f"):format(b.auroc_mi), { b.auroc_mi },
      b.auroc_mi >= 0.95)
    if d then
      target("auroc_mi_vs_dropout", "MNIST vs Fashion-MNIST: BBB AUROC (MI) > MC dropout's (MI)",
        ("%.4f vs %.4f"):format(b.auroc_mi, d.auroc_mi), { b.auroc_mi, d.auroc_mi }, b.auroc_mi > d.auroc_mi)
    end
    target("auroc_mi_vs_mlp", "MNIST vs Fashion-MNIST: BBB AUROC (MI) > MLP AUROC (entropy)",
      ("%.4f vs %.4f (BBB by H %.4f)"):format(b.auroc_mi, mm.auroc_entropy, b.auroc_entropy),
      { b.auroc_mi, mm.auroc_entropy }, b.auroc_mi > mm.auroc_entropy)
  end
  if result.dataset == "fashion" then
    local in_set = result.sets[1].name
    local mean_acc, mc_acc = find("bbb_mean", in_set).acc, find("bbb_mc", in_set).acc
    target("s0_acc_mean", "seed 000: Fashion accuracy, posterior means >= 87.7%", ("%.2f%%"):format(100 * mean_acc),
      { mean_acc }, mean_acc >= 0.877)
    target("s0_acc_mc", ("seed 000: Fashion accuracy, %d samples >= 88.3%%"):format(c.test_samples),
      ("%.2f%%"):format(100 * mc_acc), { mc_acc }, mc_acc >= 0.883)
    local best, best_label = -1, nil
    for _, row in ipairs(result.rows) do
      local a = find(row.key, in_set).acc
      if a > best then best, best_label = a, row.label end
    end
    target("fashion_90", "a Fashion model of ours reaches 90%", ("%.2f%% (%s)"):format(100 * best, best_label),
      { best }, best >= 0.90)
  end
  if result.default_run then
    -- On a shared machine the wall time measures the other jobs too; the CPU
    -- time of all threads bounds the wall time of a quiet 2-core machine.
    local ok = times.total_wall <= 300 or (times.total_cpu <= 300 and "met on CPU time (wall inflated by other jobs)")
    target("default_time", "the default run finishes in <= 5 min (training included)",
      ("%.0f s wall, %.0f s CPU"):format(times.total_wall, times.total_cpu), { times.total_wall, times.total_cpu }, ok)
  end
  return list
end

-- The figures as JSON at <out>.json: the result without the per-image
-- entropies (what the histograms draw).
local function write_json(config, result)
  local t = {}
  for k, v in pairs(result) do if k ~= "entropies" then t[k] = cli.json_figures(v) end end
  cli.write_file(config.out .. ".json", require("bbb.json").encode(t) .. "\n")
end

--- ood.run(config) -> result: trains (or loads) the three models and
-- evaluates them on every set. result.figures[row][set] holds the numbers
-- of the table (row: bbb_mean, bbb_mc, mlp, dropout_mc; set: the data set
-- names, normal, uniform): acc, nll, ece (in-distribution set only),
-- entropy, mi, expected_entropy, seed001_entropy (bits, means over the
-- set), auroc_entropy, auroc_mi (the set against the in-distribution one),
-- detection = {entropy, max_prob, mi}: each bbb.metrics.detection's
-- {auroc, aupr_in, aupr_out, fpr95}; brier and aurc (in-distribution set).
-- result.rows and result.sets list them in the table's order; times holds
-- the wall and CPU seconds; models = {bbb =, mlp =, dropout =}, each
-- {source = "trained" or "loaded", path (loaded), pixel_scale}; targets the
-- seeds' targets that apply ({key, text, measured, values, verdict}); the
-- rest is what ood.plot draws. The result, without the per-image
-- entropies, goes to <out>.json too.
function ood.run(config)
  local t_wall, t_cpu = clock(), os.clock()
  local loaded = load_models(config)
  bbb.set_num_threads(config.threads)
  bbb.manual_seed(config.seed)
  local other = config.dataset == "mnist" and "fashion" or "mnist"
  local sets = load_sets(config, other)
  local models = ready_models(config, loaded, sets[1].raw)
  local times = { trained_wall = clock() - t_wall, trained_cpu = os.clock() - t_cpu }
  local rows = rows_of(config)
  local evals = evaluate_all(config, rows, sets, models)
  score_sets(rows, sets, evals)
  times.total_wall, times.total_cpu = clock() - t_wall, os.clock() - t_cpu
  local result = summarize(config, rows, sets, evals, other, times, models)
  result.targets = targets_of(result)
  write_json(config, result)
  return result
end

--------------------------------------------------------------------------
-- The report.

local function fmt(v, f) return v and (f or "%.4f"):format(v) or "-" end

-- Each set against the in-distribution one, by each score.
local function print_detection(result)
  print()
  print("Detection of each set against the in-distribution test set (out = positive):")
  print(("%-20s %-22s %-9s %8s %8s %8s %8s"):format("model", "set", "score", "AUROC", "AUPR-in", "AUPR-out", "FPR95"))
  for _, row in ipairs(result.rows) do
    for s = 2, #result.sets do
      local d = result.figures[row.key][result.sets[s].name].detection
      for _, by in ipairs { "max_prob", "entropy", "mi" } do
        local x = d[by]
        if x then
          print(("%-20s %-22s %-9s %8.4f %8.4f %8.4f %8.4f"):format(row.label, result.sets[s].label, by,
            x.auroc, x.aupr_in, x.aupr_out, x.fpr95))
        end
      end
    end
  end
end

local function print_tables(result)
  local c = result.config
  print()
  print(("In-distribution: %s; %d MC samples for BBB MC and MC dropout; noise sets of %d images."):format(
    NAMES[result.dataset], c.test_samples, c.noise_n))
  print("Units: entropy H, mutual information MI (epistemic) and expected entropy E[H] (aleatoric) in bits,")
  print("means over the set; H seed001 = seed 001's entropy of exp(mean log-softmax), not normalised, bits;")
  print("NLL in nats per image and accuracy on the in-distribution set only (the others have no labels of")
  print("its classes); AUROC: the set against the in-distribution test set, scored by H and by MI.")
  local header = ("%-20s %-22s %7s %7s %7s %7s %7s %10s %8s %8s"):format("model", "set", "acc %", "NLL",
    "H", "MI", "E[H]", "H seed001", "AUROC H", "AUROC MI")
  print(header)
  print(("-"):rep(#header))
  for _, row in ipairs(result.rows) do
    for _, set in ipairs(result.sets) do
      local f = result.figures[row.key][set.name]
      print(("%-20s %-22s %7s %7s %7.4f %7s %7s %10.4f %8s %8s"):format(row.label, set.label,
        fmt(f.acc and 100 * f.acc, "%.2f"), fmt(f.nll), f.entropy, fmt(f.mi), fmt(f.expected_entropy),
        f.seed001_entropy, fmt(f.auroc_entropy), fmt(f.auroc_mi)))
    end
  end
  print()
  print(("Calibration on %s test (15 equal-width confidence bins):"):format(NAMES[result.dataset]))
  print(("%-20s %8s %8s %8s %8s %8s"):format("model", "ECE", "acc %", "NLL", "Brier", "AURC"))
  for _, row in ipairs(result.rows) do
    local f = result.figures[row.key][result.sets[1].name]
    print(("%-20s %8.4f %8.2f %8.4f %8.4f %8.4f"):format(row.label, f.ece, 100 * f.acc, f.nll, f.brier, f.aurc))
  end
  print_detection(result)
end

--- ood.report(result) prints the table of every model on every set, the
-- calibration, the targets and the times.
function ood.report(result)
  print_tables(result)
  if #result.targets > 0 then
    print()
    print("Targets:")
    for _, t in ipairs(result.targets) do print(("  %-62s %-34s %s"):format(t.text, t.measured, t.verdict)) end
  end
  local t = result.times
  print()
  print(("time: models ready after %.1f s wall (%.1f s CPU), total %.1f s wall (%.1f s CPU, all threads)"):format(
    t.trained_wall, t.trained_cpu, t.total_wall, t.total_cpu))
  io.stdout:flush()
end

--------------------------------------------------------------------------
-- Pictures.

local function entropy_histogram(result, row, model_name)
  local series = {}
  for _, set in ipairs(result.sets) do
    series[#series + 1] = { values = result.entropies[row.key][set.name], title = set.label }
  end
  return require("bbb.app.plot").histogram { file = ("%s-entropy-%s.png"):format(result.config.out, row.key), bins = 40,
    density = true, title = ("Predictive entropy, %s (%s)"):format(row.label, model_name),
    xlabel = "predictive entropy (bits)", ylabel = "density", series = series }
end

local function reliability_lines(result, model_name)
  local rel = { { x = { 0, 1 }, y = { 0, 1 }, title = "perfect calibration", color = "#7f7f7f" } }
  for _, row in ipairs(result.rows) do
    local xs, ys = {}, {}
    for _, b in ipairs(result.reliability[row.key]) do
      if b.count > 0 then xs[#xs + 1], ys[#ys + 1] = b.confidence, b.accuracy end
    end
    rel[#rel + 1] = { x = xs, y = ys, style = "linespoints",
      title = ("%s (ECE %.4f)"):format(row.label, result.figures[row.key][result.sets[1].name].ece) }
  end
  return require("bbb.app.plot").lines { file = result.config.out .. "-reliability.png", xrange = { 0, 1 }, yrange = { 0, 1 },
    title = ("Reliability on %s test, 15 bins (%s)"):format(NAMES[result.dataset], model_name),
    xlabel = "confidence (mean top probability in the bin)", ylabel = "accuracy in the bin", series = rel }
end

local function noise_bars(result, model_name)
  local pb, pm = result.noise_probs.bbb_mc, result.noise_probs.mlp
  local panels = {}
  for i = 1, #pb do
    panels[i] = { title = ("noise image %d"):format(i), series = {
      { values = pb[i], title = ("BNN (mean of %d passes)"):format(result.config.test_samples) },
      { values = pm[i], title = "MLP" } } }
  end
  return require("bbb.app.plot").bars { file = result.config.out .. "-noise-bars.png", size = { 1600, 700 }, layout = { 2, 4 },
    title = ("Class probabilities on N(0,1) noise, BNN vs MLP (%s, as seed 001)"):format(model_name),
    xlabel = "class", ylabel = "predicted probability", categories = result.classes, panels = panels }
end

local function passes_bars(result)
  local classes, panels = result.classes, {}
  for _, group in ipairs(result.passes) do
    for i, image in ipairs(group.images) do
      local counts = {}
      for c = 1, #classes do counts[c] = 0 end
      for _, c in ipairs(image.classes) do counts[c] = counts[c] + 1 end
      panels[#panels + 1] = { title = ("%s #%d (label %s)"):format(NAMES[group.set], i, image.label),
        series = { { values = counts } } }
    end
  end
  return require("bbb.app.plot").bars { file = result.config.out .. "-passes.png", size = { 2000, 800 }, layout = { 2, KEEP_PASSES },
    title = ("Predicted class over %d passes of the BNN: %s test (top) and %s test (bottom), as seed 000")
      :format(result.config.test_samples, NAMES[result.dataset], NAMES[result.other]),
    xlabel = ("predicted %s class"):format(NAMES[result.dataset]), ylabel = "passes", categories = classes,
    panels = panels }
end

--- ood.plot(result) -> the files written (nil without gnuplot): the entropy
-- histograms of every row, the reliability diagram, the class probabilities
-- on noise and the BNN's passes.
function ood.plot(result)
  if not require("bbb.app.sys").find_program("gnuplot") then
    print("gnuplot not found: no pictures (install gnuplot-nox)")
    return nil
  end
  local written = {}
  local model_name = NAMES[result.dataset] .. " model"
  for _, row in ipairs(result.rows) do written[#written + 1] = entropy_histogram(result, row, model_name) end
  written[#written + 1] = reliability_lines(result, model_name)
  if result.noise_probs then written[#written + 1] = noise_bars(result, model_name) end
  if result.passes then written[#written + 1] = passes_bars(result) end
  print("wrote " .. table.concat(written, ", "))
  return written
end

return ood

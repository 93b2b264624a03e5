--- bbb.app.experiments.ood: Uncertainty that earns its keep: a Bayes-by-Backprop MLP against a plain
-- MLP and an MC-dropout MLP of the same size, on the in-distribution test
-- set, the other data set (dataset shift), N(0, 1) noise and uniform noise:
-- entropies, mutual information, AUROC of in against out, calibration.
-- scripts/ood.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"

local ood = {}
local metrics = bbb.metrics

local E = math.exp
local INPUTS = 28 * 28       -- MNIST and Fashion-MNIST images
local LOG2 = math.log(2)
local TINY = 1e-12

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
    -- (doc/experiments.md, "Out of distribution: the prior decides").
    defaults = { epochs = "20", test_samples = "100", threads = "2", prior = "gaussian", sigma1 = "1" },
    flags = { "dataset" } })
  parser:epilog(table.concat(epilog, "\n") .. "\n" .. parser._epilog)
  parser:option("--sets", "Out-of-distribution sets to evaluate (the other data set, normal, uniform).")
    :args("+"):convert(cli.choice(SET_NAMES))
  parser:option("--from-bbb", "Load the Bayes-by-Backprop model from this checkpoint instead of training it.")
  parser:option("--from-mlp", "Load the plain MLP from this checkpoint.")
  parser:option("--from-dropout", "Load the dropout MLP from this checkpoint.")
  parser:option("--noise-n", "Images in each noise set.", "1000"):convert(cli.positive_integer { max = 1000000 })
  recipe.declare(parser, { "test_samples", "hidden", "layers", "activation", "prior", "pi", "sigma1", "sigma2",
    "rho_init", "mu_init", "reduction", "epochs", "lr", "lr_decay", "batch" })
  parser:option("--base-hidden", "Baselines' units per hidden layer (default --hidden).")
    :convert(cli.positive_integer { max = 1 << 16 })
  parser:option("--base-activation", "Baselines' activation (default --activation).")
    :convert(cli.choice { "relu", "sigmoid", "tanh" })
  parser:option("--base-epochs", "Baselines' training epochs (default --epochs).")
    :convert(cli.nonnegative_integer { max = 100000 })
  parser:option("--base-lr-decay", "Baselines' learning-rate decay (default --lr-decay).")
    :convert(cli.positive_number())
  recipe.declare(parser, { "dropout", "pixel_scale", "limit", "test_limit" })
  parser:option("--chunk", "Images per prediction pass (bounds memory: samples x chunk x classes).", "2500")
    :convert(cli.positive_integer())
  recipe.declare(parser, { "seed", "threads" })
  parser:option("--out", "Prefix of the PNG files.", "out/ood"):convert(cli.output_path())
  parser:option("--save-models", "Write each trained model to PREFIX-<model>.safetensors.")
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

--- ood.run(args) -> results: trains (or loads) the three models, evaluates
-- them on every set, prints the tables and draws the pictures.
function ood.run(args)
  local default_run = args._default_run
  local function fail(msg, ...)
    io.stderr:write("ood.lua: ", msg:format(...), "\n")
    os.exit(2)
  end

  local clock = bbb.core.clock or os.clock
  local t_wall, t_cpu = clock(), os.clock()

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

  local loaded = {}
  for _, kind in ipairs(KINDS) do
    local path = args["from_" .. kind]
    if path then
      local flag = "--from-" .. kind
      local ok, net, info = pcall(bbb.load, path, { prior = args._prior })
      if not ok then fail("%s: %s", flag, tostring(net):gsub("^[^\n]-:%d+: ", "")) end
      if not net then fail("%s: %s holds no model", flag, path) end
      local n_in, n_out = first_width(net), last_width(net)
      if n_in ~= INPUTS then
        fail("%s: %s takes inputs of %s values, but %s images have %d pixels", flag, path,
          tostring(n_in), args.dataset, INPUTS)
      end
      if n_out ~= 10 then fail("%s: %s has %s outputs, but %s has 10 classes", flag, path, tostring(n_out), args.dataset) end
      local bayes, dropout = has(net, "BayesLinear") or has(net, "BayesConv2d"), has(net, "Dropout")
      if kind == "bbb" and not bayes then fail("%s: %s holds no Bayesian layer", flag, path) end
      if kind ~= "bbb" and bayes then fail("%s: %s is a Bayesian model (use --from-bbb)", flag, path) end
      if kind == "dropout" and not dropout then fail("%s: %s has no dropout layer", flag, path) end
      if kind == "mlp" and dropout then fail("%s: %s has dropout layers (use --from-dropout)", flag, path) end
      local saved = type(info.meta.args) == "table" and info.meta.args or {}
      if saved.dataset and saved.dataset ~= args.dataset then
        fail("%s: %s was trained on %s, but the in-distribution set is %s (--dataset)", flag, path,
          tostring(saved.dataset), args.dataset)
      end
      local scale = tonumber(saved.pixel_scale) or args.pixel_scale
      loaded[kind] = { net = net, pixel_scale = scale, path = path }
    end
  end

  local other = args.dataset == "mnist" and "fashion" or "mnist"
  local wanted = { [other] = true, normal = true, uniform = true }
  if args.sets then
    wanted = {}
    for _, s in ipairs(args.sets) do
      if s ~= args.dataset then wanted[s] = true end
    end
  end

  --------------------------------------------------------------------------
  -- Data: raw pixels 0..255, scaled per model.

  bbb.set_num_threads(args.threads)
  bbb.manual_seed(args.seed)
  local NAMES = { mnist = "MNIST", fashion = "Fashion-MNIST", normal = "N(0,1) noise", uniform = "uniform noise" }
  local loaders = { mnist = bbb.data.load_mnist, fashion = bbb.data.load_fashion_mnist }
  local raw_test = loaders[args.dataset] { split = "test", scale = 1, limit = args.test_limit }
  local classes = raw_test.classes
  local noise_gen = bbb.Generator(args.seed + 1000)

  -- Each set: name, label, x as a function of the model's pixel scale.
  local sets = { { name = args.dataset, label = NAMES[args.dataset] .. " test (in)", raw = raw_test, y = raw_test.y, is_in = true } }
  if wanted[other] then
    local ds = loaders[other] { split = "test", scale = 1, limit = args.test_limit }
    sets[#sets + 1] = { name = other, label = NAMES[other] .. " test", raw = ds }
  end
  if wanted.normal then
    -- seed 001 feeds torch.randn to the network directly: noise in input space
    sets[#sets + 1] = { name = "normal", label = "N(0,1) noise", fixed = bbb.randn({ args.noise_n, INPUTS }, 0, 1, noise_gen) }
  end
  if wanted.uniform then
    sets[#sets + 1] = { name = "uniform", label = "uniform noise", raw = { x = bbb.rand({ args.noise_n, INPUTS }, 0, 255, noise_gen) } }
  end

  local function inputs(set, pixel_scale)
    if set.fixed then return set.fixed end
    return set.raw.x * (1 / pixel_scale)
  end

  --------------------------------------------------------------------------
  -- Models: loaded, or trained through bbb.train.fit.

  local ACT = { relu = bbb.nn.ReLU, sigmoid = bbb.nn.Sigmoid, tanh = bbb.nn.Tanh }

  local function sizes_for(hidden)
    local s = { INPUTS }
    for _ = 1, args.layers do s[#s + 1] = hidden end
    s[#s + 1] = #classes
    return s
  end

  local function build(kind, gen)
    if kind == "bbb" then
      -- --sigma1 is the Gaussian's sigma and the Laplace's b too
      local prior = bbb.prior.from_config { kind = args.prior, pi = args.pi, sigma1 = args.sigma1,
        sigma2 = args.sigma2, sigma = args.sigma1, b = args.sigma1 }
      return bbb.nn.bayes_mlp(sizes_for(args.hidden), { prior = prior, activation = ACT[args.activation],
        rho_init = args.rho_init, mu_scale = args.mu_init, generator = gen })
    end
    return bbb.nn.mlp(sizes_for(args.base_hidden), { activation = ACT[args.base_activation], generator = gen,
      dropout = kind == "dropout" and args.dropout or nil })
  end

  local train_set
  local function train_model(kind, k)
    if not train_set then
      train_set = loaders[args.dataset] { split = "train", scale = 1 / args.pixel_scale, limit = args.limit }
    end
    local gen = bbb.Generator(args.seed + k)
    local net = build(kind, gen)
    local epochs = kind == "bbb" and args.epochs or args.base_epochs
    local decay = kind == "bbb" and args.lr_decay or args.base_lr_decay
    local elbo = bbb.elbo.ELBO { n_data = train_set.n, batch_size = args.batch,
      reduction = kind == "bbb" and args.reduction or "mean" }
    local opt = bbb.optim.Adam(net, { lr = args.lr })
    local test = { x = raw_test.x * (1 / args.pixel_scale), y = raw_test.y, n = raw_test.n }
    print(("training %s: %s, %d epochs"):format(kind, tostring(net):gsub("\n%s*", " "), epochs))
    io.stdout:flush()
    local result = bbb.train.fit {
      model = net, elbo = elbo, optimizer = opt, schedule = bbb.optim.schedule.exponential(opt, decay),
      data = train_set, test = test, batch_size = args.batch, epochs = epochs, generator = gen,
      print = function(rec)
        return ("  %-7s epoch %2d  nll/ex %.4f  train %.2f%%  test %.2f%%  %.1f s"):format(kind, rec.epoch,
          rec.nll_per_example, 100 * (rec.train_acc or 0), 100 * (rec.test_acc or 0), rec.seconds)
      end,
    }
    if result.status == "interrupted" then
      io.stderr:write("\ninterrupted while training " .. kind .. "\n")
      os.exit(130)
    end
    if args.save_models then
      local path = args.save_models .. "-" .. kind .. ".safetensors"
      local saved = {}
      for key, v in pairs(args) do if key ~= "threads" and key ~= "sets" then saved[key] = v end end
      saved.model = kind
      bbb.save(path, { model = net, args = saved })
      print("  saved " .. path)
    end
    return { net = net, pixel_scale = args.pixel_scale }
  end

  local models = {}
  for k, kind in ipairs(KINDS) do
    models[kind] = loaded[kind] or train_model(kind, k)
    if loaded[kind] then print(("%s: loaded %s (pixels / %g)"):format(kind, loaded[kind].path, loaded[kind].pixel_scale)) end
  end
  -- MC dropout: the dropout layers keep sampling in evaluation; predict's
  -- mode = "mean" would turn them off.
  models.dropout.net:apply(function(m) if m.__name == "Dropout" then m.mode = "sample" end end)
  local t_trained_wall, t_trained_cpu = clock() - t_wall, os.clock() - t_cpu

  --------------------------------------------------------------------------
  -- Evaluation: every row (a model and how it predicts) on every set,
  -- in chunks of --chunk images so at most samples x chunk x classes floats
  -- of per-pass probabilities exist at a time.

  local ROWS = {
    { key = "bbb_mean", label = "BBB posterior mean", model = "bbb", mc = false },
    { key = "bbb_mc", label = ("BBB MC %d"):format(args.test_samples), model = "bbb", mc = true },
    { key = "mlp", label = "MLP", model = "mlp", mc = false },
    { key = "dropout_mc", label = ("MC dropout %d"):format(args.test_samples), model = "dropout", mc = true },
  }

  local function cat(list)
    return #list == 1 and list[1] or bbb.cat(list, 1)
  end

  -- Seed 001's entropy: exp of the mean log-softmax (not normalised), in bits,
  -- with its log2(p + 1e-10).
  local function seed_entropy(stack)
    local p = stack:clamp(TINY):log():mean(1):exp()
    return (p * (p + 1e-10):log()):sum(2):neg() * (1 / LOG2)
  end

  local KEEP_PASSES = 5   -- images whose per-pass predicted class is kept (seed 000)

  local function evaluate(row, set)
    local m = models[row.model]
    local x = inputs(set, m.pixel_scale)
    local n = x:size(1)
    local parts = { mean = {}, predictive = {}, expected = {}, mi = {}, seed = {} }
    local passes
    for start = 1, n, args.chunk do
      local len = math.min(args.chunk, n - start + 1)
      local xc = x:narrow(1, start, len)
      if row.mc then
        local _, stack = m.net:predict(xc, { samples = args.test_samples, keep_samples = "tensor" })
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
    if row.mc then r.expected, r.mi = cat(parts.expected), cat(parts.mi) end
    if set.is_in then
      r.acc = metrics.accuracy(r.probs, set.y)
      r.nll = metrics.nll(r.probs, set.y)
      r.ece = metrics.ece(r.probs, set.y, 15)
      r.bins = metrics.reliability(r.probs, set.y, 15)
    end
    return r
  end

  local results = {}
  local n_jobs, done = #ROWS * #sets, 0
  local progress = bbb.progress.new { total = n_jobs }
  for _, row in ipairs(ROWS) do
    results[row.key] = {}
    for _, set in ipairs(sets) do
      progress.label = ("%s on %s"):format(row.label, set.label)
      progress:update(done)
      local t0 = clock()
      results[row.key][set.name] = evaluate(row, set)
      done = done + 1
      progress:clear()
      print(("evaluated %s on %s (%d/%d, %.1f s)"):format(row.label, set.label, done, n_jobs, clock() - t0))
      io.stdout:flush()
      progress:update(done)
    end
  end
  progress:finish()
  for _, row in ipairs(ROWS) do
    local base = results[row.key][sets[1].name]
    for s = 2, #sets do
      local r = results[row.key][sets[s].name]
      r.auroc_h = metrics.auroc(r.predictive, base.predictive)
      if row.mc then r.auroc_mi = metrics.auroc(r.mi, base.mi) end
    end
  end
  local t_total_wall, t_total_cpu = clock() - t_wall, os.clock() - t_cpu

  --------------------------------------------------------------------------
  -- The table.

  local function mean_of(t) return t and t:mean():item() end
  local function fmt(v, f) return v and (f or "%.4f"):format(v) or "-" end

  print()
  print(("In-distribution: %s; %d MC samples for BBB MC and MC dropout; noise sets of %d images."):format(
    NAMES[args.dataset], args.test_samples, args.noise_n))
  print("Units: entropy H, mutual information MI (epistemic) and expected entropy E[H] (aleatoric) in bits,")
  print("means over the set; H seed001 = seed 001's entropy of exp(mean log-softmax), not normalised, bits;")
  print("NLL in nats per image and accuracy on the in-distribution set only (the others have no labels of")
  print("its classes); AUROC: the set against the in-distribution test set, scored by H and by MI.")
  local header = ("%-20s %-22s %7s %7s %7s %7s %7s %10s %8s %8s"):format("model", "set", "acc %", "NLL",
    "H", "MI", "E[H]", "H seed001", "AUROC H", "AUROC MI")
  print(header)
  print(("-"):rep(#header))
  for _, row in ipairs(ROWS) do
    for _, set in ipairs(sets) do
      local r = results[row.key][set.name]
      print(("%-20s %-22s %7s %7s %7.4f %7s %7s %10.4f %8s %8s"):format(row.label, set.label,
        fmt(r.acc and 100 * r.acc, "%.2f"), fmt(r.nll), mean_of(r.predictive), fmt(mean_of(r.mi)),
        fmt(mean_of(r.expected)), mean_of(r.seed), fmt(r.auroc_h), fmt(r.auroc_mi)))
    end
  end
  print()
  print(("Calibration on %s test (15 equal-width confidence bins):"):format(NAMES[args.dataset]))
  print(("%-20s %8s %8s %8s"):format("model", "ECE", "acc %", "NLL"))
  for _, row in ipairs(ROWS) do
    local r = results[row.key][sets[1].name]
    print(("%-20s %8.4f %8.2f %8.4f"):format(row.label, r.ece, 100 * r.acc, r.nll))
  end

  --------------------------------------------------------------------------
  -- Targets beside the measured values.

  local function verdict(ok) return type(ok) == "string" and ok or ok and "met" or "missed" end
  local lines = {}
  local function target(text, measured, ok)
    lines[#lines + 1] = ("  %-62s %-34s %s"):format(text, measured, verdict(ok))
  end
  local function find(key, set) return results[key] and results[key][set] end

  local bn, mn = find("bbb_mc", "normal"), find("mlp", "normal")
  if args.preset == "s1" and bn and mn then
    local hb, hm, hs = mean_of(bn.predictive), mean_of(mn.predictive), mean_of(bn.seed)
    target("seed 001: BNN entropy on N(0,1) noise >= 0.99 bits (seed: 0.9909)",
      ("%.4f bits (seed's variant %.4f)"):format(hb, hs), hb >= 0.99)
    target("seed 001: BNN noise entropy >= 3x our MLP's (seed MLP: 0.1446)",
      ("%.4f vs 3 x %.4f = %.4f"):format(hb, hm, 3 * hm), hb >= 3 * hm)
  end
  if args.dataset == "mnist" and find("bbb_mc", "fashion") then
    local b, mm = find("bbb_mc", "fashion"), find("mlp", "fashion")
    local d = find("dropout_mc", "fashion")
    target("MNIST vs Fashion-MNIST: BBB AUROC by MI >= 0.95", ("%.4f"):format(b.auroc_mi), b.auroc_mi >= 0.95)
    if d then
      target("MNIST vs Fashion-MNIST: BBB AUROC (MI) > MC dropout's (MI)",
        ("%.4f vs %.4f"):format(b.auroc_mi, d.auroc_mi), b.auroc_mi > d.auroc_mi)
    end
    target("MNIST vs Fashion-MNIST: BBB AUROC (MI) > MLP AUROC (entropy)",
      ("%.4f vs %.4f (BBB by H %.4f)"):format(b.auroc_mi, mm.auroc_h, b.auroc_h), b.auroc_mi > mm.auroc_h)
  end
  if args.dataset == "fashion" then
    local mean_acc = results.bbb_mean[sets[1].name].acc
    local mc_acc = results.bbb_mc[sets[1].name].acc
    target("seed 000: Fashion accuracy, posterior means >= 87.7%", ("%.2f%%"):format(100 * mean_acc), mean_acc >= 0.877)
    target(("seed 000: Fashion accuracy, %d samples >= 88.3%%"):format(args.test_samples), ("%.2f%%"):format(100 * mc_acc),
      mc_acc >= 0.883)
    local best, best_label = -1, nil
    for _, row in ipairs(ROWS) do
      local a = results[row.key][sets[1].name].acc
      if a > best then best, best_label = a, row.label end
    end
    target("a Fashion model of ours reaches 90%", ("%.2f%% (%s)"):format(100 * best, best_label), best >= 0.90)
  end
  if default_run then
    -- On a shared machine the wall time measures the other jobs too; the CPU
    -- time of all threads bounds the wall time of a quiet 2-core machine.
    local ok = t_total_wall <= 300 or (t_total_cpu <= 300 and "met on CPU time (wall inflated by other jobs)")
    target("the default run finishes in <= 5 min (training included)",
      ("%.0f s wall, %.0f s CPU"):format(t_total_wall, t_total_cpu), ok)
  end
  if #lines > 0 then
    print()
    print("Targets:")
    for _, l in ipairs(lines) do print(l) end
  end
  print()
  print(("time: models ready after %.1f s wall (%.1f s CPU), total %.1f s wall (%.1f s CPU, all threads)"):format(
    t_trained_wall, t_trained_cpu, t_total_wall, t_total_cpu))
  io.stdout:flush()

  --------------------------------------------------------------------------
  -- Pictures.

  if not bbb.sys.find_program("gnuplot") then
    print("gnuplot not found: no pictures (install gnuplot-nox)")
    return
  end
  local written = {}
  local function wrote(f) written[#written + 1] = f end
  local model_name = NAMES[args.dataset] .. " model"

  for _, row in ipairs(ROWS) do
    local series = {}
    for _, set in ipairs(sets) do
      series[#series + 1] = { values = results[row.key][set.name].predictive, title = set.label }
    end
    wrote(bbb.plot.histogram { file = ("%s-entropy-%s.png"):format(args.out, row.key), bins = 40, density = true,
      title = ("Predictive entropy, %s (%s)"):format(row.label, model_name),
      xlabel = "predictive entropy (bits)", ylabel = "density", series = series })
  end

  local rel = { { x = { 0, 1 }, y = { 0, 1 }, title = "perfect calibration", color = "#7f7f7f" } }
  for _, row in ipairs(ROWS) do
    local xs, ys = {}, {}
    for _, b in ipairs(results[row.key][sets[1].name].bins) do
      if b.count > 0 then xs[#xs + 1], ys[#ys + 1] = b.confidence, b.accuracy end
    end
    rel[#rel + 1] = { x = xs, y = ys, style = "linespoints",
      title = ("%s (ECE %.4f)"):format(row.label, results[row.key][sets[1].name].ece) }
  end
  wrote(bbb.plot.lines { file = args.out .. "-reliability.png", xrange = { 0, 1 }, yrange = { 0, 1 },
    title = ("Reliability on %s test, 15 bins (%s)"):format(NAMES[args.dataset], model_name),
    xlabel = "confidence (mean top probability in the bin)", ylabel = "accuracy in the bin", series = rel })

  if find("bbb_mc", "normal") then
    local pb, pm = results.bbb_mc.normal.probs, results.mlp.normal.probs
    local panels = {}
    for i = 1, math.min(8, pb:size(1)) do
      panels[i] = { title = ("noise image %d"):format(i), series = {
        { values = pb[i], title = ("BNN (mean of %d passes)"):format(args.test_samples) },
        { values = pm[i], title = "MLP" } } }
    end
    wrote(bbb.plot.bars { file = args.out .. "-noise-bars.png", size = { 1600, 700 }, layout = { 2, 4 },
      title = ("Class probabilities on N(0,1) noise, BNN vs MLP (%s, as seed 001)"):format(model_name),
      xlabel = "class", ylabel = "predicted probability", categories = classes, panels = panels })
  end

  local shifted = find("bbb_mc", other)
  if shifted then
    local panels = {}
    for _, pair in ipairs { { sets[1], results.bbb_mc[sets[1].name] }, { nil, shifted } } do
      local set = pair[1] or sets[2]
      local passes = pair[2].passes
      for i = 1, passes:size(2) do
        local counts = {}
        for c = 1, #classes do counts[c] = 0 end
        for _, c in ipairs(passes:narrow(2, i, 1):reshape(-1):totable()) do counts[c] = counts[c] + 1 end
        local label = ("label %s"):format(set.raw.classes[math.tointeger(set.raw.y[i])])
        panels[#panels + 1] = { title = ("%s #%d (%s)"):format(NAMES[set.name], i, label),
          series = { { values = counts } } }
      end
    end
    wrote(bbb.plot.bars { file = args.out .. "-passes.png", size = { 2000, 800 }, layout = { 2, KEEP_PASSES },
      title = ("Predicted class over %d passes of the BNN: %s test (top) and %s test (bottom), as seed 000")
        :format(args.test_samples, NAMES[args.dataset], NAMES[other]),
      xlabel = ("predicted %s class"):format(NAMES[args.dataset]), ylabel = "passes", categories = classes,
      panels = panels })
  end
  print("wrote " .. table.concat(written, ", "))

  return results
end

return ood

--- bbb.app.experiments.mnist: MNIST (or Fashion-MNIST) classification with
-- Bayes by Backprop, or the plain and dropout MLP baselines, through the
-- shared training loop. A function from options to results, so that other
-- experiments (table1, grid, prune) call it as Lua:
--
--   local mnist = require "bbb.app.experiments.mnist"
--   local r = mnist.run(mnist.options{ preset = "paper-400", epochs = 3 })
--   print(r.test_acc_mc)
--
-- scripts/mnist.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"

local mnist = {}

-- Presets: the setups of the seed documents and the paper. Each sets flags
-- that were not given explicitly.
local E = math.exp
mnist.PRESETS = {
  ["cnn-uncertainty"] = { about = "the Bayesian LeNet for uncertainty under shift: the full ELBO (the whole "
    .. "KL once per epoch), a N(0, 1) prior, the local reparameterization, sigma starting at softplus(-3); "
    .. "chosen over the accuracy recipe and four other levers on 2,500 validation images rotated and rolled, "
    .. "seed 1 (doc/results/shift_recipe_validation.json)",
    flags = { model = "cnn", kl_weight = "uniform", prior = "gaussian", sigma1 = 1, estimator = "local",
              rho_init = -3 } },
  s1 = { about = "seed 001: 784-512-512-10 sigmoid, Gaussian prior N(0, 6^2) (its prior_var=6 is "
         .. "passed to Normal as the standard deviation), mu ~ U(-0.6, 0.6), rho -6, pixels in [0, 1], "
         .. "NLL summed over the batch, Adam lr 1e-3 divided by 1.1 per epoch, batch 128, 20 epochs",
         flags = { hidden = 512, layers = 2, activation = "sigmoid", prior = "gaussian", sigma1 = 6,
                   mu_init = 0.6, rho_init = -6, pixel_scale = 255, reduction = "sum", optim = "adam",
                   lr = 1e-3, lr_decay = 1 / 1.1, batch = 128, epochs = 20 } },
  s0 = { about = "seed 000: Fashion-MNIST, 784-400-400-10 ReLU, mixture pi 0.5, sigma1 1, "
         .. "sigma2 e^-6, batch 100, Adam (reports 87.7% with posterior means, 88.3% with 100 samples)",
         flags = { dataset = "fashion", hidden = 400, layers = 2, activation = "relu", prior = "mixture",
                   pi = 0.5, sigma1 = 1, sigma2 = E(-6), batch = 100, optim = "adam", lr = 1e-3,
                   test_samples = 100 } },
  s3 = { about = "seed 003: 784-400-400-10 ReLU, Gaussian prior sigma 1, rho -3, mu spread 0.1, "
         .. "plain SGD lr 1e-3 on the summed (not averaged) loss, batch 128, pixels / 126, 10 epochs",
         flags = { hidden = 400, layers = 2, activation = "relu", prior = "gaussian", sigma1 = 1,
                   rho_init = -3, mu_init = 0.1, optim = "sgd", momentum = 0, lr = 1e-3,
                   lr_decay = 1, reduction = "sum", batch = 128, pixel_scale = 126, epochs = 10 } },
  -- Seed 004 counts 1000 iterations (minibatches) and no batch size: with
  -- 120 images per batch, 2 epochs are exactly 1000 of them. Its beta weighs
  -- the KL against the mean log-likelihood of a minibatch; bbb's kl_weight
  -- weighs it against the summed one, hence 0.001 x 120.
  s4 = { about = "seed 004: 784-1024-10 ReLU, Gaussian prior sigma 1, initial variance 1e-3 (rho -3.44), "
         .. "beta 0.001 on the mean log-likelihood (kl weight 0.001 x batch 120), Adam lr 1e-3, pixels / 255, "
         .. "batch 120 so that 2 epochs are its 1000 iterations, its four curves in out/mnist-s4-curves.png "
         .. "(it reports train 0.987, test 0.979, ELBO -2.914, log-likelihood -0.0727, KL 2841)",
         flags = { hidden = 1024, layers = 1, activation = "relu", prior = "gaussian", sigma1 = 1,
                   rho_init = math.log(math.exp(math.sqrt(1e-3)) - 1), kl_weight = 0.001 * 120, batch = 120,
                   optim = "adam", lr = 1e-3, lr_decay = 1, epochs = 2, pixel_scale = 255,
                   curves = "out/mnist-s4-curves.png" },
         seed = { beta = 0.001, train = { acc = 0.987, elbo = -2.88892, ll = -0.04794 },
                  test = { acc = 0.979, elbo = -2.91372, ll = -0.07274 }, kl = 2840.97729 } },
}
for _, units in ipairs { 400, 800, 1200 } do
  mnist.PRESETS["adam-" .. units] = {
    about = ("a 784-%d-%d-10 ReLU net, scale-mixture prior, pixels / 126, batch 128, trained by a recipe "
      .. "of our own: seed 002's best grid point (Adam lr 1e-3, pi 1/2, sigma1 1, sigma2 e^-6, 3 samples); "
      .. "rho starts at -6 (sigma 0.0025), the best of -3, -5, -6, -8 in 10-epoch runs on a 10,000-image "
      .. "validation split"):format(units, units),
    flags = { hidden = units, layers = 2, activation = "relu", prior = "mixture", pi = 0.5,
              sigma1 = 1, sigma2 = E(-6), samples = 3, optim = "adam", lr = 1e-3, batch = 128,
              pixel_scale = 126, rho_init = -6 },
  }
end

-- What the paper's protocol (scripts/table1.lua --protocol paper) chose for
-- the scale-mixture row of each width, on the validation error, from its
-- grid of learning rates, samples per minibatch and priors; the search's
-- table is in doc/results (doc/results/table1_paper_N.json).
mnist.PAPER_CHOICE = {
  [400] = { lr = 1e-3, samples = 1, pi = 0.75, log_sigma1 = 1, log_sigma2 = 7,
            from = "doc/results/table1_paper_400.json: 1.66% test error after 243 epochs (MC), 1.63% with "
              .. "posterior means; the paper's 1.36%" },
  [800] = { lr = 1e-3, samples = 1, pi = 0.25, log_sigma1 = 0, log_sigma2 = 7,
            from = "doc/results/table1_paper_800.json, its search narrowed to lr 1e-3 and 1 or 2 samples: 1.89% "
              .. "test error after 243 epochs (MC), 1.91% with posterior means; the paper's 1.34%" },
  [1200] = { lr = 1e-3, samples = 1, pi = 0.5, log_sigma1 = 0, log_sigma2 = 8,
             from = "doc/results/table1_paper_1200.json, its search narrowed to lr 1e-3 and 1 or 2 samples: 1.69% "
               .. "test error after 243 epochs (MC), 1.72% with posterior means; the paper's 1.32%" },
}
for units, c in pairs(mnist.PAPER_CHOICE) do
  mnist.PRESETS["paper-" .. units] = {
    about = ("the paper's protocol for Table 1 (Blundell et al. 2015) and the setting it chose: "
      .. "784-%d-%d-10 ReLU, scale-mixture prior pi %g, sigma1 %s, sigma2 e^-%d, %d sample(s) per minibatch, "
      .. "plain SGD (lr %g, no momentum, no decay) on the summed minibatch cost, pixels / 126, batch 128, "
      .. "50,000 training and 10,000 validation images, 243 epochs (%s)"):format(units, units, c.pi,
      c.log_sigma1 == 0 and "1" or ("e^-" .. c.log_sigma1), c.log_sigma2, c.samples, c.lr,
      c.from),
    flags = { hidden = units, layers = 2, activation = "relu", prior = "mixture", pi = c.pi,
              sigma1 = E(-c.log_sigma1), sigma2 = E(-c.log_sigma2), samples = c.samples, optim = "sgd",
              momentum = 0, lr = c.lr, lr_decay = 1, reduction = "sum", batch = 128, pixel_scale = 126,
              val = 10000, epochs = 243 },
  }
end

-- Flags that define the run: a resumed run must keep them.
mnist.RUN_FLAGS = { "dataset", "model", "hidden", "layers", "activation", "dropout", "prior", "pi",
  "sigma1", "sigma2", "estimator", "optim", "batch", "pixel_scale", "val", "limit",
  "samples", "reduction", "kl_weight", "seed", "rho_init", "mu_init", "lr", "momentum", "lr_decay", "rho_lr_scale" }

--- mnist.parser() -> the command line of the experiment (an argparse parser).
function mnist.parser()
  local parser = recipe.parser("mnist.lua", "Train a Bayesian MLP on MNIST with Bayes by Backprop "
    .. "(Blundell et al. 2015), or a plain or dropout MLP baseline, and report test accuracy "
    .. "with posterior means and an MC ensemble.", {
    presets = mnist.PRESETS, run_flags = mnist.RUN_FLAGS,
    flags = { "dataset" } })
  flags.option(parser, "--model", "bbb (Bayes by Backprop: 2x400, 30 epochs, about 98.3% in about 40 s on 2 cores; "
    .. "a plain mlp gets about 98.5%, see README), mlp or dropout; cnn, cnn-plain or cnn-dropout: "
    .. "the LeNet-5-style bbb.nn.lenet (cnn: 20 epochs, --shift 2, --kl-weight 0.0002 unless given, "
    .. "99.39% on MNIST in about 5 minutes on 2 cores; cnn-plain and cnn-dropout: 10 epochs).", "bbb")
    :convert(cli.choice { "bbb", "mlp", "dropout", "cnn", "cnn-plain", "cnn-dropout" })
  flags.option(parser, "--shift", "Move each training image by its own random offset of up to N pixels "
    .. "in each direction, every step (augmentation; 0: off).", "0")
    :convert(cli.integer { min = 0, max = 8 })
  flags.option(parser, "--cnn-hidden", "Units of the CNN's dense layer (default: --hidden when that is given, "
    .. "else 256).")
    :convert(cli.positive_integer { max = 1 << 16 })
  flags.option(parser, "--channels", "The CNN's two convolutions' channels, A,B.", "16,32")
    :convert(cli.int_list(2, { max = 1024 }))
  recipe.declare(parser, { "hidden", "layers", "activation", "dropout", "prior", "pi", "sigma1", "sigma2",
    "samples", "estimator", "kl_weight", "reduction", "optim", "lr", "lr_decay", "momentum", "rho_init",
    "rho_lr_scale", "mu_init", "batch", "epochs", "seed", "threads", "test_samples", "pixel_scale", "val", "limit",
    "test_limit", "log", "checkpoint", "checkpoint_every", "resume", "save" })
  flags.option(parser, "--curves", "Plot the minibatch ELBO, log-likelihood, KL and accuracy against iterations "
    .. "here (seed 004's four curves; ELBO = mean log-likelihood - beta KL).")
    :convert(cli.output_path { ext = { "png", "svg" } })
  recipe.declare(parser, { "summary", "distributed", "no_test" })
  parser._bbb_spec.outputs = { "curves" }
  return parser
end

-- Each model's own defaults, our best recipe for it (doc/results holds the
-- runs): for the Bayesian LeNet, every training image moved by up to 2
-- pixels each step and the complexity term tempered, for 20 epochs.
mnist.MODEL_DEFAULTS = {
  cnn = { epochs = 20, shift = 2, kl_weight = 0.0002 },
  ["cnn-plain"] = { epochs = 10 }, ["cnn-dropout"] = { epochs = 10 },
}

-- The kind an optimizer's saved state names, by --optim.
local OPTIMIZER_KIND = { adam = "Adam", sgd = "SGD", rmsprop = "RMSprop" }

--- mnist.idle_flag(args, given) -> message | nil: the first flag given
-- (given[key] true) that the run args describes cannot use, and why.
function mnist.idle_flag(args, given)
  local cnn = args.model:find("^cnn") ~= nil
  local model = ("--model %s"):format(args.model)
  local rules = {
    { "momentum", args.optim ~= "sgd", ("--optim %s has no momentum (only sgd has)"):format(args.optim) },
    { "checkpoint_every", not args.checkpoint and not args.resume, "no checkpoint is written without --checkpoint" },
    { "cnn_hidden", not cnn, model .. " is no CNN (cnn, cnn-plain and cnn-dropout are)" },
    { "channels", not cnn, model .. " is no CNN (cnn, cnn-plain and cnn-dropout are)" },
    { "dropout", args.model ~= "dropout" and args.model ~= "cnn-dropout",
      model .. " has no dropout (dropout and cnn-dropout have)" },
    { "layers", cnn, model .. " is a CNN: its layers are LeNet's (--cnn-hidden sets the dense layer's units)" },
    { "activation", cnn, model .. " is a CNN, whose activations are ReLU" },
    { "test_limit", args.no_test, "--no-test reads no test image" },
  }
  for _, r in ipairs(rules) do
    if given[r[1]] and r[2] then return ("--%s cannot act in this run: %s"):format(r[1]:gsub("_", "-"), r[3]) end
  end
end

--- mnist.parse([argv]) -> args: the command line (default: the script's),
-- checked, with --preset and --resume applied, then the model's own
-- defaults (mnist.MODEL_DEFAULTS) for what neither the command line, the
-- preset nor the resumed run set. A flag the run cannot use
-- (mnist.idle_flag) and a resumed checkpoint whose saved state is not a
-- run's (recipe.check_train_state) are refused here, before any work.
function mnist.parse(argv)
  local parser = mnist.parser()
  local args, given = recipe.parse(parser, argv)
  local preset = args.preset and mnist.PRESETS[args.preset].flags or {}
  if not args._resume then
    for k, v in pairs(mnist.MODEL_DEFAULTS[args.model] or {}) do
      if not given[k] and preset[k] == nil then args[k] = v end
    end
  end
  local why = mnist.idle_flag(args, given)
  if why then parser:error(why) end
  if args.no_test and not args.val then
    parser:error("--no-test needs --val N: without a test set the run reports on its validation images")
  end
  if args._resume then
    local ok, err = recipe.check_train_state(args._resume, args.resume, { epochs = args.epochs, batch = args.batch,
      optimizer = OPTIMIZER_KIND[args.optim], schedule = true, generators = { "shuffle", "default" } })
    if not ok then parser:error(err) end
  end
  return args
end

--- mnist.options{key = value, ...} -> args: options given as a table, checked
-- exactly as the same flags on a command line would be.
function mnist.options(t)
  return mnist.parse(recipe.argv_of(t))
end

local function fail(msg)
  error({ usage = msg }, 0)
end

-- Under MPI, rank 0's flags are the job's: every rank checks its own
-- against them. Returns dist (or nil), rank, nranks.
local function join_ranks(args)
  if not args.distributed then return nil, 0, 1 end
  local dist = bbb.dist
  if not dist.available then fail("--distributed: " .. dist.reason) end
  local rank, nranks = dist.rank(), dist.size()
  local json = require "bbb.json"
  local mine = json.encode(recipe.saved_args(args))
  local root = dist.broadcast_string(rank == 0 and mine or nil, 0)
  if root ~= mine then
    local theirs = json.decode(root)
    local keys = {}
    for k in pairs(theirs) do keys[#keys + 1] = k end
    for k in pairs(recipe.saved_args(args)) do if theirs[k] == nil then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v, mine_v = theirs[k], args[k]
      local same = (type(v) == "number" and type(mine_v) == "number") and v == mine_v
        or tostring(v) == tostring(mine_v)
      if not same then
        io.stderr:write(("mnist.lua: rank %d: --%s is %s here but %s on rank 0: every rank must "
          .. "get the same flags\n"):format(rank, k:gsub("_", "-"), tostring(mine_v),
          tostring(type(v) == "number" and math.tointeger(v) or v)))
        dist.abort(2)
      end
    end
  end
  if args.batch < nranks then
    fail(("--batch %d is smaller than the %d ranks"):format(args.batch, nranks))
  end
  return dist, rank, nranks
end

-- The training, validation (--val) and test sets, all from folder.
local function load_sets(args, folder)
  local load = args.dataset == "mnist" and bbb.data.load_mnist or bbb.data.load_fashion_mnist
  local scale = 1 / args.pixel_scale
  local train_set = load{ root = folder, split = "train", scale = scale, limit = args.limit }
  local test_set = not args.no_test and load{ root = folder, split = "test", scale = scale, limit = args.test_limit }
    or nil
  local val_set
  if args.val then
    if args.val >= train_set.n then
      fail(("--val must be smaller than the %d training images, got %d"):format(train_set.n, args.val))
    end
    train_set, val_set = bbb.train.split_validation(train_set, args.val)
  end
  return train_set, val_set, test_set
end

-- The network --model names, with the resumed run's weights when resuming.
local function build_net(args, train_set, gen)
  local sizes = { train_set.x:size(2) }
  for _ = 1, args.layers do sizes[#sizes + 1] = args.hidden end
  sizes[#sizes + 1] = #train_set.classes
  local net
  if args.model:find("^cnn") then
    -- the dense layer: --hidden when given, else LeNet's 256; kept with the
    -- run's flags, so a resumed run builds the same network
    args.cnn_hidden = args.cnn_hidden or (args._given and args._given.hidden and args.hidden) or 256
    net = bbb.nn.lenet{ bayes = args.model == "cnn", prior = args.model == "cnn" and recipe.prior(args) or nil,
      channels = cli.ints(args.channels), hidden = { args.cnn_hidden },
      estimator = args.estimator, rho_init = args.rho_init, mu_scale = args.mu_init,
      dropout = args.model == "cnn-dropout" and args.dropout or nil, generator = gen }
  else
    net = recipe.mlp(args, sizes, gen)
  end
  if args._resume then
    local ok, err = pcall(net.load_state_dict, net, args._resume.tensors.model)
    if not ok then fail(("--resume: %s"):format(err)) end
  end
  return net
end

-- The weight estimator draws the same weights on every rank (the shared
-- generator), so the job is the single-process estimator with the same
-- global batch; the per-example estimators and dropout draw their own noise
-- on each rank, from a generator keyed by (seed, rank). Returns it, or nil.
local function rank_generator(net, args, rank, nranks)
  if nranks > 1 and (args.estimator ~= "weight" or args.model == "dropout") then
    local rank_gen = bbb.Generator(args.seed + rank * (1 << 32))
    net:apply(function(l) if l.generator then l.generator = rank_gen end end)
    return rank_gen
  end
end

local function print_setup(print, args, net, train_set, val_set, test_set)
  print(("%s: %d training, %s%d test images, pixels / %g%s"):format(args.dataset, train_set.n,
    val_set and ("%d validation, "):format(val_set.n) or "", test_set and test_set.n or 0, args.pixel_scale,
    args.preset and (", preset " .. args.preset) or ""))
  print(tostring(net))
  print(("optimizer %s lr %g (x%g per epoch), batch %d, %d MC sample(s), kl weight %s, %s loss, %d thread(s)")
    :format(args.optim, args.lr, args.lr_decay, args.batch, args.samples, tostring(args.kl_weight),
      args.reduction, args.threads))
  if args._resume then
    local st = args._resume.meta.state
    print(("resuming %s after epoch %d%s"):format(args.resume, math.tointeger(st.epoch),
      math.tointeger(st.batch) > 0 and (", batch %d"):format(math.tointeger(st.batch)) or ""))
  end
  io.stdout:flush()
end

-- Seed 004's four curves, per minibatch, averaged over windows of 20
-- iterations (the MC complexity of one step is noisy): the curves, and the
-- on_step hook that fills them.
local function curve_recorder(args, opt)
  local curves, window = { it = {}, elbo = {}, ll = {}, kl = {}, acc = {}, steps = 0 }, { n = 0 }
  return curves, function(_, terms)
    curves.steps = curves.steps + 1
    local B = terms.nll ~= 0 and terms.nll_sum / terms.nll or args.batch
    for k, v in pairs { elbo = -(terms.nll + terms.complexity_per_example), ll = -terms.nll,
                        kl = terms.complexity, acc = (terms.correct or 0) / B } do
      window[k] = (window[k] or 0) + v
    end
    window.n = window.n + 1
    if window.n == 20 then
      curves.it[#curves.it + 1] = opt.t
      for _, k in ipairs { "elbo", "ll", "kl", "acc" } do curves[k][#curves[k] + 1] = window[k] / 20 end
      window = { n = 0 }
    end
  end
end

-- Each Bayesian layer's mean weight sigma in the log's epoch records: a
-- posterior that shrinks to a point (an SGD net in disguise) shows there.
local function sigma_recorder(net)
  return function(rec)
    local means = {}
    net:apply(function(m)
      if m.weight_rho then means[#means + 1] = m.weight_rho:softplus():mean():item() end
    end)
    if #means > 0 then rec.sigma_mean = means end
  end
end

-- --shift: a generator per step, from the seed, the epoch and the step, so
-- a resumed run moves the images as the unbroken one would.
local function shifter(args)
  if args.shift == 0 then return nil end
  return function(xb, epoch, i)
    local g = bbb.Generator(((args.seed * 1009 + epoch) * 100003 + i) % (1 << 53))
    return bbb.data.shift(xb, 28, 28, args.shift, g)
  end
end

-- The seed's figures beside ours (seed 004: ELBO = mean log-likelihood - beta
-- KL), as rows {name, accuracy, log-likelihood, seed's}; nil when the preset
-- has no seed figures.
local function seed_rows(args, r)
  local seed = args.preset and mnist.PRESETS[args.preset].seed
  if not (seed and type(args.kl_weight) == "number") then return nil end
  local net = r.net
  local function ll_of(ds)
    local total = 0
    for _, xb, yb in bbb.data.batches(ds, 1000) do
      total = total + bbb.metrics.nll(net:predict(xb, { samples = args.test_samples }), yb) * xb:size(1)
    end
    return -total / ds.n
  end
  -- the training figures on (at most) its first 10000 images, to keep the evaluation short
  local train_part = r.train_set.n > 10000 and bbb.data.split(r.train_set, 10000) or r.train_set
  local train_acc = bbb.train.accuracy(net, train_part)
  local last = r.history[#r.history]
  return { beta = args.kl_weight / args.batch, train_n = train_part.n, seed = seed,
    kl = last.complexity_total / (r.n_batches * args.kl_weight),
    rows = { { "train", train_acc, ll_of(train_part), seed.train },
             r.test_set and { "test", r.test_acc_mean, ll_of(r.test_set), seed.test } or nil } }
end

-- The seed's figures beside ours (seed_rows) as the summary holds them:
-- per set, our accuracy, log-likelihood and ELBO (= log-likelihood - beta
-- KL), and the seed's.
local function seed_summary(s)
  if not s then return nil end
  local rows = {}
  for i, row in ipairs(s.rows) do
    rows[i] = { set = row[1], accuracy = row[2], log_likelihood = row[3], elbo = row[3] - s.beta * s.kl,
      seed = { accuracy = row[4].acc, log_likelihood = row[4].ll, elbo = row[4].elbo } }
  end
  return { beta = s.beta, kl = s.kl, seed_kl = s.seed.kl, train_n = s.train_n, rows = rows }
end

-- The model (--save) and the summary (--summary), by rank 0.
local function write_outputs(args, r)
  if args.save then bbb.save(args.save, { model = r.net, args = r.saved_args }) end
  if args.summary then
    cli.write_file(args.summary, require("bbb.json").encode{ args = r.saved_args, epochs = r.history, environment = bbb.core.environment(),
      test_acc_mean = r.test_acc_mean, test_acc_mc = r.test_acc_mc, val_acc_mean = r.val_acc_mean,
      val_acc_mc = r.val_acc_mc, seconds = r.seconds, images = r.images,
      seed = seed_summary(r.seed) })
  end
end

--- mnist.run(args) -> result: trains and tests, on the data of the one
-- folder recipe.image_folder names (printed first); result holds status
-- ("done" or "interrupted"), history (the epoch records), test_acc_mean,
-- test_acc_mc (under --no-test val_acc_mean and val_acc_mc instead; scored
-- names which), seconds, net, images (the training, validation and test
-- images: {train =, val =, test =}), curves (with --curves), seed (the seed's
-- figures beside ours, with a seed's preset), lead (rank 0), and for an
-- interrupted run epoch, batch, checkpoint and signal. mnist.report and
-- mnist.plot show it.
function mnist.run(args)
  if (args.rho_lr_scale or 1) ~= 1 and args.model ~= "bbb" and args.model ~= "cnn" then
    fail(("--rho-lr-scale: --model %s has no rho (only bbb and cnn have)"):format(args.model))
  end
  local dist, rank, nranks = join_ranks(args)
  local lead = rank == 0
  -- said first, so a run never trains on data it does not name
  local folder, name = recipe.image_folder(args.dataset)
  if not folder then error(name, 0) end
  if lead then
    print(("data: %s from %s"):format(name, folder))
    io.stdout:flush()
  end
  bbb.set_num_threads(args.threads)
  bbb.manual_seed(args.seed)
  local gen = bbb.Generator(args.seed)
  local train_set, val_set, test_set = load_sets(args, folder)
  local net = build_net(args, train_set, gen)
  local rank_gen = rank_generator(net, args, rank, nranks)
  local n_batches = bbb.data.num_batches(train_set.n, args.batch)
  local elbo = bbb.elbo.ELBO{ n_data = train_set.n, n_batches = n_batches, samples = args.samples,
    kl_weight = args.kl_weight, reduction = args.reduction }
  local opt, schedule = recipe.optimizer(args, net)
  print_setup(lead and print or function() end, args, net, train_set, val_set, test_set)

  local saved_args = recipe.saved_args(args)
  local curves, on_step = curve_recorder(args, opt)
  local t_start = bbb.core.clock()
  local result = bbb.train.fit{
    model = net, elbo = elbo, optimizer = opt, schedule = schedule, data = train_set,
    val = val_set, test = test_set, batch_size = args.batch, epochs = args.epochs,
    generator = gen, generators = { default = bbb.core.default_generator, rank = rank_gen },
    dist = dist, log = args.log, checkpoint = args.checkpoint or args.resume,
    checkpoint_every = args.checkpoint_every,
    interrupt_checkpoint = function() return recipe.interrupt_path("mnist-interrupted") end,
    resume = args._resume, args = saved_args,
    on_step = args.curves and on_step or nil, on_epoch = sigma_recorder(net), augment = shifter(args),
  }
  result.nranks, result.lead = nranks, lead
  if result.status == "interrupted" then
    if dist then dist.finalize() end
    return result
  end

  -- the figures the run reports: on the test set, or under --no-test on the validation images
  local scored = test_set and "test" or "val"
  result.scored = scored
  result[scored .. "_acc_mean"] = bbb.train.accuracy(net, test_set or val_set)
  result[scored .. "_acc_mc"] = bbb.train.accuracy(net, test_set or val_set, { samples = args.test_samples })
  result.seconds = bbb.core.clock() - t_start
  result.net, result.args, result.saved_args, result.n_batches = net, args, saved_args, n_batches
  result.train_set, result.test_set = train_set, test_set
  result.images = { train = train_set.n, val = val_set and val_set.n or nil, test = test_set and test_set.n or 0 }
  result.curves = args.curves and curves or nil
  if lead then
    result.seed = seed_rows(args, result)
    write_outputs(args, result)
  end
  if dist then dist.finalize() end
  return result
end

--- mnist.report(result): the test accuracies, the run's time, the seed's
-- figures beside ours, and where the model went (rank 0 of a finished run).
function mnist.report(r)
  if r.status == "interrupted" or not r.lead then return end
  local args = r.args
  local set = r.scored
  print(("%s accuracy: posterior means %.2f%%, MC ensemble of %d samples %.2f%% (%s error %.2f%%)")
    :format(set == "val" and "validation (--no-test)" or "test", 100 * r[set .. "_acc_mean"], args.test_samples,
      100 * r[set .. "_acc_mc"], set == "val" and "validation" or "test", 100 * (1 - r[set .. "_acc_mc"])))
  print(("total %.1f s"):format(r.seconds))
  local s = r.seed
  if s then
    print(("%-6s %9s %9s %10s %10s %10s   (beta %g; ours: accuracy with posterior means, log-likelihood of "
      .. "the %d-sample ensemble, train on %d images, KL = MC complexity of the last epoch)"):format("", "accuracy",
      "ELBO", "log-lik", "KL", "", s.beta, args.test_samples, s.train_n))
    for _, row in ipairs(s.rows) do
      print(("%-6s %9.4f %9.4f %10.5f %10.1f   ours"):format(row[1], row[2], row[3] - s.beta * s.kl, row[3], s.kl))
      print(("%-6s %9.4f %9.4f %10.5f %10.1f   seed"):format("", row[4].acc, row[4].elbo, row[4].ll, s.seed.kl))
    end
  end
  if args.save then print(("model saved to %s"):format(args.save)) end
end

--- mnist.plot(result): with --curves, seed 004's four minibatch curves.
function mnist.plot(r)
  if r.status == "interrupted" or not r.lead or not r.curves then return end
  if #r.curves.it == 0 then
    print(("--curves: no plot written to %s: the run trained %d step(s), fewer than the 20 that each point "
      .. "of the curves averages"):format(r.args.curves, r.curves.steps))
    return
  end
  local args, curves, panels = r.args, r.curves, {}
  for _, c in ipairs { { "elbo", "ELBO per example" }, { "acc", "accuracy (minibatch, one weight sample)" },
                       { "ll", "log-likelihood per example" }, { "kl", "KL (nats, MC estimate)" } } do
    panels[#panels + 1] = { title = c[2], xlabel = "iteration", key = "off",
      series = { { x = curves.it, y = curves[c[1]], color = "#08519c" } } }
  end
  print("wrote " .. require("bbb.app.plot").panels{ file = args.curves, size = { 1200, 800 }, layout = { 2, 2 },
    page_title = ("%s, %s: minibatch figures averaged over 20 iterations"):format(args.dataset,
      args.preset and ("preset " .. args.preset) or "bbb"), panels = panels })
end

return mnist

--- bbb.app.experiments.shift: can you trust the model's uncertainty under
-- dataset shift? The evaluation of Ovadia et al. (2019): each method's
-- accuracy, NLL, Brier score and ECE on the test set rotated 0-180 degrees
-- and translated (rolled 0-26 pixels, or shifted 0-14 with --translation
-- zero), and how well its confidence tells the test
-- set from another data set and from noise. scripts/shift.lua is its
-- command line:
--
--   local config = shift.parse(arg)    -- or shift.options{ methods = {"plain"}, ... }
--   local result = shift.run(config)   -- what DIR/shift.json holds
--   shift.report(result)
--   shift.plot(result)
--
-- Every network is trained by scripts/mnist.lua in its own process (the
-- shared recipe and training loop), saved under DIR/models and reused by a
-- later run: a stopped run loses at most the models in training, which
-- resume from their checkpoints.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local sys = require "bbb.app.sys"
local json = require "bbb.json"

local shift = {}
local metrics = bbb.metrics

shift.METHODS = { "plain", "temperature", "dropout", "ensemble", "bbb", "bbb-ensemble", "laplace",
  "laplace-sampled" }
shift.DEFAULT_METHODS = { "plain", "temperature", "dropout", "ensemble", "bbb", "laplace", "laplace-sampled" }
-- Translations: Ovadia et al.'s roll with wrap-around by 2-26 pixels, or
-- the zero-filled shift by 0-14 pixels that cuts part of the digit off.
shift.ANGLES, shift.PIXELS = {}, { roll = {}, zero = {} }
for a = 0, 180, 15 do shift.ANGLES[#shift.ANGLES + 1] = a end
for k = 0, 26, 2 do shift.PIXELS.roll[#shift.PIXELS.roll + 1] = k end
for k = 0, 14 do shift.PIXELS.zero[#shift.PIXELS.zero + 1] = k end
-- Draws of the last layer for laplace-sampled: cheap (one product per draw),
-- so never fewer than this whatever --test-samples says.
local LAPLACE_DRAWS = 100
local SIDE = 28
local CHUNK = 1000   -- images per forward pass: bounds the convolutions' memory
-- The ETA counts work in units of one evaluated shift of every method; a
-- net's training costs about ten of them (10 CNN epochs against 28 shifts
-- x 25 passes of the test set).
local NET_UNITS = 10
local METRICS = { "acc", "nll", "brier", "ece" }
-- scripts/mnist.lua's --model for each kind of network
local MODEL_OF = { cnn = { plain = "cnn-plain", dropout = "cnn-dropout", bbb = "cnn" },
                   mlp = { plain = "mlp", dropout = "dropout", bbb = "bbb" } }
local NEEDS = { plain = { "plain" }, temperature = { "plain" }, laplace = { "plain" }, ["laplace-sampled"] = { "plain" },
  dropout = { "dropout" },
  ensemble = { "plain_members" }, bbb = { "bbb" }, ["bbb-ensemble"] = { "bbb_members" } }

local epilog = "Methods: plain (one net), temperature (plain, its logits divided by a temperature fitted "
  .. "on the validation rows), dropout (MC dropout), ensemble (--members plain nets of different seeds, "
  .. "their probabilities averaged; the first is the plain net), bbb (Bayes by Backprop, --estimator), "
  .. "bbb-ensemble (--members BBB nets), laplace (the plain net's last layer under a Kronecker-factored "
  .. "Laplace posterior, prior precision by the marginal likelihood, probit predictive), laplace-sampled "
  .. "(the same posterior, its predictive averaged over at least 100 draws of the last layer). Models are "
  .. "trained by scripts/mnist.lua on the training set less its last --val images, --jobs processes at "
  .. "a time, and kept in DIR/models: a rerun (or --from DIR) reuses them, a stopped one resumes. "
  .. "Every net sees the same training images (mnist.lua --shift 0 unless given after --). "
  .. "Cost, measured with --model cnn on 2 shared cores: 10 epochs over the 55,000 training images take "
  .. "150-190 s per net (plain, dropout or BBB, each about 11-20 s per epoch); the default methods train 7 "
  .. "nets per seed, about 20 minutes. Evaluation runs at about 17,000 CNN passes of one image a second: "
  .. "with 100 MC samples (the default), MC dropout and BBB each cost about 28 minutes per seed on the 28 shifts "
  .. "of the 10,000 test images, 6 with --test-limit 2000; a BBB ensemble costs --members times that. Without --epochs each net trains for mnist.lua's default "
  .. "for its model (cnn: 20 epochs for BBB, 10 for the others)."

--- shift.parser() -> the command line of the experiment.
function shift.parser()
  local parser = recipe.parser("shift.lua", "Uncertainty under dataset shift (Ovadia et al. 2019): "
    .. "accuracy, NLL, Brier and ECE of each method on rotated and translated test images, and "
    .. "out-of-distribution detection.", { flags = { "dataset" }, defaults = { epochs = false, val = "5000",
    test_samples = "100", estimator = false, jobs = "1" } })
  parser:epilog(epilog)
  flags.option(parser, "--methods", "Methods to compare: " .. table.concat(shift.METHODS, ", ") .. ".")
    :args("+"):convert(cli.choice(shift.METHODS))
  flags.option(parser, "--model", "cnn (LeNet-5-style bbb.nn.lenet) or mlp.", "cnn"):convert(cli.choice { "cnn", "mlp" })
  recipe.declare(parser, { "members" })
  flags.option(parser, "--bbb-recipe", "The BBB CNN's recipe: uncertainty (mnist.lua --preset cnn-uncertainty, chosen on "
    .. "validation images under shift) or accuracy (mnist.lua --model cnn's own defaults).", "uncertainty")
    :convert(cli.choice { "uncertainty", "accuracy" })
  flags.option(parser, "--eval", "test (the report: the test images, read once) or validation (to choose a recipe: "
    .. "half the --val images fit the temperature, the other half are shifted and scored; no test image of --dataset is read).",
    "test"):convert(cli.choice { "test", "validation" })
  flags.option(parser, "--translation", "roll (Ovadia et al.: wrap-around, 0-26 pixels by 2) or zero (zero-filled, "
    .. "0-14 pixels: part of the digit is cut off).", "roll"):convert(cli.choice { "roll", "zero" })
  recipe.declare(parser, { "estimator", "epochs", "seed" })
  flags.option(parser, "--seeds", "Repeat everything for seeds --seed, --seed + 1, ...: the tables are means.", "1")
    :convert(cli.positive_integer { max = 100 })
  recipe.declare(parser, { "val", "limit", "test_limit", "test_samples" })
  recipe.declare(parser, { "noise_n" })
  recipe.declare(parser, { "jobs" })
  recipe.declare(parser, { "threads" })
  flags.option(parser, "--out", "Folder of shift.json, the figure and the trained models.", "out/shift")
    :convert(cli.output_dir())
  flags.option(parser, "--from", "Take the trained models from this folder's models/ (as written by --out); "
    .. "none is trained."):convert(cli.output_dir())
  parser:argument("mnist_flags", "Flags for every scripts/mnist.lua training run, after --.") :args("*")
  return parser
end

-- Bad input: recipe.main prints "shift.lua: message" and exits 2.
local function fail(msg, ...) error({ usage = msg:format(...) }, 0) end

-- The prior written in Lua given to mnist.lua after -- (--prior FILE.lua),
-- loaded now: a model trained with it opens only with it, and a file that
-- is no prior is refused before any net trains.
local function lua_prior_of(flags)
  local path
  for i, w in ipairs(flags) do
    if w == "--prior" then path = flags[i + 1] else path = w:match("^%-%-prior=(.*)$") or path end
  end
  if not (path and path:find("%.lua$")) then return nil end
  local ok, p = pcall(require("bbb.prior").from_file, path)
  if not ok then fail("--prior %s after --: %s", path, (tostring(p):gsub("^[^\n]-:%d+: ", ""))) end
  return p
end

--- shift.parse([argv]) -> config: the command line, checked.
function shift.parse(argv)
  argv = argv or arg
  local args = recipe.parse(shift.parser(), argv)
  args.methods = args.methods or shift.DEFAULT_METHODS
  local seen = {}
  for _, m in ipairs(args.methods) do
    if seen[m] then fail("--methods: %s is given twice", m) end
    seen[m] = true
  end
  if args.from and not bbb.core.sys.kind(args.from .. "/models") then
    fail("--from: %s holds no models/ folder (a folder written by --out)", args.from)
  end
  if args.limit and args.val >= args.limit then
    fail("--val %d must be smaller than --limit %d (the validation rows are held out of those images)",
      args.val, args.limit)
  end
  for _, w in ipairs(args.mnist_flags) do
    for _, own in ipairs { "--model", "--seed", "--save", "--checkpoint", "--resume", "--val", "--epochs",
                           "--dataset", "--limit", "--estimator" } do
      if w == own or w:find("^" .. own .. "=") then
        fail("%s after --: shift.lua sets it for each net it trains (give shift.lua's own flag)", own)
      end
    end
  end
  args._prior = lua_prior_of(args.mnist_flags)
  for _, set in ipairs { args.dataset, args.dataset == "mnist" and "fashion" or "mnist" } do
    local folder, why = recipe.image_folder(set)   -- both sets whole, before any net trains
    if not folder then error(why, 0) end
  end
  local ok, err = bbb.core.sys.mkdir_p(args.out .. "/models")
  if not ok then fail("--out: %s", err) end
  args._script_dir = (arg and arg[0] or "scripts/shift.lua"):match("^(.*)/[^/]*$") or "."
  return args
end

--- shift.options(t) -> config: settings as a table, checked as the flags.
function shift.options(t)
  local extra = t.mnist_flags
  local copy = {}
  for k, v in pairs(t) do if k ~= "mnist_flags" and k ~= "methods" then copy[k] = v end end
  local argv = recipe.argv_of(copy)
  if t.methods then
    argv[#argv + 1] = "--methods"
    for _, m in ipairs(t.methods) do argv[#argv + 1] = m end
  end
  if extra then
    argv[#argv + 1] = "--"
    for _, w in ipairs(extra) do argv[#argv + 1] = w end
  end
  return shift.parse(argv)
end

local function has_method(config, name)
  for _, m in ipairs(config.methods) do if m == name then return true end end
  return false
end

--------------------------------------------------------------------------
-- Training: one scripts/mnist.lua process per network.

local function seeds_of(config)
  local list = {}
  for i = 0, config.seeds - 1 do list[#list + 1] = config.seed + i end
  return list
end

-- The networks seed s needs: {name, kind, seed} with kind plain, dropout
-- or bbb; member m of an ensemble has seed s + 1000 (m - 1), so member 1
-- is the single net of its kind.
local function nets_for(config, s)
  local want = {}
  for _, m in ipairs(config.methods) do
    for _, need in ipairs(NEEDS[m]) do want[need] = true end
  end
  local nets, seen = {}, {}
  local function add(kind, m)
    local name = ("%s-s%d%s"):format(kind, s, m > 1 and ("-m%d"):format(m) or "")
    if not seen[name] then
      seen[name] = true
      nets[#nets + 1] = { name = name, kind = kind, seed = s + 1000 * (m - 1), member = m }
    end
  end
  for _, kind in ipairs { "plain", "dropout", "bbb" } do
    if want[kind] then add(kind, 1) end
    if want[kind .. "_members"] then
      for m = 1, config.members do add(kind, m) end
    end
  end
  return nets
end

local function model_path(dir, name) return ("%s/models/%s.safetensors"):format(dir, name) end
local function exists(path) return bbb.core.sys.kind(path) == "file" end

-- The scripts/mnist.lua command that trains net (resuming its checkpoint).
local function train_argv(config, net)
  local dir = config.out .. "/models/"
  local ckpt = dir .. net.name .. ".ckpt"
  local threads = math.max(1, config.threads // config.jobs)
  local argv = { "--model", MODEL_OF[config.model][net.kind], "--dataset", config.dataset, "--seed", net.seed,
    "--val", config.val, "--save", model_path(config.out, net.name), "--threads", threads,
    "--test-samples", 1, "--test-limit", math.min(config.test_limit or 2000, 2000) }
  if exists(ckpt) then
    table.move({ "--resume", ckpt }, 1, 2, #argv + 1, argv)
  else
    table.move({ "--checkpoint", ckpt }, 1, 2, #argv + 1, argv)
  end
  if config.epochs then table.move({ "--epochs", config.epochs }, 1, 2, #argv + 1, argv) end
  if config.limit then table.move({ "--limit", config.limit }, 1, 2, #argv + 1, argv) end
  if net.kind == "bbb" and config.estimator then table.move({ "--estimator", config.estimator }, 1, 2, #argv + 1, argv) end
  if net.kind == "bbb" and config.model == "cnn" and config.bbb_recipe == "uncertainty" then
    table.move({ "--preset", "cnn-uncertainty" }, 1, 2, #argv + 1, argv)
  end
  -- every net sees the same training images: mnist.lua's cnn recipe moves
  -- them by up to 2 pixels, which would favour one method under translation
  local shifted = false
  for _, w in ipairs(config.mnist_flags) do shifted = shifted or w == "--shift" or w:find("^%-%-shift=") ~= nil end
  if not shifted then table.move({ "--shift", 0 }, 1, 2, #argv + 1, argv) end
  table.move(config.mnist_flags, 1, #config.mnist_flags, #argv + 1, argv)
  return sys.bbblua_argv(config._script_dir .. "/mnist.lua", table.unpack(argv)), dir .. net.name .. ".log"
end

local function train_all(config, nets, note, tick)
  local todo, seconds, tasks = {}, {}, {}
  for _, net in ipairs(nets) do
    if exists(model_path(config.out, net.name)) then tick(NET_UNITS, true) else todo[#todo + 1] = net end
  end
  for i, net in ipairs(todo) do
    local argv, log = train_argv(config, net)
    tasks[i] = { argv = argv, stdout = log, stderr = log, net = net }
  end
  require("bbb.app.jobs").run(tasks, { jobs = config.jobs, poll = 0.5,
    on_start = function(task) note(("training %s (log: %s)"):format(task.net.name, task.stdout)) end,
    on_done = function(task, r)
      if not r.ok then
        error(("training %s failed (%s %s): see %s"):format(task.net.name, r.how, tostring(r.code), task.stdout), 0)
      end
      seconds[task.net.name] = r.seconds
      tick(NET_UNITS)
      note(("trained %s in %.0f s"):format(task.net.name, r.seconds))
    end })
  return seconds
end

-- The saved network, refused unless it was trained as this run would train it.
local function load_net(config, dir, net)
  local path = model_path(dir, net.name)
  if not exists(path) then fail("--from: %s is missing", path) end
  local ok, model, info = pcall(bbb.load, path, { prior = net.kind:find("bbb") and config._prior or nil })
  if not ok then fail("%s: %s", path, (tostring(model):gsub("^[^\n]-:%d+: ", ""))) end
  local saved = type(info.meta.args) == "table" and info.meta.args or {}
  local want = { model = MODEL_OF[config.model][net.kind], dataset = config.dataset, seed = net.seed,
    epochs = config.epochs, val = config.val, limit = config.limit }
  if net.kind == "bbb" and config.model == "cnn" then
    want.preset = config.bbb_recipe == "uncertainty" and "cnn-uncertainty" or nil
  end
  for k, v in pairs(want) do
    if saved[k] ~= v then
      fail("%s was trained with --%s %s, this run asks for %s: remove it or choose another --out", path, k,
        tostring(saved[k]), tostring(v))
    end
  end
  return { net = model, pixel_scale = tonumber(saved.pixel_scale) or 126, name = net.name }
end

--- shift.load_models(config, s) -> models: seed s's networks (trained and
-- saved before), models.plain, .dropout, .bbb (each {net, pixel_scale})
-- and the lists models.plain_members, models.bbb_members.
function shift.load_models(config, s)
  local models = { plain_members = {}, bbb_members = {} }
  for _, net in ipairs(nets_for(config, s)) do
    local m = load_net(config, config.from or config.out, net)
    if net.member == 1 then models[net.kind] = m end
    if models[net.kind .. "_members"] then
      local list = models[net.kind .. "_members"]
      list[#list + 1] = m
    end
  end
  -- MC dropout: the dropout layers keep sampling when predicting
  if models.dropout then
    models.dropout.net:apply(function(l) if l.__name == "Dropout" then l.mode = "sample" end end)
  end
  return models
end

--------------------------------------------------------------------------
-- Prediction: each method's class probabilities on raw images (pixels 0..255).

-- The net's layers before its last, and its last (a Linear).
local function body_and_head(net)
  local ok, body, head = pcall(bbb.laplace.split, net)
  if not ok then error("laplace: the plain net does not end in a Linear layer", 0) end
  return body, head
end

-- fn(chunk) over the rows of x in chunks, the answers joined along
-- dimension dim (default 1: the rows; 2 for (S, N, C) stacks).
local function chunked(x, fn, dim)
  local parts = {}
  for start = 1, x:size(1), CHUNK do
    parts[#parts + 1] = fn(x:narrow(1, start, math.min(CHUNK, x:size(1) - start + 1)))
  end
  return #parts == 1 and parts[1] or bbb.cat(parts, dim or 1)
end

-- The plain net's last-layer inputs and logits on raw images (kept in
-- memo[m] when given: plain, temperature, laplace and the ensemble's first
-- member share one forward pass).
local function plain_outputs(m, raw, memo)
  if memo and memo[m] then return memo[m][1], memo[m][2] end
  local body, head = body_and_head(m.net)
  m.net:evaluate()
  local feats = bbb.no_grad(function()
    return chunked(raw * (1 / m.pixel_scale), function(x) return body(x) end)
  end)
  local logits = bbb.no_grad(function() return head:forward(feats) end)
  if memo then memo[m] = { feats, logits } end
  return feats, logits
end

-- The (S, N, C) per-pass probabilities of a sampling net (MC dropout, BBB).
local function sampled(m, raw, samples)
  return chunked(raw * (1 / m.pixel_scale), function(x)
    local _, stack = m.net:predict(x, { samples = samples, keep_samples = "tensor" })
    return stack:reshape(samples, x:size(1), stack:size(3))
  end, 2)
end

local function stack_of(list)
  local rows = {}
  for i, p in ipairs(list) do rows[i] = p:reshape(1, p:size(1), p:size(2)) end
  return bbb.cat(rows, 1)
end

--- shift.predict(models, method, raw, fitted, samples [, memo]) -> probs (N, C) and,
-- for methods with several passes or members, their (S, N, C) stack:
-- raw images (pixels 0..255), fitted = {temperature =, laplace =} the
-- seed's fitted temperature and Laplace posterior. An ensemble's
-- prediction is the mean of its members' probabilities. memo (a table
-- kept for one raw) saves the plain nets' passes between methods.
function shift.predict(models, method, raw, fitted, samples, memo)
  if method == "plain" or method == "temperature" or method:find("^laplace") then
    local feats, logits = plain_outputs(models.plain, raw, memo)
    if method == "plain" then return bbb.softmax(logits, 2) end
    if method == "temperature" then return bbb.calibration.apply(logits, fitted.temperature) end
    if method == "laplace" then return fitted.laplace:predict(feats) end
    return fitted.laplace:predict_sampled(feats, math.max(samples, LAPLACE_DRAWS), bbb.Generator(1))
  end
  local stack
  if method == "ensemble" then
    local list = {}
    for i, m in ipairs(models.plain_members) do list[i] = bbb.softmax(select(2, plain_outputs(m, raw, memo)), 2) end
    stack = stack_of(list)
  elseif method == "dropout" or method == "bbb" then
    stack = sampled(models[method], raw, samples)
  elseif method == "bbb-ensemble" then
    -- each member's own posterior as well sampled as the single BBB net's:
    -- the ensemble costs members x samples passes
    local list = {}
    for _, m in ipairs(models.bbb_members) do list[#list + 1] = sampled(m, raw, samples) end
    stack = bbb.cat(list, 1)
  else
    error("shift.predict: no method " .. tostring(method), 2)
  end
  return stack:mean(1), stack
end

--------------------------------------------------------------------------
-- Evaluation of one seed.

-- The images (pixels 0..255): the training rows less the last --val, the
-- validation rows, the test set, and the out-of-distribution sets.
local function load_data(config)
  local function load(o) return recipe.load_images(config.dataset, o) end
  local train = load { split = "train", scale = 1, limit = config.limit }
  local fit_rows, val = bbb.train.split_validation(train, config.val)
  local data = { train = fit_rows, val = val }
  if config.eval == "validation" then
    -- choosing a recipe: the validation rows' first half fits the
    -- temperature, the second is scored; the test set is never read
    data.val, data.test = bbb.train.split_validation(val, val.n // 2)
  else
    data.test = load { split = "test", scale = 1, limit = config.test_limit }
  end
  local other = config.dataset == "mnist" and "fashion" or "mnist"
  data.ood = {
    { name = other, x = recipe.load_images(other, { split = "test", scale = 1, limit = config.test_limit }).x },
    { name = "uniform", x = bbb.rand({ config.noise_n, SIDE * SIDE }, 0, 255, bbb.Generator(config.seed + 7)) },
  }
  return data
end

-- The seed's temperature (fitted on the validation rows) and Laplace
-- posterior (over the training rows), for the methods that use them.
local function fit_seed(config, models, data)
  local fitted = {}
  if has_method(config, "temperature") then
    local _, logits = plain_outputs(models.plain, data.val.x)
    fitted.temperature = bbb.calibration.fit_temperature(logits, data.val.y)
  end
  if has_method(config, "laplace") then
    local feats = plain_outputs(models.plain, data.train.x)
    local _, head = body_and_head(models.plain.net)
    fitted.laplace = bbb.laplace.last_layer { features = feats, weight = head.weight, bias = head.bias,
      labels = data.train.y }
  end
  return fitted
end

local function scores_of(probs, y)
  return { acc = metrics.accuracy(probs, y), nll = metrics.nll(probs, y), brier = metrics.brier(probs, y),
           ece = metrics.ece(probs, y, 15) }
end

-- The scores by which a method flags an image as out of distribution
-- (higher: more likely out): 1 - max probability, entropy, and with
-- several passes mutual information.
local function ood_scores(probs, stack)
  local out = { max_prob = (probs:max(2) * -1 + 1):reshape(-1):totable(),
                entropy = metrics.entropy(probs):reshape(-1):totable() }
  if stack and stack:size(1) > 1 then out.mi = metrics.mutual_information(stack):reshape(-1):totable() end
  return out
end

-- Each method's detection of each out-of-distribution set against the
-- clean test set, and its AURC on the clean test set.
local function evaluate_ood(config, models, fitted, data, clean)
  local out = {}
  for _, method in ipairs(config.methods) do
    local c = clean[method]
    local in_scores = ood_scores(c.probs, c.stack)
    local maxp = c.probs:max(2):reshape(-1):totable()
    out[method] = { aurc = metrics.aurc(maxp, metrics.correct(c.probs, data.test.y)) }
    for _, set in ipairs(data.ood) do
      local probs, stack = shift.predict(models, method, set.x, fitted, config.test_samples, set.memo)
      local o, d = ood_scores(probs, stack), {}
      for by, sc in pairs(o) do d[by] = metrics.detection(in_scores[by], sc) end
      out[method][set.name] = d
    end
  end
  return out
end

-- Every method on every shift of one seed: {rotate = {method = {amount =
-- scores}}, translate = ..., ood = ..., temperature, laplace_precision}.
local function evaluate_seed(config, s, data, tick, note)
  local models = shift.load_models(config, s)
  local fitted = fit_seed(config, models, data)
  local out = { rotate = {}, translate = {}, temperature = fitted.temperature,
    laplace_precision = fitted.laplace and fitted.laplace.prior_precision }
  for _, set in ipairs(data.ood) do set.memo = {} end
  local clean = {}
  for _, kind in ipairs { "rotate", "translate" } do
    for _, amount in ipairs(kind == "rotate" and shift.ANGLES or shift.PIXELS[config.translation]) do
      local x = kind == "rotate" and bbb.data.rotate(data.test.x, SIDE, SIDE, amount)
        or (config.translation == "roll" and bbb.data.roll or bbb.data.translate)(data.test.x, SIDE, SIDE, 0, amount)
      local memo = {}
      for _, method in ipairs(config.methods) do
        local probs, stack = shift.predict(models, method, x, fitted, config.test_samples, memo)
        out[kind][method] = out[kind][method] or {}
        out[kind][method][tostring(amount)] = scores_of(probs, data.test.y)
        if kind == "rotate" and amount == 0 then clean[method] = { probs = probs, stack = stack } end
      end
      tick()
      note(("seed %d: %s %d evaluated"):format(s, kind == "rotate" and "rotation" or "translation", amount))
    end
  end
  out.ood = evaluate_ood(config, models, fitted, data, clean)
  tick()
  return out
end

-- What a seed's saved evaluation must match to be reused.
local function signature(config)
  return json.encode { methods = config.methods, members = config.members, test_samples = config.test_samples,
    test_limit = config.test_limit or false, noise_n = config.noise_n, epochs = config.epochs or false,
    model = config.model, dataset = config.dataset, estimator = config.estimator, val = config.val,
    limit = config.limit or false, extra = config.mnist_flags, translation = config.translation, eval = config.eval,
    bbb_recipe = config.bbb_recipe }
end

local function read_json(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local ok, v = pcall(json.decode, text)
  return ok and v or nil
end

--------------------------------------------------------------------------
-- Over seeds.

-- mean and standard deviation (n - 1; 0 for one value) of a list.
local function mean_sd(list)
  local m = 0
  for _, v in ipairs(list) do m = m + v end
  m = m / #list
  local ss = 0
  for _, v in ipairs(list) do ss = ss + (v - m) ^ 2 end
  return m, #list > 1 and math.sqrt(ss / (#list - 1)) or 0
end

-- The tables of per-seed results merged: every number at the same path
-- becomes its mean, and key_sd beside it the spread.
local function merge(per_seed)
  local first = per_seed[1]
  if type(first) ~= "table" then
    local m = mean_sd(per_seed)
    return m
  end
  local out = {}
  for k, v in pairs(first) do
    local list = {}
    for i, t in ipairs(per_seed) do list[i] = t[k] end
    if type(v) == "number" then
      out[k], out[k .. "_sd"] = mean_sd(list)
    elseif type(v) == "table" then
      out[k] = merge(list)
    end
  end
  return out
end

local function command_line()
  local words = { "bbblua", arg and arg[0] or "shift.lua" }
  for _, a in ipairs(arg or {}) do words[#words + 1] = a end
  return table.concat(words, " ")
end

-- The headline: each metric averaged over the shifted steps (rotations
-- 15-180 degrees, translations 1-14 pixels) of each seed, then the mean and
-- spread of those averages over the seeds.
local function headline(config, per_seed)
  local out = {}
  for _, kind in ipairs { "rotate", "translate" } do
    out[kind] = {}
    for _, m in ipairs(config.methods) do
      local row = {}
      for _, metric in ipairs { "acc", "nll", "brier", "ece" } do
        local per = {}
        for i, r in ipairs(per_seed) do
          local total, n = 0, 0
          for _, a in ipairs(kind == "rotate" and shift.ANGLES or shift.PIXELS[config.translation]) do
            if a > 0 then total, n = total + r[kind][m][tostring(a)][metric], n + 1 end
          end
          per[i] = total / n
        end
        row[metric], row[metric .. "_sd"] = mean_sd(per)
      end
      out[kind][m] = row
    end
  end
  return out
end

local function summarize(config, seeds, per_seed, times)
  local merged = merge(per_seed)
  local by_seed, temps, precs = {}, {}, {}
  for i, s in ipairs(seeds) do
    local k = tostring(s)
    by_seed[k], temps[k], precs[k] = per_seed[i], per_seed[i].temperature, per_seed[i].laplace_precision
  end
  return { rotate = merged.rotate, translate = merged.translate, ood = merged.ood, temperature = temps,
    headline = headline(config, per_seed),
    laplace_precision = precs, seeds = seeds, methods = config.methods, per_seed = by_seed, times = times,
    config = recipe.saved_args(config), command = command_line(), environment = bbb.core.environment(),
    commit = sys.output { "git", "rev-parse", "--short", "HEAD" } or "unknown", out = config.out }
end

-- The training seconds of every net, kept across runs in DIR/train-times.json.
local function train_times(config, new)
  local path = config.out .. "/train-times.json"
  local all = read_json(path) or {}
  for k, v in pairs(new) do all[k] = v end
  if next(new) then cli.write_file(path, json.encode(all)) end
  return all
end

--- shift.run(config) -> result: trains (or reuses) every network, then
-- evaluates each seed (reusing DIR/eval-sSEED.json when it matches) and
-- writes DIR/shift.json: rotate[method][angle] and translate[method][pixels]
-- = {acc, nll, brier, ece} (means over seeds, *_sd their spread), ood[method]
-- = {aurc, [set] = {max_prob|entropy|mi = {auroc, aupr_in, aupr_out,
-- fpr95}}}, temperature and laplace_precision per seed, per_seed, times,
-- command, commit, environment.
function shift.run(config)
  bbb.set_num_threads(config.threads)
  local seeds, nets = seeds_of(config), {}
  for _, s in ipairs(seeds) do
    for _, n in ipairs(nets_for(config, s)) do nets[#nets + 1] = n end
  end
  local per_seed_units = #shift.ANGLES + #shift.PIXELS[config.translation] + 1
  local progress = bbb.progress.new { total = #nets * NET_UNITS + #seeds * per_seed_units, label = "shift" }
  local done, counted, t0 = 0, 0, bbb.core.clock()
  -- units of work done; reused ones do not count toward the rate
  local function tick(units, reused)
    done, counted = done + (units or 1), counted + (reused and 0 or (units or 1))
    progress:update(done)
  end
  local function note(text)
    local eta = counted > 0 and (bbb.core.clock() - t0) / counted * (progress.total - done) or nil
    progress:clear()
    print(("%s  [%d%% done%s]"):format(text, math.floor(100 * done / progress.total),
      eta and (", ETA %.0f min"):format(eta / 60) or ""))
    io.stdout:flush()
    progress:update(done)
  end
  local times = { train = {}, evaluate = {} }
  if not config.from then times.train = train_times(config, train_all(config, nets, note, tick))
  else tick(#nets * NET_UNITS, true) end
  local data
  local per_seed, sig = {}, signature(config)
  for i, s in ipairs(seeds) do
    local path = ("%s/eval-s%d.json"):format(config.out, s)
    local saved = read_json(path)
    if saved and saved.signature == sig then
      per_seed[i] = saved.result
      tick(per_seed_units, true)
      note(("seed %d: evaluation reused from %s"):format(s, path))
    else
      data = data or load_data(config)
      local t0 = bbb.core.clock()
      per_seed[i] = evaluate_seed(config, s, data, tick, note)
      times.evaluate[tostring(s)] = bbb.core.clock() - t0
      per_seed[i].evaluate_seconds = times.evaluate[tostring(s)]
      cli.write_file(path, json.encode { signature = sig, result = per_seed[i] })
      note(("seed %d evaluated in %.0f s"):format(s, times.evaluate[tostring(s)]))
    end
  end
  progress:finish()
  local result = summarize(config, seeds, per_seed, times)
  cli.write_file(config.out .. "/shift.json", json.encode(result))
  return result
end

--------------------------------------------------------------------------
-- The report and the figure.

-- The amounts a result holds of kind, in order.
local function amounts_of(result, kind)
  if kind == "rotate" then return shift.ANGLES end
  return shift.PIXELS[result.config and result.config.translation or "zero"]
end

local function print_metric_table(result, kind, metric)
  local head = { ("%-8s"):format(kind == "rotate" and "degrees" or "pixels") }
  for _, m in ipairs(result.methods) do head[#head + 1] = ("%13s"):format(m) end
  print(("%s, %s (mean over %d seed(s), +- sd):"):format(kind, metric, #result.seeds))
  print(table.concat(head, " "))
  for _, a in ipairs(amounts_of(result, kind)) do
    local row = { ("%-8d"):format(a) }
    for _, m in ipairs(result.methods) do
      local f = result[kind][m][tostring(a)]
      row[#row + 1] = ("%7.4f+-%.3f"):format(f[metric], f[metric .. "_sd"])
    end
    print(table.concat(row, " "))
  end
  print()
end

-- Mean of a metric over rotations 15-180: the headline of the comparison.
local function rotated_mean(result, method, metric)
  local total, n = 0, 0
  for _, a in ipairs(shift.ANGLES) do
    if a > 0 then total, n = total + result.rotate[method][tostring(a)][metric], n + 1 end
  end
  return total / n
end

local function print_ood(result)
  print("Out-of-distribution detection against the clean test set (out = positive), and AURC:")
  print(("%-13s %-9s %-9s %8s %8s %8s %8s"):format("method", "set", "score", "AUROC", "AUPR-in", "AUPR-out", "FPR95"))
  for _, m in ipairs(result.methods) do
    local o = result.ood[m]
    for _, set in ipairs { "fashion", "mnist", "uniform" } do
      for _, by in ipairs { "max_prob", "entropy", "mi" } do
        local d = o[set] and o[set][by]
        if d then
          print(("%-13s %-9s %-9s %8.4f %8.4f %8.4f %8.4f"):format(m, set, by, d.auroc, d.aupr_in, d.aupr_out, d.fpr95))
        end
      end
    end
    print(("%-13s AURC %.4f"):format(m, o.aurc))
  end
end

--- shift.report(result) prints the tables, the headline and where the files went.
function shift.report(result)
  print()
  for _, kind in ipairs { "rotate", "translate" } do
    for _, metric in ipairs(METRICS) do print_metric_table(result, kind, metric) end
  end
  print("Mean over rotations 15-180 degrees:")
  print(("%-13s %8s %8s %8s %8s"):format("method", "acc", "NLL", "Brier", "ECE"))
  for _, m in ipairs(result.methods) do
    print(("%-13s %8.4f %8.4f %8.4f %8.4f"):format(m, rotated_mean(result, m, "acc"), rotated_mean(result, m, "nll"),
      rotated_mean(result, m, "brier"), rotated_mean(result, m, "ece")))
  end
  print()
  print_ood(result)
  for s, t in pairs(result.temperature) do print(("seed %s: temperature %.4f"):format(s, t)) end
  for s, d in pairs(result.laplace_precision) do print(("seed %s: Laplace prior precision %.4g"):format(s, d)) end
  print("wrote " .. result.out .. "/shift.json")
  io.stdout:flush()
end

local NAMES = { acc = "accuracy", nll = "NLL (nats)", brier = "Brier score", ece = "ECE (15 bins)" }

--- shift.plot(result) -> the figure's path (nil without gnuplot): Ovadia
-- et al.'s layout, one panel per metric and shift, the intensity on x, a
-- line per method (the seeds' mean).
function shift.plot(result)
  if not require("bbb.app.sys").find_program("gnuplot") then
    print("gnuplot not found: no figure (install gnuplot-nox)")
    return nil
  end
  local panels = {}
  for _, kind in ipairs { "rotate", "translate" } do
    for _, metric in ipairs(METRICS) do
      local series = {}
      for _, m in ipairs(result.methods) do
        local xs, ys = {}, {}
        for _, a in ipairs(amounts_of(result, kind)) do
          xs[#xs + 1], ys[#ys + 1] = a, result[kind][m][tostring(a)][metric]
        end
        series[#series + 1] = { x = xs, y = ys, title = m, style = "linespoints" }
      end
      panels[#panels + 1] = { title = ("%s, %s"):format(NAMES[metric], kind == "rotate" and "rotated" or "translated"),
        xlabel = kind == "rotate" and "rotation (degrees)" or "translation (pixels)", ylabel = NAMES[metric],
        series = series, key = #panels == 0 and "inside" or "off" }
    end
  end
  local file = require("bbb.app.plot").panels { file = result.out .. "/shift.png", size = { 2000, 900 }, layout = { 2, 4 },
    page_title = ("Under dataset shift: %s, %d seed(s)"):format(result.config.dataset, #result.seeds), panels = panels }
  print("wrote " .. file)
  return file
end

return shift

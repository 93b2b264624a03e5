--- bbb.app.experiments.regression: 1-d regression with uncertainty bands: a Bayes-by-Backprop net against a
-- deterministic MLP, on the toy points of the PyTorch tutorial (seed 001), the
-- curve of Blundell et al. (2015, fig. 5), or a noisy sine (seed 004's sweep
-- over the KL weight beta).
-- scripts/regression.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"

local regression = {}

-- Presets: the seed documents' runs. Each sets the flags not given.
regression.PRESETS = {
  s1 = { about = "seed 001's x^4 toy: x = -2, -1.8, -1, 1, 1.8, 2, y = -x^4 + 3x^2 + 1; BNN 1-32-1 sigmoid, "
         .. "Gaussian prior sigma 10, noise 0.1, mu and rho start at 0, Adam lr 0.1, 2000 epochs, 1 sample, "
         .. "band from the 2.5th and 97.5th percentiles of 100 samples over [-5, 5] and [-100, 100]; "
         .. "MLP 1-16-16-1 sigmoid, MSE, SGD lr 0.01, 30000 epochs",
         flags = { task = "toy", activation = "sigmoid", layers = 1, hidden = 32, prior_sigma = 10,
                   noise_sigma = 0.1, mu_init = 0, rho_init = 0, optim = "adam", lr = 0.1, schedule = "none",
                   epochs = 2000, samples = 1, band = "percentile", test_samples = 100,
                   xrange = { "-5:5", "-100:100" }, kl_weight = 1, band_of = "f",
                   mlp_layers = 2, mlp_hidden = 16, mlp_optim = "sgd", mlp_lr = 0.01, mlp_epochs = 30000 },
         seed = { "seed 001 reports: BNN loss (-ELBO, summed, 1 sample) 278.1 at epoch 1991; "
                  .. "MLP MSE 4.19e-05 at epoch 25000 and about -13 at x = 100" } },
  s4 = { about = "seed 004's sine regression: 2x10 tanh, 50000 iterations, ELBO = -(mean squared error) "
         .. "- beta KL (analytic, prior N(0, 1)) with beta swept over 1, 0.1, 0.01, 0.001, 0.0001, one panel "
         .. "per beta; the seed gives neither its data nor its initial variance: here 200 points x ~ U(-3, 3), "
         .. "noise 0.1, initial sigma 0.03 (variance 1e-3, as its MNIST run), Adam lr 0.01",
         flags = { task = "sine", activation = "tanh", layers = 2, hidden = 10, prior_sigma = 1,
                   noise_sigma = math.sqrt(0.5), rho_init = math.log(math.exp(0.03) - 1), kl = "analytic",
                   optim = "adam", lr = 0.01, schedule = "none", epochs = 50000, samples = 1,
                   beta = "1,0.1,0.01,0.001,0.0001", no_mlp = true, band = "normal", band_of = "f" },
         seed = { "seed 004 reports at beta 0.001 after 50000 iterations: ELBO -0.04507, L2 -0.01688, KL 28.19" } },
}
local PRESET_NAMES = { "s1", "s4" }
local preset_help = { "Presets (explicit flags override them):" }
for _, k in ipairs(PRESET_NAMES) do preset_help[#preset_help + 1] = ("  %s: %s."):format(k, regression.PRESETS[k].about) end

-- The largest |x| a plot range may reach: the nets run in float32, where
-- the spread of outputs at x much beyond it overflows.
local RANGE_MAX = 1e6

-- "lo:hi" (or "lo,hi") with lo < hi, both finite; for a range the nets
-- are sampled over, within RANGE_MAX and wide enough for float32 to tell
-- 400 points apart. Messages name the flag.
local function range_of(flag, sampled)
  return function(s)
    local a, b = tostring(s):match("^%s*([^:,]+)%s*[:,]%s*([^:,]+)%s*$")
    local num = cli.number()
    local lo, hi = a and num(a), b and num(b)
    if not (lo and hi) then return nil, ("%s: expected lo:hi in finite numbers, got '%s'"):format(flag, s) end
    if lo >= hi then return nil, ("%s: lo must be below hi, got %s"):format(flag, s) end
    if not sampled then return { lo, hi } end
    if math.max(-lo, hi) > RANGE_MAX then
      return nil, ("%s: %s reaches beyond [-1e6, 1e6], where the float32 net's band is no longer finite")
        :format(flag, s)
    end
    if hi - lo < 400 * math.max(-lo, hi) * 2 ^ -23 then
      return nil, ("%s: %s is too narrow for float32 to sample 400 points in it"):format(flag, s)
    end
    return { lo, hi }
  end
end
local range_converter = range_of("--xrange", true)

-- One beta or a comma-separated list of them, each finite and >= 0.
local function beta_list(s)
  local num = cli.number { min = 0 }
  local list = {}
  for word in (tostring(s) .. ","):gmatch("([^,]*),") do
    local v, err = num(word)
    if v == nil then return nil, "--beta: " .. err end
    list[#list + 1] = v
  end
  return list
end


--- regression.parser() -> the command line of the experiment.
function regression.parser()
  local parser = recipe.parser("regression.lua", "Fit a Bayesian MLP (Bayes by Backprop) and a "
    .. "deterministic MLP to 1-d data; plot the true function, the data, the posterior predictive mean "
    .. "and its 95% band, and report the band's coverage inside the training range and its width inside "
    .. "and outside it.", { aliases = { epochs = "--steps" },
    defaults = { test_samples = "300", epochs = false, lr = "0.01", activation = false, hidden = false, samples = "4",
                 prior_sigma = false, kl_weight = false, layers = "2" } })
  parser:epilog(table.concat(preset_help, "\n"))
  flags.option(parser, "--preset", "A seed's setup (see below)."):convert(cli.choice(PRESET_NAMES))
  flags.option(parser, "--task", "toy, paper or sine.", "paper"):convert(cli.choice { "toy", "paper", "sine" })
  flags.option(parser, "--n", "Training points (paper, sine).", "200"):convert(cli.positive_integer { max = 1000000 })
  recipe.declare(parser, { "epochs", "optim", "lr" })
  flags.option(parser, "--schedule", "cosine (decay to lr/20 over the run) or none.", "cosine")
    :convert(cli.choice { "cosine", "none" })
  recipe.declare(parser, { "activation", "layers", "hidden", "samples", "prior_sigma" })
  flags.option(parser, "--noise-sigma", "Fix the likelihood's noise sigma (default: the task's; paper and sine learn it).")
    :convert(cli.positive_number())
  recipe.declare(parser, { "mu_init", "rho_init", "kl", "kl_weight" })
  flags.option(parser, "--beta", "Weight of the complexity term against the mean log-likelihood per point "
    .. "(seed 004's beta = kl-weight / n); a comma-separated list trains one net per value.")
    :convert(beta_list)
  flags.option(parser, "--band", "percentile (2.5th and 97.5th of the samples) or normal (mean +- 1.96 sd).", "normal")
    :convert(cli.choice { "percentile", "normal" })
  flags.option(parser, "--band-of", "y (the posterior predictive of y: weights and noise) or f (of the "
    .. "function f(x, w): weights only).", "y"):convert(cli.choice { "y", "f" })
  recipe.declare(parser, { "test_samples" })
  flags.option(parser, "--xrange", "Plot range lo:hi within [-1e6, 1e6] (default: the task's); repeat for one panel "
    .. "per range.")
    :count("*"):convert(range_converter)
  flags.option(parser, "--yrange", "Plot y range lo:hi (default: the data and the truth over the training range).")
    :convert(range_of("--yrange"))
  flags.flag(parser, "--no-mlp", "Skip the MLP baseline.")
  flags.option(parser, "--mlp-layers", "MLP hidden layers (default: --layers)."):convert(cli.positive_integer { max = 16 })
  flags.option(parser, "--mlp-hidden", "MLP units per hidden layer (default: --hidden).")
    :convert(cli.positive_integer { max = 1 << 16 })
  flags.option(parser, "--mlp-optim", "MLP optimizer, adam or sgd (default: --optim).")
    :convert(cli.choice { "adam", "sgd" })
  flags.option(parser, "--mlp-lr", "MLP learning rate (default: --lr)."):convert(cli.positive_number())
  flags.option(parser, "--mlp-epochs", "MLP epochs (default: --epochs)."):convert(cli.positive_integer { max = 10000000 })
  recipe.declare(parser, { "seed", "threads" })
  flags.option(parser, "--out", "PNG file to write.", "out/regression.png"):convert(cli.output_path { ext = { "png", "svg" } })
  recipe.declare(parser, { "log", "summary" })
  recipe.declare(parser, { "no_plot" })
  return parser
end

-- The first flag given (given[key]) that cannot act in the run args
-- describes (its preset applied), and why; nil when each can.
local function idle_flag(args, given)
  local rules = {
    { "n", args.task == "toy", "--task toy trains on its 6 fixed points" },
    { "out", args.no_plot, "--no-plot writes no plot" },
    { "yrange", args.no_plot, "--no-plot draws no plot" },
  }
  for _, k in ipairs { "mlp_layers", "mlp_hidden", "mlp_optim", "mlp_lr", "mlp_epochs" } do
    rules[#rules + 1] = { k, args.no_mlp, ("the MLP baseline is off (%s)"):format(given.no_mlp and "--no-mlp"
      or ("preset " .. tostring(args.preset))) }
  end
  for _, r in ipairs(rules) do
    if given[r[1]] and r[2] then return ("--%s cannot act in this run: %s"):format(r[1]:gsub("_", "-"), r[3]) end
  end
end

--- regression.parse([argv]) -> args: the command line, checked, the preset applied.
function regression.parse(raw)
  raw = raw or arg
  local parser = regression.parser()
  -- `--xrange -5:5` and `--yrange -4:4`: argparse would read "-5:5" as a flag.
  local argv = {}
  for i = 1, #raw do
    local a, prev = raw[i], argv[#argv]
    if (prev == "--xrange" or prev == "--yrange") and a:match("^%-[%d.]") then
      argv[#argv] = prev .. "=" .. a
    else
      argv[#argv + 1] = a
    end
  end
  local args = cli.parse(parser, argv)
  local given = cli.given(parser, argv)
  if given.kl_weight and given.beta then parser:error("give --kl-weight or --beta, not both") end
  -- 0 epochs is a run with nothing to plot, and no cosine schedule to make
  if args.epochs == 0 then parser:error("--epochs (--steps) must be at least 1") end
  if #args.xrange == 0 then args.xrange = nil end
  if args.preset then
    for k, v in pairs(regression.PRESETS[args.preset].flags) do
      if not given[k] and not (k == "beta" and given.kl_weight) and not (k == "kl_weight" and given.beta) then
        if k == "xrange" then
          args[k] = {}
          for i, r in ipairs(v) do args[k][i] = assert(range_converter(r)) end
        elseif k == "beta" then
          args[k] = assert(beta_list(v))
        else
          args[k] = v
        end
      end
    end
  end

  local why = idle_flag(args, given)
  if why then parser:error(why) end
  -- one sample has no spread: its band would have no width
  if args.test_samples < 2 then
    parser:error(("--test-samples %d: a %s band needs the spread of at least 2 samples"):format(args.test_samples,
      args.band))
  end
  local ok, err = recipe.prepare_outputs(args, { "out" })
  if not ok then parser:error(err) end
  return args
end

-- Each task: how to draw (x, y), the true function, the training range,
-- the plot range, and the network and noise settings that suit it.
local TASKS = {
  toy = {
    xs = { -2, -1.8, -1, 1, 1.8, 2 },
    truth = function(x) return -x ^ 4 + 3 * x ^ 2 + 1 end,
    noise = 0, sigma = 0.1, learn_sigma = false, lo = -2, hi = 2, plot = { -4, 4 },
    hidden = 32, activation = "relu", epochs = 3000, prior_sigma = 1, name = "x^4 toy",
  },
  paper = {
    -- y = x + 0.3 sin(2 pi (x + e)) + 0.3 sin(4 pi (x + e)) + e, e ~ N(0, 0.02^2)
    draw = function(x, e) return x + 0.3 * math.sin(2 * math.pi * (x + e)) + 0.3 * math.sin(4 * math.pi * (x + e)) + e end,
    truth = function(x) return x + 0.3 * math.sin(2 * math.pi * x) + 0.3 * math.sin(4 * math.pi * x) end,
    noise = 0.02, sigma = 0.05, learn_sigma = true, lo = 0, hi = 0.5, plot = { -0.5, 1.2 },
    hidden = 32, activation = "relu", epochs = 3000, prior_sigma = 2, name = "Blundell et al. fig. 5 curve",
  },
  sine = {
    draw = function(x, e) return math.sin(x) + e end,
    truth = math.sin,
    noise = 0.1, sigma = 0.1, learn_sigma = true, lo = -3, hi = 3, plot = { -7, 7 },
    hidden = 10, activation = "tanh", epochs = 4000, prior_sigma = 1, name = "sine",
  },
}
local ACT = { relu = bbb.nn.ReLU, sigmoid = bbb.nn.Sigmoid, tanh = bbb.nn.Tanh }
local clock = bbb.core.clock or os.clock

local function column(list) return bbb.tensor(list):reshape(-1, 1) end
local function sizes_of(layers, units)
  local s = { 1 }
  for _ = 1, layers do s[#s + 1] = units end
  s[#s + 1] = 1
  return s
end
local function arch(s, act) return table.concat(s, "-") .. " " .. act end
local function fmt_range(r) return ("[%g, %g]"):format(r[1], r[2]) end

-- n points (x, y) from the task's process, x uniform in its range.
local function draw(c, n)
  local task = c.task
  if task.xs then
    local ys = {}
    for i, x in ipairs(task.xs) do ys[i] = task.truth(x) end
    return task.xs, ys
  end
  local u = bbb.rand({ n }, task.lo, task.hi, c.gen):totable()
  local e = bbb.randn({ n }, 0, task.noise, c.gen):totable()
  local ys = {}
  for i = 1, n do ys[i] = task.draw(u[i], e[i]) end
  return u, ys
end

-- The run's settings with the task's defaults filled in, its data, and the
-- KL weights to train with (--kl-weight w is against the summed
-- log-likelihood; beta against the mean, so w = beta * n).
local function setup(args)
  local task = TASKS[args.task]
  local c = { args = args, task = task, gen = bbb.Generator(args.seed),
    act_name = args.activation or task.activation, hidden = args.hidden or task.hidden,
    epochs = args.epochs or task.epochs, prior_sigma = args.prior_sigma or task.prior_sigma,
    ranges = args.xrange or { task.plot } }
  c.xs, c.ys = draw(c, args.n)
  c.x, c.y, c.n = column(c.xs), column(c.ys), #c.xs
  c.train_set = { x = c.x, y = c.y, n = c.n }
  c.fresh_x, c.fresh_y = draw(c, 1000)   -- for coverage (paper, sine): drawn before any training
  c.weights = {}
  if args.beta then
    for i, b in ipairs(args.beta) do c.weights[i] = { w = b * c.n, beta = b } end
  else
    local w = args.kl_weight or 1
    c.weights[1] = { w = w, beta = w / c.n }
  end
  c.bnn_sizes = sizes_of(args.layers, c.hidden)
  c.fixed_sigma = args.noise_sigma or (not task.learn_sigma and task.sigma) or nil
  return c
end

-- A training run stopped by a signal ends the experiment with its exit
-- status: a half-trained net's figures are not a result.
local function stop_if_interrupted(fit)
  if fit.status ~= "interrupted" then return fit end
  error({ signal = fit.signal or 2, message = ("interrupted in epoch %d; nothing was written"):format(#fit.history + 1) }, 0)
end

-- Trains one Bayesian net with KL weight w; returns the net, its ELBO and
-- the last epoch record.
local function train_bnn(c, w)
  local args = c.args
  local g = bbb.Generator(args.seed)
  local zero_mu = args.mu_init == 0
  local net = bbb.nn.bayes_mlp(c.bnn_sizes, { prior = bbb.prior.Gaussian{ sigma = c.prior_sigma },
    activation = ACT[c.act_name], rho_init = args.rho_init, mu_scale = not zero_mu and args.mu_init or nil,
    generator = g, kl = args.kl })
  if zero_mu then   -- seed 001 starts every mean at 0: the weight noise breaks the symmetry
    for _, p in ipairs(net:named_parameters()) do
      if p[1]:match("mu$") then p[2]:copy(bbb.zeros(p[2]:size())) end
    end
  end
  local elbo = bbb.elbo.ELBO{ n_data = c.n, n_batches = 1, likelihood = "gaussian",
    sigma = c.fixed_sigma or c.task.sigma, learn_sigma = not c.fixed_sigma, samples = args.samples, kl_weight = w }
  local params = net:named_parameters()
  for _, p in ipairs(elbo:named_parameters()) do params[#params + 1] = p end
  local opt = (args.optim == "adam" and bbb.optim.Adam or bbb.optim.SGD)(params, { lr = args.lr })
  -- Cosine decay over the run lets the fit settle instead of jittering at lr.
  local schedule = args.schedule == "cosine" and bbb.optim.schedule.cosine(opt, c.epochs, args.lr / 20) or nil
  local fit = bbb.train.fit{ model = net, elbo = elbo, optimizer = opt, schedule = schedule,
    data = c.train_set, batch_size = c.n, epochs = c.epochs, generator = g, log = args.log, quiet = true }
  stop_if_interrupted(fit)
  return net, elbo, fit.history[#fit.history]
end

-- The MLP baseline: the same loop with a Gaussian likelihood of variance
-- 1/2 and no complexity term, i.e. the mean squared error plus a constant.
local function train_mlp(c)
  local args = c.args
  c.mlp_sizes = sizes_of(args.mlp_layers or args.layers, args.mlp_hidden or c.hidden)
  local g = bbb.Generator(args.seed + 1)
  c.mlp = bbb.nn.mlp(c.mlp_sizes, { activation = ACT[c.act_name], generator = g })
  local optim = args.mlp_optim or args.optim
  local lr = args.mlp_lr or args.lr
  local t0 = clock()
  local fit = bbb.train.fit{ model = c.mlp, optimizer = (optim == "adam" and bbb.optim.Adam or bbb.optim.SGD)(c.mlp, { lr = lr }),
    data = c.train_set, elbo = bbb.elbo.ELBO{ n_data = c.n, n_batches = 1, likelihood = "gaussian", sigma = math.sqrt(0.5) },
    batch_size = c.n, epochs = args.mlp_epochs or c.epochs, generator = g, quiet = true }
  stop_if_interrupted(fit)
  c.mlp_mse = fit.history[#fit.history].nll_per_example - 0.5 * math.log(math.pi)
  print(("MLP %s, MSE, %s lr %g, %d epochs in %.1f s: final MSE %.3g")
    :format(arch(c.mlp_sizes, c.act_name), optim, lr, args.mlp_epochs or c.epochs, clock() - t0, c.mlp_mse))
end

local function mlp_at(c, xq)
  return bbb.no_grad(function() return c.mlp:forward(xq) end):reshape(-1):totable()
end

local function percentile(sorted, p)
  local h = (#sorted - 1) * p + 1
  local i = math.floor(h)
  local f = h - i
  return sorted[i] + f * ((sorted[math.min(i + 1, #sorted)]) - sorted[i])
end

-- The 95% band at the points xq (a column) of the posterior predictive of
-- y = f(x, w) + sigma e (--band-of y) or of f(x, w) alone (--band-of f):
-- percentiles of the samples, or the mean +- 1.96 standard deviations.
local function band(c, net, sigma, xq)
  local args, N = c.args, xq:size(1)
  if args.band_of == "f" then sigma = 0 end
  if args.band == "normal" then
    local mean, sd = net:predict(xq, { samples = args.test_samples, likelihood = "gaussian", noise_sigma = sigma })
    local m, s = mean:reshape(-1):totable(), sd:reshape(-1):totable()
    local lo, hi = {}, {}
    for i = 1, N do lo[i], hi[i] = m[i] - 1.96 * s[i], m[i] + 1.96 * s[i] end
    return m, lo, hi
  end
  local mean, _, outs = net:predict(xq, { samples = args.test_samples, likelihood = "gaussian", keep_samples = true })
  local cols = {}
  for s, o in ipairs(outs) do
    cols[s] = (sigma > 0 and o:reshape(-1) + bbb.randn({ N }, 0, sigma, c.gen) or o:reshape(-1)):totable()
  end
  local lo, hi, v = {}, {}, {}
  for i = 1, N do
    for s = 1, #cols do v[s] = cols[s][i] end
    table.sort(v)
    lo[i], hi[i] = percentile(v, 0.025), percentile(v, 0.975)
  end
  return mean:reshape(-1):totable(), lo, hi
end

-- Coverage of the band inside the training range: of fresh noisy points
-- for a band of y, of the true function on a fine grid for a band of f
-- (and on the noise-free toy).
local function coverage(c, net, sigma)
  local task, cx, cy = c.task, c.fresh_x, c.fresh_y
  if task.xs or c.args.band_of == "f" then
    cx, cy = bbb.linspace(task.lo, task.hi, 401):totable(), {}
    for i, v in ipairs(cx) do cy[i] = task.truth(v) end
  end
  local _, lo, hi = band(c, net, sigma, column(cx))
  local k = 0
  for i = 1, #cx do
    if cy[i] >= lo[i] and cy[i] <= hi[i] then k = k + 1 end
  end
  return k / #cx
end

-- Seed 004's figures: L2 = -(mean squared error on the training points,
-- averaged over weight samples), KL (the analytic KL or the MC complexity,
-- averaged likewise) and ELBO = L2 - beta KL.
local function seed4_terms(c, net, beta)
  local S, se, kl = 100, 0, 0
  net:evaluate()
  bbb.no_grad(function()
    for _ = 1, S do
      local out = net:forward(c.x)
      se = se + ((out - c.y) ^ 2):mean():item()
      kl = kl + net:kl():item()
    end
  end)
  net:train()
  local l2 = -se / S
  return { l2 = l2, kl = kl / S, elbo = l2 - beta * kl / S }
end

-- One Bayesian net per KL weight, each with its coverage and seed 004's terms.
local function train_bnns(c)
  local results = {}
  for i, wt in ipairs(c.weights) do
    local t0 = clock()
    local net, elbo, last = train_bnn(c, wt.w)
    local sigma = elbo:sigma()
    local r = { net = net, sigma = sigma, beta = wt.beta, w = wt.w, last = last }
    r.terms = seed4_terms(c, net, wt.beta)
    if not c.task.xs or c.task.truth then r.coverage = coverage(c, net, sigma) end
    r.seconds = clock() - t0
    results[i] = r
    print(("BBB kl-weight %g (beta %g): %d epochs in %.1f s; -elbo total %.2f (nll %.2f + %g x complexity %.2f), "
      .. "noise sigma %.4f")
      :format(wt.w, wt.beta, c.epochs, r.seconds, last.elbo_per_example * c.n, last.nll_per_example * c.n, wt.w,
        last.complexity_total / math.max(wt.w, 1e-300), sigma))
    io.stdout:flush()
  end
  return results
end

-- The y-range of a view: from the data and the truth over the training
-- range, widened to the means when the view is more than ten times wider
-- than the data; and what leaves it.
local function y_extent(c, v)
  local task = c.task
  local ylo, yhi = math.huge, -math.huge
  local function take(val) if val == val then ylo, yhi = math.min(ylo, val), math.max(yhi, val) end end
  for _, val in ipairs(c.ys) do take(val) end
  for _, t in ipairs(bbb.linspace(task.lo, task.hi, 200):totable()) do take(task.truth(t)) end
  v.wide = (v.range[2] - v.range[1]) > 10 * (task.hi - task.lo)
  if v.wide then
    for i = 1, #v.gx do take(v.m[i]); if v.mlp then take(v.mlp[i]) end end
  end
  local pad = 0.15 * (yhi - ylo)
  v.yrange = c.args.yrange or { ylo - pad, yhi + pad }
  local off = {}
  for i = 1, #v.gx do
    if v.lo[i] < v.yrange[1] or v.hi[i] > v.yrange[2] then off.band = true end
    local t = task.truth(v.gx[i])
    if t < v.yrange[1] or t > v.yrange[2] then off.truth = true end
    if v.m[i] < v.yrange[1] or v.m[i] > v.yrange[2] then off.mean = true end
    if v.mlp and (v.mlp[i] < v.yrange[1] or v.mlp[i] > v.yrange[2]) then off.mlp = true end
  end
  local names = {}
  for _, k in ipairs { "band", "truth", "mean", "mlp" } do
    if off[k] then names[#names + 1] = ({ band = "band", truth = "truth", mean = "BBB mean", mlp = "MLP" })[k] end
  end
  v.off = #names > 0 and ("off the chart: " .. table.concat(names, ", ")) or nil
end

-- The x of a view: 400 points over its range, and when none of them falls
-- in the training range it overlaps (a view much wider than the data),
-- 100 more there, so the band's width inside the data is measured.
local function view_points(c, range)
  local gx = bbb.linspace(range[1], range[2], 400):totable()
  local lo, hi = math.max(range[1], c.task.lo), math.min(range[2], c.task.hi)
  for _, v in ipairs(gx) do if v >= c.task.lo and v <= c.task.hi then return gx end end
  if lo < hi then
    for _, v in ipairs(bbb.linspace(lo, hi, 100):totable()) do gx[#gx + 1] = v end
    table.sort(gx)
  end
  return gx
end

-- Band, mean and widths of net r over one plot range.
local function view(c, r, range)
  local gx = view_points(c, range)
  local grid = bbb.tensor(gx)
  local m, lo, hi = band(c, r.net, r.sigma, grid:reshape(-1, 1))
  local w_in, n_in, w_out, n_out = 0, 0, 0, 0
  for i, v in ipairs(gx) do
    if v >= c.task.lo and v <= c.task.hi then w_in, n_in = w_in + hi[i] - lo[i], n_in + 1
    else w_out, n_out = w_out + hi[i] - lo[i], n_out + 1 end
  end
  local v = { gx = gx, m = m, lo = lo, hi = hi, range = range,
              width_in = n_in > 0 and w_in / n_in or nil, width_out = n_out > 0 and w_out / n_out or nil }
  for _, w in ipairs { v.width_in or 0, v.width_out or 0 } do
    if w ~= w or w == math.huge then
      error({ usage = ("--xrange %s: the band is not finite there (the net's outputs overflow float32): give a "
        .. "narrower range"):format(fmt_range(range)) }, 0)
    end
  end
  if c.mlp then v.mlp = mlp_at(c, grid:reshape(-1, 1)) end
  y_extent(c, v)
  return v
end

-- What the seeds report, beside which ours are shown: seed 001's BNN -ELBO
-- (summed, last epoch, 1 sample), its MLP's MSE at the end and output at
-- x = 100; seed 004's ELBO, L2 and KL at beta 0.001.
local SEED1 = { elbo = 278.1, mlp_mse = 4.19e-05, mlp_mse_epoch = 25000, mlp_at_100 = -13 }
local SEED4 = { beta = 0.001, elbo = -0.04507, l2 = -0.01688, kl = 28.19 }

-- Seed 001's figures beside ours (its preset with the MLP on).
local function seed1_figures(c, r)
  local m, lo, hi = band(c, r.net, r.sigma, bbb.tensor{ { 4 }, { 100 } })
  return { elbo = r.last.elbo_per_example * c.n, mlp_mse = c.mlp_mse, mlp_at_100 = mlp_at(c, bbb.tensor{ { 100 } })[1],
           at4 = { truth = c.task.truth(4), mean = m[1], lo = lo[1], hi = hi[1] },
           at100 = { mean = m[2], lo = lo[2], hi = hi[2] } }
end

-- --summary: the run's figures as JSON: the settings, each net's KL weight,
-- coverage, noise sigma, seed 004's terms and its band's widths over each
-- range, the MLP's, and the seeds' figures beside ours.
local function write_summary(c)
  local args = c.args
  local nets = {}
  for i, r in ipairs(c.nets) do
    local views = {}
    for k, v in ipairs(r.views) do views[k] = { range = v.range, width_in = v.width_in, width_out = v.width_out } end
    nets[i] = { beta = r.beta, kl_weight = r.w, coverage = r.coverage, noise_sigma = r.sigma, terms = r.terms,
      seconds = r.seconds, views = views,
      last_epoch = { elbo_total = r.last.elbo_per_example * c.n, nll_total = r.last.nll_per_example * c.n } }
  end
  local t = { args = recipe.saved_args(args), task = args.task, n = c.n, training_range = { c.task.lo, c.task.hi },
    ranges = c.ranges, seconds = c.seconds, nets = nets,
    bnn = { sizes = c.bnn_sizes, activation = c.act_name, prior_sigma = c.prior_sigma, epochs = c.epochs,
            noise_sigma = c.fixed_sigma or "learned", optim = args.optim, lr = args.lr, samples = args.samples,
            kl = args.kl },
    mlp = c.mlp and { sizes = c.mlp_sizes, activation = c.act_name, optim = args.mlp_optim or args.optim,
                      lr = args.mlp_lr or args.lr, epochs = args.mlp_epochs or c.epochs, mse = c.mlp_mse } or nil,
    seed001 = c.seed1 and { ours = c.seed1, seed = SEED1 } or nil,
    seed004 = (#c.weights > 1 or args.preset == "s4") and SEED4 or nil }
  cli.write_file(args.summary, require("bbb.json").encode(cli.json_figures(t)) .. "\n")
end

--- regression.run(args) -> result: trains the Bayesian net (one per KL
-- weight) and the MLP baseline; result.nets[i] holds each net's beta, KL
-- weight, coverage, seed 004's terms (elbo, l2, kl) and its views, one per
-- plot range (gx, m, lo, hi: the grid, the predictive mean and the 95% band;
-- width_in, width_out); result.mlp_mse, result.seed1 (preset s1). With
-- --summary the figures go to that file as JSON too.
function regression.run(args)
  bbb.set_num_threads(args.threads)
  local c = setup(args)
  print(("%s: %d points in [%g, %g]; BBB %s, prior N(0, %g^2), noise sigma %s, %s lr %g, %d epochs, "
    .. "%d sample(s), kl %s")
    :format(args.task, c.n, c.task.lo, c.task.hi, arch(c.bnn_sizes, c.act_name), c.prior_sigma,
      c.fixed_sigma and ("%g (fixed)"):format(c.fixed_sigma) or "learned", args.optim, args.lr, c.epochs, args.samples,
      args.kl))
  if not args.no_mlp then train_mlp(c) end
  local t_all = clock()
  c.nets = train_bnns(c)
  c.seconds = clock() - t_all
  for _, r in ipairs(c.nets) do
    r.views = {}
    for k, range in ipairs(c.ranges) do r.views[k] = view(c, r, range) end
  end
  if args.preset == "s1" and c.mlp then c.seed1 = seed1_figures(c, c.nets[1]) end
  if args.summary then write_summary(c) end
  return c
end

-- How many times wider the band is outside the training range than inside
-- ("-" for a band of no width inside).
local function ratio_text(v)
  return v.width_in > 0 and ("%.1f"):format(v.width_out / v.width_in) or "-"
end

-- The lines of one net's report: its coverage and its band's widths.
local function net_lines(c, r)
  local lines = {}
  if r.coverage then
    lines[#lines + 1] = ("coverage of the 95%% band inside the training range: %.1f%% (%s)"):format(100 * r.coverage,
      (c.task.xs or c.args.band_of == "f") and "of the true function on 401 points" or "of 1000 fresh points")
  end
  for k, vv in ipairs(r.views) do
    if vv.width_out and vv.width_in then
      lines[#lines + 1] = ("mean band width over %s: inside the training range %.4f, outside %.4f, ratio %s")
        :format(fmt_range(c.ranges[k]), vv.width_in, vv.width_out, ratio_text(vv))
    elseif vv.width_out then
      lines[#lines + 1] = ("mean band width over %s: %.4f, all of it outside the training range %s")
        :format(fmt_range(c.ranges[k]), vv.width_out, fmt_range { c.task.lo, c.task.hi })
    end
  end
  return lines
end

--- regression.report(result): each net's coverage and band widths, the
-- seeds' figures beside ours, and the sweep's table.
function regression.report(c)
  local args = c.args
  for _, r in ipairs(c.nets) do
    r.report = net_lines(c, r)
    for _, l in ipairs(r.report) do print((#c.weights > 1 and ("beta %g: "):format(r.beta) or "") .. l) end
  end
  local s = c.seed1
  if s then
    print("seed 001 beside ours:")
    print(("  BNN -ELBO (summed, last epoch, 1 sample): seed %g, ours %.1f"):format(SEED1.elbo, s.elbo))
    print(("  MLP MSE at the end: seed %g (epoch %d), ours %.3g (epoch %d)")
      :format(SEED1.mlp_mse, SEED1.mlp_mse_epoch, s.mlp_mse, args.mlp_epochs or c.epochs))
    print(("  MLP at x = 100: seed about %g, ours %.2f"):format(SEED1.mlp_at_100, s.mlp_at_100))
    print(("  BBB at x = 4: truth %.0f, mean %.1f, band [%.1f, %.1f]; at x = 100: mean %.1f, band [%.1f, %.1f]")
      :format(s.at4.truth, s.at4.mean, s.at4.lo, s.at4.hi, s.at100.mean, s.at100.lo, s.at100.hi))
  end
  if #c.weights > 1 or args.preset == "s4" then
    print(("%-8s %10s %10s %10s %10s %10s %10s   %s"):format("beta", "ELBO", "L2", "KL", "coverage", "width in",
      "width out", "seed 004 (ELBO, L2, KL)"))
    for _, r in ipairs(c.nets) do
      local v = r.views[1]
      print(("%-8g %10.5f %10.5f %10.3f %9.1f%% %10.4f %10.4f   %s"):format(r.beta, r.terms.elbo, r.terms.l2,
        r.terms.kl, 100 * (r.coverage or 0), v.width_in or 0, v.width_out or 0,
        r.beta == SEED4.beta and ("%g, %g, %g"):format(SEED4.elbo, SEED4.l2, SEED4.kl) or "-"))
    end
  end
  if #c.weights > 1 then print(("sweep: %d nets in %.1f s"):format(#c.weights, c.seconds)) end
  return c
end

local YRULE = "y-range from the data and the truth over the training range"

-- The title and caption lines of one panel.
local function panel_text(c, r, v, single)
  local numbers, band_text = {}, {}
  if r.coverage then band_text[#band_text + 1] = ("coverage inside %.1f%%"):format(100 * r.coverage) end
  if v.width_out and v.width_in then
    band_text[#band_text + 1] = ("width inside %.3g, outside %.3g (x%s)"):format(v.width_in, v.width_out,
      ratio_text(v))
  elseif v.width_out then
    band_text[#band_text + 1] = ("width %.3g, all outside the training range"):format(v.width_out)
  end
  if #band_text > 0 then numbers[1] = "95% band: " .. table.concat(band_text, "; ") end
  local title = single and {} or { (#c.weights > 1 and ("beta = %g, "):format(r.beta) or "") .. "x in " .. fmt_range(v.range) }
  if single then
    title[1] = ("Bayes by Backprop, %s%s: BBB %s, %d epochs"):format(c.task.name,
      c.args.preset and (" (preset " .. c.args.preset .. ")") or "", arch(c.bnn_sizes, c.act_name), c.epochs)
  else
    if #c.weights > 1 then
      numbers[#numbers + 1] = ("ELBO %.4f, L2 %.4f, KL %.2f"):format(r.terms.elbo, r.terms.l2, r.terms.kl)
    end
    for _, l in ipairs(numbers) do title[#title + 1] = l end
  end
  if v.off then title[#title + 1] = v.off .. (single and (" (" .. YRULE .. (v.wide and " and the means" or "") .. ")") or "") end
  return title, numbers
end

-- One panel per (beta, range).
local function panel(c, r, v, single)
  local truth = {}
  for i, gx in ipairs(v.gx) do truth[i] = c.task.truth(gx) end
  local series = {
    { x = v.gx, y = truth, title = "true function", color = "#000000", width = 1.5, dash = 2 },
    { x = v.gx, y = v.m, title = "BBB predictive mean", color = "#08519c", width = 2.5 } }
  if v.mlp then series[#series + 1] = { x = v.gx, y = v.mlp, title = "MLP", color = "#d62728", width = 2 } end
  series[#series + 1] = { x = c.xs, y = c.ys, title = "data", style = "points", color = "#000000", pointtype = 7,
    pointsize = c.n > 50 and 0.5 or 1.2 }
  local title, numbers = panel_text(c, r, v, single)
  return {
    title = title, xlabel = "x", ylabel = "y", xrange = v.range, yrange = v.yrange,
    caption = single and numbers or nil,
    shade = { { lo = c.task.lo, hi = c.task.hi, color = "#fdf0c2", title = "training range" } },
    bands = { { x = v.gx, lo = v.lo, hi = v.hi, color = "#6baed6", opacity = 0.45, edges = true,
                edge_color = "#2171b5", title = ("95%% band of %s (%s)"):format(c.args.band_of, c.args.band) } },
    series = series,
  }
end

--- regression.plot(result): the curves, the data and the bands, one panel
-- per KL weight and plot range (not with --no-plot).
function regression.plot(c)
  local args = c.args
  if args.no_plot then return end
  local panels = {}
  for _, r in ipairs(c.nets) do
    for _, v in ipairs(r.views) do panels[#panels + 1] = panel(c, r, v, #c.nets * #c.ranges == 1) end
  end
  local file
  if #panels == 1 then
    local p = panels[1]
    p.file, p.size = args.out, { 1100, 650 }
    file = require("bbb.app.plot").lines(p)
  else
    local cols = #panels <= 3 and #panels or math.ceil(#panels / 2)
    local rows = math.ceil(#panels / cols)
    local key = cols <= 2 and "right" or "below"
    for _, p in ipairs(panels) do p.key = key end
    file = require("bbb.app.plot").panels{ file = args.out, size = { (key == "right" and 900 or 650) * cols, 560 * rows },
      layout = { rows, cols },
      page_title = { ("Bayes by Backprop, %s%s: BBB %s, %d epochs, band of %s (%s)"):format(c.task.name,
        args.preset and (" (preset " .. args.preset .. ")") or "", arch(c.bnn_sizes, c.act_name), c.epochs,
        args.band_of, args.band),
        YRULE .. " (and the means for a view 10x wider than the data); what leaves it is named" },
      panels = panels }
  end
  print("wrote " .. file)
end

return regression

--- 1-d regression with uncertainty bands: a Bayes-by-Backprop net against a
-- deterministic MLP, on the toy points of the PyTorch tutorial, the curve of
-- Blundell et al. (2015, fig. 5), or a noisy sine.
-- bbblua scripts/regression.lua --help
local bbb = require "bbb"
local argparse = require "argparse"
local cli = require "bbb.cli"

local parser = argparse("regression.lua", "Fit a Bayesian MLP (Bayes by Backprop) and a "
  .. "deterministic MLP to 1-d data; plot the posterior predictive mean and 95% band, and "
  .. "report band coverage and band width inside vs outside the training range.")
parser:option("--task", "toy, paper or sine.", "paper"):convert(cli.choice { "toy", "paper", "sine" })
parser:option("--n", "Training points (paper, sine).", "200"):convert(cli.positive_integer { max = 1000000 })
parser:option("--steps", "Training steps (full batch; default: the task's).")
  :convert(cli.positive_integer { max = 10000000 })
parser:option("--lr", "Adam learning rate.", "0.01"):convert(cli.positive_number())
parser:option("--hidden", "Units per hidden layer (default: the task's).")
  :convert(cli.positive_integer { max = 1 << 16 })
parser:option("--samples", "MC samples per step.", "4"):convert(cli.positive_integer { max = 1000 })
parser:option("--pred-samples", "MC samples for the predictive band.", "300"):convert(cli.positive_integer { max = 100000 })
parser:option("--prior-sigma", "Gaussian prior sigma (default: the task's).")
  :convert(cli.positive_number())
parser:option("--seed", "Random seed.", "1"):convert(cli.integer())
parser:option("--threads", "Threads.", "1"):convert(cli.threads())
parser:option("--out", "PNG file to write.", "out/regression.png"):convert(cli.output_path { ext = { "png", "svg" } })
parser:option("--log", "Append one JSON line per training step to this file.")
  :convert(cli.output_path { ext = { "jsonl", "json", "log" } })
parser:flag("--no-plot", "Skip the plot.")
local args = cli.parse(parser)

bbb.set_num_threads(args.threads)
local gen = bbb.Generator(args.seed)

-- Each task: how to draw (x, y), the training range, the plot range, and
-- the network and noise settings that suit it.
local tasks = {
  toy = {
    xs = { -2, -1.8, -1, 1, 1.8, 2 },
    f = function(x) return -x ^ 4 + 3 * x ^ 2 + 1 end,
    noise = 0, sigma = 0.1, learn_sigma = false, lo = -2, hi = 2, plot = { -4, 4 },
    hidden = 32, activation = bbb.nn.ReLU, steps = 3000, prior_sigma = 1,
  },
  paper = {
    -- y = x + 0.3 sin(2 pi (x + e)) + 0.3 sin(4 pi (x + e)) + e, e ~ N(0, 0.02^2)
    draw = function(x, e) return x + 0.3 * math.sin(2 * math.pi * (x + e)) + 0.3 * math.sin(4 * math.pi * (x + e)) + e end,
    noise = 0.02, sigma = 0.05, learn_sigma = true, lo = 0, hi = 0.5, plot = { -0.5, 1.2 },
    hidden = 32, activation = bbb.nn.ReLU, steps = 3000, prior_sigma = 2,
  },
  sine = {
    draw = function(x, e) return math.sin(x) + e end,
    noise = 0.1, sigma = 0.1, learn_sigma = true, lo = -3, hi = 3, plot = { -7, 7 },
    hidden = 10, activation = bbb.nn.Tanh, steps = 4000, prior_sigma = 1,
  },
}
local task = tasks[args.task]
local hidden = args.hidden or task.hidden
local steps = args.steps or task.steps

-- n points (x, y) from the task's process, x uniform in its range.
local function draw(n)
  if task.xs then
    local ys = {}
    for i, x in ipairs(task.xs) do ys[i] = task.f(x) end
    return task.xs, ys
  end
  local u = bbb.rand({ n }, task.lo, task.hi, gen):totable()
  local e = bbb.randn({ n }, 0, task.noise, gen):totable()
  local ys = {}
  for i = 1, n do ys[i] = task.draw(u[i], e[i]) end
  return u, ys
end

local function column(list) return bbb.tensor(list):reshape(-1, 1) end

local xs, ys = draw(args.n)
local x, y = column(xs), column(ys)
local n = #xs

local bnn = bbb.nn.bayes_mlp({ 1, hidden, hidden, 1 }, {
  prior = bbb.prior.Gaussian{ sigma = args.prior_sigma or task.prior_sigma }, activation = task.activation,
  rho_init = -5, generator = gen })
local mlp = bbb.nn.mlp({ 1, hidden, hidden, 1 }, { activation = task.activation, generator = gen })

local elbo = bbb.elbo.ELBO{ n_data = n, n_batches = 1, likelihood = "gaussian", sigma = task.sigma,
  learn_sigma = task.learn_sigma, samples = args.samples }
local params = bnn:named_parameters()
for _, p in ipairs(elbo:named_parameters()) do params[#params + 1] = p end
local opt = bbb.optim.Adam(params, { lr = args.lr })
-- Cosine decay over the run lets the fit settle instead of jittering at lr.
local schedule = bbb.optim.schedule.cosine(opt, steps, args.lr / 20)
local train_set = { x = x, y = y, n = n }

-- Full-batch training through the shared loop: one epoch is one step.
local clock = bbb.core.clock or os.clock
local t0 = clock()
local fit = bbb.train.fit{ model = bnn, elbo = elbo, optimizer = opt, schedule = schedule,
  data = train_set, batch_size = n, epochs = steps, generator = gen, log = args.log, quiet = true }
-- The MLP baseline: the same loop with a Gaussian likelihood of variance
-- 1/2 and no complexity term, i.e. the mean squared error plus a constant.
bbb.train.fit{ model = mlp, optimizer = bbb.optim.Adam(mlp, { lr = args.lr }), data = train_set,
  elbo = bbb.elbo.ELBO{ n_data = n, n_batches = 1, likelihood = "gaussian", sigma = math.sqrt(0.5) },
  batch_size = n, epochs = steps, generator = gen, quiet = true }
local last = fit.history[#fit.history]
print(("%s: %d points, BBB 1-%d-%d-1 and MLP, %d steps in %.1f s; -elbo/ex %.4f, nll/ex %.4f, "
  .. "complexity %.2f nats, noise sigma %.4f")
  :format(args.task, n, hidden, hidden, steps, clock() - t0, last.elbo_per_example, last.nll_per_example,
    last.complexity_total, elbo:sigma()))

-- Predictive mean and standard deviation (epistemic from the weight
-- samples plus the likelihood's noise) at the points xq (a column).
local function predict(xq)
  local mean, sd = bnn:predict(xq, { samples = args.pred_samples,
    likelihood = "gaussian", noise_sigma = elbo:sigma() })
  return mean:reshape(-1):totable(), sd:reshape(-1):totable()
end

-- Coverage of the 95% band on fresh points from the training range.
local coverage
if not task.xs then
  local fx, fy = draw(1000)
  local m, s = predict(column(fx))
  local inside = 0
  for i = 1, #fx do
    if math.abs(fy[i] - m[i]) <= 1.96 * s[i] then inside = inside + 1 end
  end
  coverage = inside / #fx
end

local grid = bbb.linspace(task.plot[1], task.plot[2], 400)
local gm, gs = predict(grid:reshape(-1, 1))
local mlp_line = bbb.no_grad(function() return mlp:forward(grid:reshape(-1, 1)) end):reshape(-1):totable()
local gx = grid:totable()
local w_in, n_in, w_out, n_out = 0, 0, 0, 0
local lo, hi, mid = {}, {}, {}
for i, v in ipairs(gx) do
  lo[i], hi[i] = gm[i] - 1.96 * gs[i], gm[i] + 1.96 * gs[i]
  if v >= task.lo and v <= task.hi then
    w_in, n_in = w_in + 2 * 1.96 * gs[i], n_in + 1
  else
    w_out, n_out = w_out + 2 * 1.96 * gs[i], n_out + 1
  end
end
local ratio = (w_out / n_out) / (w_in / n_in)
if coverage then
  print(("coverage of the 95%% band on 1000 fresh points: %.1f%%"):format(100 * coverage))
end
print(("mean band width: inside the training range %.4f, outside %.4f, ratio %.1f")
  :format(w_in / n_in, w_out / n_out, ratio))

if not args.no_plot then
  local file = bbb.plot.lines{
    file = args.out, title = ("Bayes by Backprop: %s"):format(args.task),
    xlabel = "x", ylabel = "y", xrange = task.plot,
    bands = { { x = gx, lo = lo, hi = hi, title = "BBB 95% band", color = "#9ecae1" } },
    series = {
      { x = gx, y = gm, title = "BBB predictive mean", style = "lines", color = "#08519c" },
      { x = gx, y = mlp_line, title = "MLP", style = "lines", color = "#d62728" },
      { x = xs, y = ys, title = "data", style = "points", color = "#000000" },
    },
  }
  print("wrote " .. file)
end

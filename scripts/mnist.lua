--- MNIST (or Fashion-MNIST) classification with Bayes by Backprop.
-- bbblua scripts/mnist.lua --help
local bbb = require "bbb"
local argparse = require "argparse"

local parser = argparse("mnist.lua", "Train a Bayesian MLP on MNIST with Bayes by Backprop "
  .. "(Blundell et al. 2015) and report test accuracy with posterior means and an MC ensemble.")
parser:option("--dataset", "mnist or fashion.", "mnist"):choices{ "mnist", "fashion" }
parser:option("--hidden", "Units per hidden layer.", "400"):convert(tonumber)
parser:option("--layers", "Hidden layers.", "2"):convert(tonumber)
parser:option("--prior", "Prior: mixture, gaussian or laplace.", "mixture"):choices{ "mixture", "gaussian", "laplace" }
parser:option("--pi", "Mixture weight of the wide component.", "0.25"):convert(tonumber)
parser:option("--sigma1", "Wide component's sigma (gaussian: its sigma; laplace: b).", "1"):convert(tonumber)
parser:option("--sigma2", "Narrow component's sigma (default e^-7).", tostring(math.exp(-7))):convert(tonumber)
parser:option("--samples", "MC samples per minibatch in training.", "1"):convert(tonumber)
parser:option("--estimator", "weight, local or flipout.", "weight"):choices{ "weight", "local", "flipout" }
parser:option("--kl-weight", "uniform, blundell or a number.", "uniform")
parser:option("--optim", "adam, sgd or rmsprop.", "adam"):choices{ "adam", "sgd", "rmsprop" }
parser:option("--lr", "Learning rate.", "0.001"):convert(tonumber)
parser:option("--lr-decay", "Learning rate multiplied by this after each epoch.", "0.95"):convert(tonumber)
parser:option("--momentum", "SGD momentum.", "0.9"):convert(tonumber)
parser:option("--rho-init", "Initial rho (sigma = softplus(rho)).", "-5"):convert(tonumber)
parser:option("--batch", "Minibatch size.", "128"):convert(tonumber)
parser:option("--epochs", "Training epochs.", "30"):convert(tonumber)
parser:option("--seed", "Random seed.", "1"):convert(tonumber)
parser:option("--threads", "Threads for GEMM and elementwise passes.", "2"):convert(tonumber)
parser:option("--test-samples", "MC samples for the final ensemble.", "10"):convert(tonumber)
parser:option("--pixel-scale", "Divide pixels by this (the paper: 126).", "126"):convert(tonumber)
parser:option("--limit", "Use only the first N training images (smoke runs).")
  :convert(tonumber)
parser:option("--test-limit", "Use only the first N test images.")
  :convert(tonumber)
parser:option("--save", "Write the per-epoch log as JSON to this file.")
local args = parser:parse()

local function check_positive_int(v, name)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) or v < 1 then
    parser:error(("--%s must be a positive integer, got %s"):format(name, tostring(v)))
  end
  return math.tointeger(v)
end
for _, k in ipairs{ "hidden", "layers", "samples", "batch", "epochs", "threads", "test_samples" } do
  args[k] = check_positive_int(args[k], k:gsub("_", "-"))
end
local kl_weight = args.kl_weight
if kl_weight ~= "uniform" and kl_weight ~= "blundell" then
  kl_weight = tonumber(kl_weight) or parser:error("--kl-weight must be uniform, blundell or a number")
end

bbb.set_num_threads(args.threads)
bbb.manual_seed(args.seed)
local gen = bbb.Generator(args.seed)
local clock = bbb.core.clock or os.clock

local load = args.dataset == "mnist" and bbb.data.load_mnist or bbb.data.load_fashion_mnist
local scale = 1 / args.pixel_scale
local train = load{ split = "train", scale = scale, limit = args.limit and math.tointeger(args.limit) }
local test = load{ split = "test", scale = scale, limit = args.test_limit and math.tointeger(args.test_limit) }

local prior
if args.prior == "mixture" then
  prior = bbb.prior.ScaleMixture{ pi = args.pi, sigma1 = args.sigma1, sigma2 = args.sigma2 }
elseif args.prior == "gaussian" then
  prior = bbb.prior.Gaussian{ sigma = args.sigma1 }
else
  prior = bbb.prior.Laplace{ b = args.sigma1 }
end

local sizes = { 784 }
for _ = 1, args.layers do sizes[#sizes + 1] = args.hidden end
sizes[#sizes + 1] = 10
local net = bbb.nn.bayes_mlp(sizes, { prior = prior, estimator = args.estimator,
  rho_init = args.rho_init, generator = gen })

local n_batches = bbb.data.num_batches(train.n, args.batch)
local elbo = bbb.elbo.ELBO{ n_data = train.n, n_batches = n_batches, samples = args.samples,
  kl_weight = kl_weight }
local opt
if args.optim == "adam" then
  opt = bbb.optim.Adam(net, { lr = args.lr })
elseif args.optim == "sgd" then
  opt = bbb.optim.SGD(net, { lr = args.lr, momentum = args.momentum })
else
  opt = bbb.optim.RMSprop(net, { lr = args.lr })
end
local schedule = bbb.optim.schedule.exponential(opt, args.lr_decay)

print(("%s: %d training, %d test images, pixels / %g"):format(args.dataset, train.n, test.n, args.pixel_scale))
print(tostring(net))
print(("optimizer %s lr %g (x%g per epoch), batch %d, %d MC sample(s), kl weight %s, %d thread(s)")
  :format(args.optim, args.lr, args.lr_decay, args.batch, args.samples, tostring(kl_weight), args.threads))

-- Accuracy of MC-averaged (or posterior-mean) predictions, in batches.
local function evaluate(ds, samples, mode)
  local correct = 0
  for _, xb, yb in bbb.data.batches(ds, 1000) do
    local p = net:predict(xb, { samples = samples, mode = mode })
    correct = correct + bbb.metrics.accuracy(p, yb) * xb:size(1)
  end
  return correct / ds.n
end

local log = {}
local t_start = clock()
for epoch = 1, args.epochs do
  local t0 = clock()
  local bar = bbb.progress.new{ total = n_batches, label = ("epoch %d/%d"):format(epoch, args.epochs) }
  local sum = { loss = 0, nll = 0, complexity = 0, correct = 0, n = 0 }
  for i, xb, yb in bbb.data.batches(train, args.batch, { shuffle = true, generator = gen }) do
    opt:zero_grad()
    local loss, terms = elbo:loss(net, xb, yb, { batch = i, step = opt.t + 1 })
    loss:backward()
    opt:step()
    local B = xb:size(1)
    sum.loss = sum.loss + terms.nll_sum + terms.kl_weight * terms.complexity
    sum.nll = sum.nll + terms.nll_sum
    sum.complexity = sum.complexity + terms.kl_weight * terms.complexity
    sum.n = sum.n + B
    bar:update(i, ("nll %.4f"):format(terms.nll))
  end
  bar:finish()
  schedule:step()
  local train_seconds = clock() - t0
  local test_acc = evaluate(test, 1, "mean")
  local rec = {
    epoch = epoch, elbo_per_example = sum.loss / sum.n, nll_per_example = sum.nll / sum.n,
    complexity_total = sum.complexity, complexity_per_example = sum.complexity / sum.n,
    test_acc_mean = test_acc, seconds = clock() - t0, train_seconds = train_seconds,
  }
  log[#log + 1] = rec
  print(("epoch %2d  -elbo/ex %.4f  complexity %.1f (%.4f/ex)  nll/ex %.4f  test acc (mean w) %.2f%%  %.1f s")
    :format(epoch, rec.elbo_per_example, rec.complexity_total, rec.complexity_per_example,
      rec.nll_per_example, 100 * test_acc, rec.seconds))
  io.stdout:flush()
end

local acc_mean = evaluate(test, 1, "mean")
local acc_mc = evaluate(test, args.test_samples, "sample")
local total = clock() - t_start
print(("test accuracy: posterior means %.2f%%, MC ensemble of %d samples %.2f%% (test error %.2f%%)")
  :format(100 * acc_mean, args.test_samples, 100 * acc_mc, 100 * (1 - acc_mc)))
print(("total %.1f s"):format(total))
if args.save then
  local cjson = require "cjson"
  local f = assert(io.open(args.save, "w"))
  f:write(cjson.encode{ args = args, epochs = log, test_acc_mean = acc_mean, test_acc_mc = acc_mc, seconds = total })
  f:close()
end

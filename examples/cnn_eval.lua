--- Scores a saved CNN (or any classifier) on its test set as doc/results/cnn_*.json
-- do: accuracy, NLL and ECE of a 10-sample ensemble and of the posterior
-- means, and the ELBO per example on the first 10,000 training images with
-- every Bayesian layer switched to weight sampling, so models trained with
-- different estimators are scored by one objective.
--   build/bbblua examples/cnn_eval.lua out/mnist_cnn.st mnist
local bbb = require "bbb"
bbb.set_num_threads(1)
local net = assert(arg[1], "usage: cnn_eval.lua MODEL.st mnist|fashion") and bbb.load(arg[1])
local load = arg[2] == "fashion" and bbb.data.load_fashion_mnist or bbb.data.load_mnist
local test, train = load{ split = "test", scale = 1 / 126 }, load{ split = "train", scale = 1 / 126 }

local function predict(opts)
  local parts, labels = {}, {}
  for _, xb, yb in bbb.data.batches(test, 1000) do
    parts[#parts + 1], labels[#labels + 1] = net:predict(xb, opts), yb
  end
  return bbb.cat(parts), bbb.cat(labels)
end
local res = {}
for name, opts in pairs { mc = { samples = 10 }, mean = { mode = "mean" } } do
  local p, y = predict(opts)
  res["acc_" .. name], res["nll_" .. name], res["ece_" .. name] =
    bbb.metrics.accuracy(p, y), bbb.metrics.nll(p, y), bbb.metrics.ece(p, y)
end

-- The ELBO: 3 weight samples per 1000 images; the complexity term / 60000.
net:apply(function(l) if l.estimator then l.estimator = "weight" end end)
net:train()
local part, nll, kl, nb = bbb.data.split(train, 10000), 0, 0, 0
bbb.no_grad(function()
  for _ = 1, 3 do
    for _, xb, yb in bbb.data.batches(part, 1000) do
      nll = nll + bbb.cross_entropy(net:forward(xb), yb, "sum"):item()
      local k = net:kl()
      kl, nb = kl + (k and k:item() or 0), nb + 1
    end
  end
end)
res.train_nll_per_example, res.complexity_per_example = nll / (3 * part.n), kl / nb / train.n
res.elbo_per_example = -(res.train_nll_per_example + res.complexity_per_example)
print(require("bbb.json").encode(res))

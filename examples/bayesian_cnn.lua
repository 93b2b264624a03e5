--- A trained plain CNN made Bayesian (bbb.nn.bayesian: mu = its weights,
-- sigma = 0.1 |w|, MOPED) and trained a few more epochs with Bayes by
-- Backprop: test accuracy, and how well the predictive entropy and the
-- mutual information tell MNIST from Fashion-MNIST (AUROC), before and after.
--   build/bbblua scripts/mnist.lua --model cnn-plain --save out/cnn-plain.st
--   build/bbblua examples/bayesian_cnn.lua out/cnn-plain.st [EPOCHS [LIMIT]]
-- Without a model (or with - for it) it trains a small plain CNN on 2,000 images first.
local bbb = require "bbb"
local epochs, limit = tonumber(arg[2]) or 2, tonumber(arg[3])
bbb.set_num_threads(1)
local gen = bbb.Generator(1)
local scale = 1 / 126
local train = bbb.data.load_mnist { split = "train", scale = scale, limit = limit }
local test = bbb.data.load_mnist { split = "test", scale = scale, limit = 2000 }
local other = bbb.data.load_fashion_mnist { split = "test", scale = scale, limit = 2000 }

local plain
if arg[1] and arg[1] ~= "-" then
  plain = bbb.load(arg[1])
else   -- a quick stand-in for a saved model
  plain = bbb.nn.lenet { bayes = false, channels = { 8, 16 }, hidden = { 64 }, generator = gen }
  bbb.train.fit { model = plain, optimizer = bbb.optim.Adam(plain, { lr = 2e-3 }),
    data = bbb.data.split(train, math.min(2000, train.n - 1)), batch_size = 64, epochs = 3, generator = gen, quiet = true, progress = "off" }
end

-- Per-image probabilities, as samples x images x classes.
local function passes(net, x, samples)
  local parts = {}
  for s = 1, samples do
    local chunk = {}
    for i = 1, x:size(1), 500 do
      local xb = x:narrow(1, i, math.min(500, x:size(1) - i + 1))
      chunk[#chunk + 1] = net:predict(xb, samples > 1 and { samples = 1 } or { mode = "mean" })
    end
    parts[s] = bbb.cat(chunk):reshape(1, x:size(1), 10)
  end
  return bbb.cat(parts, 1)
end

local function report(name, net, samples)
  local pin, pout = passes(net, test.x, samples), passes(net, other.x, samples)
  local u_in, u_out = bbb.metrics.uncertainty(pin), bbb.metrics.uncertainty(pout)
  local acc = bbb.metrics.accuracy(u_in.mean, test.y)
  -- detection(in-distribution scores, out-of-distribution scores): the out set is the positive class
  local auc_h = bbb.metrics.detection(u_in.predictive, u_out.predictive).auroc
  local auc_mi = samples > 1 and ("%.4f"):format(bbb.metrics.detection(u_in.mutual_information,
    u_out.mutual_information).auroc) or "-"
  print(("%-34s accuracy %.2f%%  AUROC MNIST vs Fashion by entropy %.4f, by mutual information %s")
    :format(name, 100 * acc, auc_h, auc_mi))
end

report("plain CNN", plain, 1)
local net = bbb.nn.bayesian(plain, { delta = 0.1, generator = gen })
report("Bayesian twin, before training", net, 10)
local elbo = bbb.elbo.ELBO { n_data = train.n, batch_size = 128 }
bbb.train.fit { model = net, elbo = elbo, optimizer = bbb.optim.Adam(net, { lr = 1e-4 }), data = train,
  batch_size = 128, epochs = epochs, generator = gen, quiet = true }
report(("Bayesian twin, %d epoch%s of BBB"):format(epochs, epochs == 1 and "" or "s"), net, 10)

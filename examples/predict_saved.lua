--- Prediction with uncertainty from a saved model: train a small Bayesian
-- classifier, save it, load it back as another program would, and ask how
-- sure it is about points near its data and far from it.
-- bbblua examples/predict_saved.lua
local bbb = require "bbb"

bbb.manual_seed(2)
local gen = bbb.Generator(2)

-- two classes: blobs around (-1, -1) and (1, 1); labels are 1-based
local n = 200
local x = bbb.randn({ n, 2 }, 0, 0.5, gen)
local shift, labels = {}, {}
for i = 1, n do
  local c = i <= n / 2 and 1 or 2
  shift[i], labels[i] = { c == 1 and -1 or 1, c == 1 and -1 or 1 }, c
end
x = x + bbb.tensor(shift)
local y = bbb.tensor(labels)

local net = bbb.nn.bayes_mlp({ 2, 16, 2 }, { prior = bbb.prior.Gaussian{ sigma = 1 }, rho_init = -3, generator = gen })
local result = bbb.train.fit{ model = net, optimizer = bbb.optim.Adam(net, { lr = 0.02 }), data = { x = x, y = y, n = n },
  batch_size = 50, epochs = 150, generator = gen, quiet = true, progress = "off" }
print(("trained %d epochs: nll per point %.3f"):format(#result.history, result.history[#result.history].nll_per_example))

local path = os.tmpname()
bbb.save(path, net)
local loaded = bbb.load(path)   -- the architecture, prior and weights come back from the file
os.remove(path)

-- 200 weight samples per point: the predictive entropy, and its epistemic part
-- (mutual information between the prediction and the weights)
local points = { { -1, -1 }, { 0, 0 }, { 6, -6 } }
local names = { "inside class 1", "between the classes", "far from all data" }
local _, samples = loaded:predict(bbb.tensor(points), { samples = 200, keep_samples = "tensor" })
local u = bbb.metrics.uncertainty(samples)
local mean, h, mi = u.mean:totable(), u.predictive:totable(), u.mutual_information:totable()
for i, p in ipairs(points) do
  print(("(%2d, %2d) %-20s p(class 2) = %.3f  entropy %.3f nats  mutual information %.3f nats")
    :format(p[1], p[2], names[i], mean[i][2], h[i], mi[i]))
end

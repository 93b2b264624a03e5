--- Bad arguments to the library, as a user at the REPL would pass them: every
-- call below with every odd value in its slot. Some values are fine in some
-- slots, so a call may succeed; it must never crash or hang, and when it
-- refuses, the message must name the function or the argument. A shorter
-- list of calls must be refused outright.
local PRELUDE = "local x = bbb.randn(3, 4); local net = bbb.nn.bayes_mlp({4, 5, 3}); "
  .. "local p = bbb.randn(4, 3):softmax(2); local ds = {x = bbb.randn(6, 4), y = bbb.tensor{1, 2, 3, 1, 2, 3}, n = 6}; "

local VALUES = { "nil", "'abc'", "0/0", "math.huge", "-math.huge", "-1", "0", "1.5", "1 << 40", "1e12", "{}", "true",
  "bbb.zeros(0)", "bbb.randn(2, 2, 2)", "x", "function() end", "{-3}", "{1e12}", "io.stdout" }

local CALLS = {
  "bbb.zeros(%s)", "bbb.ones(%s)", "bbb.randn(%s)", "bbb.rand(%s)", "bbb.empty(%s)", "bbb.full(%s, 1)",
  "bbb.full({2}, %s)", "bbb.tensor(%s)", "bbb.arange(%s)", "bbb.linspace(0, 1, %s)", "bbb.zeros(2, %s)",
  "x:reshape(%s)", "x:reshape(3, %s)", "x:sum(%s)", "x:mean(%s)", "x:max(%s)", "x:argmax(%s)", "x:softmax(%s)",
  "x:log_softmax(%s)", "x:transpose(%s, 1)", "x:narrow(1, %s, 1)", "x:narrow(1, 1, %s)", "x:index_select(1, %s)",
  "bbb.matmul(x, %s)", "bbb.matmul(%s, x)", "x:pow(%s)", "x:clamp(%s, 1)", "bbb.cat({x, %s}, 1)", "bbb.cat(%s, 1)",
  "bbb.conv2d(bbb.randn(1, 1, 5, 5), %s)", "bbb.conv2d(%s, bbb.randn(1, 1, 3, 3))",
  "bbb.max_pool2d(bbb.randn(1, 1, 4, 4), %s)", "bbb.avg_pool2d(bbb.randn(1, 1, 4, 4), %s)",
  "bbb.cross_entropy(x, %s)", "bbb.cross_entropy(%s, {1, 2, 3})", "bbb.gaussian_loglik(x, x, %s)",
  "bbb.nn.Linear(%s, 3)", "bbb.nn.Linear(3, %s)", "bbb.nn.BayesLinear(%s, 3)", "bbb.nn.BayesLinear(3, 3, {prior = %s})",
  "bbb.nn.Conv2d(%s, 2, 3)", "bbb.nn.Dropout(%s)", "bbb.nn.bayes_mlp(%s)", "bbb.nn.mlp({4, %s})", "net:forward(%s)",
  "bbb.prior.Gaussian{sigma = %s}", "bbb.prior.ScaleMixture{pi = %s, sigma1 = 1, sigma2 = 0.1}",
  "bbb.prior.Laplace{b = %s}", "bbb.elbo.ELBO{n_data = %s, n_batches = 1}", "bbb.elbo.ELBO{n_data = 10, n_batches = %s}",
  "bbb.optim.Adam(net, {lr = %s})", "bbb.optim.SGD(net, {lr = %s})", "bbb.optim.SGD(net, {lr = 0.1, momentum = %s})",
  "bbb.optim.RMSprop(net, {lr = %s})", "bbb.metrics.accuracy(p, %s)", "bbb.metrics.nll(p, %s)",
  "bbb.metrics.ece(p, {1, 2, 3, 1}, %s)", "bbb.metrics.entropy(%s)", "bbb.data.read_csv(%s)",
  "bbb.data.load_r('data/r/mlbench', %s)", "bbb.data.load_mnist{limit = %s}", "bbb.load(%s)", "bbb.save(%s, net)",
  "bbb.save('s.ckpt', %s)", "bbb.manual_seed(%s)", "bbb.set_num_threads(%s)", "bbb.Generator(%s)",
  "bbb.from_bytes(%s, {2})", "bbb.data.batches(ds, %s)", "bbb.data.split(ds, %s)", "bbb.data.permutation(%s)",
}

-- Each must be refused.
local REFUSE = {
  "bbb.zeros('abc')", "bbb.zeros(nil)", "bbb.tensor{1e39}", "bbb.randn(2, 3):softmax(3)",
  "bbb.linspace(0, 0/0, 5)", "bbb.from_bytes('abc', {2, 2})",
  "bbb.elbo.ELBO{n_data = 10, n_batches = 1, kl_weight = math.huge}",
  "bbb.optim.SGD(bbb.nn.Linear(2, 2), {lr = 0.1, momentum = 1})",
  "bbb.optim.Adam(bbb.nn.Linear(2, 2), {lr = 0.1, betas1 = 0.9})",
  "bbb.conv2d(bbb.randn(1, 1, 4, 4), bbb.randn(2, 1, 9, 9))",
  "bbb.data.load_mnist{split = 'train', scale = 0/0}", "bbb.data.read_csv('data/none.csv')",
  "bbb.randn(2, 3):transpose(1, 5)", "bbb.zeros(-1)", "bbb.zeros(1 << 40)", "bbb.randn(3, 4):reshape(5)",
  "bbb.matmul(bbb.randn(2, 3), bbb.randn(2, 3))", "bbb.nn.Linear(0, 3)", "bbb.nn.Dropout(1.5)",
  "bbb.prior.Gaussian{sigma = -1}", "bbb.prior.ScaleMixture{pi = 2, sigma1 = 1, sigma2 = 0.1}",
  "bbb.metrics.accuracy(bbb.tensor{{0/0, 1}}, {1})", "bbb.nn.bayes_mlp({4, 5, 3}):forward(bbb.randn(2, 7))",
  "bbb.cat({bbb.randn(2, 3), bbb.randn(2, 4)}, 1)", "bbb.randn(2, 3):narrow(2, 3, 2)",
  "bbb.load('data')", "bbb.data.load_r('data/r/mlbench', 'NoSuchSet')",
}

return function(t)
  for _, call in ipairs(CALLS) do
    for _, v in ipairs(VALUES) do
      local code = call:format(v)
      t.case("lib " .. code, t.lua(PRELUDE .. code), "robust")
    end
  end
  for _, code in ipairs(REFUSE) do
    t.case("lib refuses " .. code, t.lua(code), "refuse")
  end
end

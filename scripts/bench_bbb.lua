--- Speed of a Bayes-by-Backprop training step against the GEMMs it contains,
-- measured in the same run, for 784-1200-1200-10 and 784-400-400-10.
-- bbblua scripts/bench_bbb.lua --help
local bbb = require "bbb"
local argparse = require "argparse"
local core = bbb.core
local cli = require "bbb.cli"
local bench = require "bbb.bench"

local parser = argparse("bench_bbb.lua", "Time full training steps (forward, ELBO, backward, "
  .. "Adam) of Bayesian MLPs with the scale-mixture prior against the bare sgemm calls the "
  .. "step contains, and MC inference over 10,000 images.")
parser:option("--threads", "Threads.", "2"):convert(cli.threads())
parser:option("--batch", "Minibatch size.", "128"):convert(cli.positive_integer())
parser:option("--steps", "Timed training steps per network.", "30"):convert(cli.positive_integer())
parser:option("--infer-samples", "MC samples for the inference timing.", "100"):convert(cli.positive_integer())
parser:option("--infer-images", "Images for the inference timing.", "10000")
  :convert(cli.positive_integer())
parser:option("--estimator", "weight, local or flipout.", "weight")
  :convert(cli.choice { "weight", "local", "flipout" })
local args = cli.parse(parser)
local threads, B = math.tointeger(args.threads), math.tointeger(args.batch)
bbb.set_num_threads(threads)
local clock = core.clock

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

local function peak_rss_mib()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmHWM:%s+(%d+)")
    if kb then return tonumber(kb) / 1024 end
  end
end

-- The sgemm calls of one training step: per layer, forward x W^T, then
-- backward g^T x (grad W) and g W (grad x, not for the input layer).
local function gemm_floor(sizes, reps, forward_only)
  local total = 0
  for l = 1, #sizes - 1 do
    local n_in, n_out = sizes[l], sizes[l + 1]
    total = total + bench.sgemm(B, n_out, n_in, false, true, reps)
    if not forward_only then
      total = total + bench.sgemm(n_out, n_in, B, true, false, reps)
      if l > 1 then total = total + bench.sgemm(B, n_in, n_out, false, false, reps) end
    end
  end
  return total
end

local function bench(sizes)
  local gen = bbb.Generator(1)
  local net = bbb.nn.bayes_mlp(sizes, { prior = bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) },
    estimator = args.estimator, generator = gen })
  local opt = bbb.optim.Adam(net, { lr = 1e-3 })
  local elbo = bbb.elbo.ELBO{ n_data = 60000, batch_size = B }
  local x = bbb.rand({ B, sizes[1] }, 0, 2, gen)
  local labels = {}
  for i = 1, B do labels[i] = (i % sizes[#sizes]) + 1 end
  local y = bbb.tensor(labels)
  -- One step, timed by phase: forward with the ELBO, backward, optimizer.
  local function step(ph)
    local t0 = clock()
    opt:zero_grad()
    local loss = elbo:loss(net, x, y, { batch = 1 })
    local t1 = clock()
    loss:backward()
    local t2 = clock()
    opt:step()
    local t3 = clock()
    if ph then
      ph.fwd[#ph.fwd + 1], ph.bwd[#ph.bwd + 1], ph.opt[#ph.opt + 1] = t1 - t0, t2 - t1, t3 - t2
      ph.all[#ph.all + 1] = t3 - t0
    end
  end
  for _ = 1, 5 do step() end
  local ph = { fwd = {}, bwd = {}, opt = {}, all = {} }
  for _ = 1, math.tointeger(args.steps) do step(ph) end
  local t_step = median(ph.all)
  local t_gemm = gemm_floor(sizes, 21)

  -- Inference: S weight samples over the images, in batches of 1000.
  local n_img, S = math.tointeger(args.infer_images), math.tointeger(args.infer_samples)
  local xs = bbb.rand({ math.min(n_img, 1000), sizes[1] }, 0, 2, gen)
  local batches = math.ceil(n_img / 1000)
  net:evaluate()
  local t0 = clock()
  bbb.no_grad(function()
    for _ = 1, S do
      for _ = 1, batches do net:forward(xs):softmax() end
    end
  end)
  local t_inf = clock() - t0
  local saveB = B
  B = xs:size(1)
  local t_inf_gemm = gemm_floor(sizes, 5, true) * S * batches
  B = saveB
  return { step = t_step, gemm = t_gemm, inf = t_inf, inf_gemm = t_inf_gemm, S = S, n = batches * xs:size(1),
           fwd = median(ph.fwd), bwd = median(ph.bwd), opt = median(ph.opt),
           weights = (function() local n = 0 for l = 1, #sizes - 1 do n = n + (sizes[l] + 1) * sizes[l + 1] end return n end)() }
end

print(("bbb %s, %d thread(s), batch %d, 1 MC sample, ScaleMixture prior, Adam, estimator %s")
  :format(bbb.version, threads, B, args.estimator))
print(("%-18s %12s %12s %8s %14s %14s %8s"):format("network", "step ms", "GEMMs ms", "ratio",
  "MC infer s", "infer GEMM s", "ratio"))
for _, sizes in ipairs{ { 784, 1200, 1200, 10 }, { 784, 400, 400, 10 } } do
  local r = bench(sizes)
  print(("%-18s %12.2f %12.2f %8.2f %14.2f %14.2f %8.2f"):format(table.concat(sizes, "-"),
    r.step * 1e3, r.gemm * 1e3, r.step / r.gemm, r.inf, r.inf_gemm, r.inf / r.inf_gemm))
  print(("%-18s training %.1f steps/s; inference %d samples x %d images: %.2f s, %.1f sample-passes/s")
    :format("", 1 / r.step, r.S, r.n, r.inf, r.S / r.inf))
  -- Adam reads g, p, m, v and writes p, m, v: 28 bytes per parameter, two
  -- parameters (mu, rho) per weight, whatever the implementation.
  print(("%-18s phases: forward+ELBO %.2f ms, backward %.2f ms, optimizer %.2f ms (%.1f GB/s over its %d MB)")
    :format("", r.fwd * 1e3, r.bwd * 1e3, r.opt * 1e3, 56 * r.weights / r.opt / 1e9, 56 * r.weights // 1000000))
end
print(("peak RSS %.0f MiB"):format(peak_rss_mib()))
print("target: step / GEMMs <= 1.5 for 784-1200-1200-10 on 2 threads")

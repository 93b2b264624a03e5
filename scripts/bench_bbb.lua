--- Speed of a Bayes-by-Backprop training step against the GEMMs it contains,
-- measured in the same run: 784-1200-1200-10 and 784-400-400-10, MC
-- inference, thread scaling, and the cost of each estimator and C prior.
-- bbblua scripts/bench_bbb.lua --help
local bbb = require "bbb"
local recipe = require "bbb.recipe"
local core = bbb.core
local cli = require "bbb.cli"
local bench = require "bbb.bench"

local parser = recipe.parser("bench_bbb.lua", "Time full training steps (forward, ELBO, backward, "
  .. "Adam) of Bayesian MLPs against the bare sgemm calls the step contains, MC inference over "
  .. "10,000 images, the step on one thread against all, and one table of the step's cost with "
  .. "each estimator and each C prior. Ratios are against floors measured in the same run.", {})
recipe.declare(parser, { "threads" })
recipe.declare(parser, { "batch" })
parser:option("--steps", "Timed training steps per network.", "30"):convert(cli.positive_integer())
parser:option("--infer-samples", "MC samples for the inference timing.", "100"):convert(cli.positive_integer())
parser:option("--infer-images", "Images for the inference timing.", "10000")
  :convert(cli.positive_integer())
parser:option("--estimator", "weight, local or flipout (the main table).", "weight")
  :convert(cli.choice { "weight", "local", "flipout" })
parser:flag("--no-table", "Skip the estimator x prior table, the thread scaling and the busy time.")
parser:flag("--busy-child", "(internal) time steps for the busy-time measurement and print them."):hidden(true)
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
local function gemm_floor(sizes, reps, forward_only, batch)
  local total = 0
  for l = 1, #sizes - 1 do
    local n_in, n_out = sizes[l], sizes[l + 1]
    total = total + bench.sgemm(batch, n_out, n_in, false, true, reps)
    if not forward_only then
      total = total + bench.sgemm(n_out, n_in, batch, true, false, reps)
      if l > 1 then total = total + bench.sgemm(batch, n_in, n_out, false, false, reps) end
    end
  end
  return total
end

local PRIORS = {
  ScaleMixture = function() return bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) } end,
  Gaussian = function() return bbb.prior.Gaussian{ sigma = 1 } end,
  Laplace = function() return bbb.prior.Laplace{ b = 1 } end,
}

local function n_weights(sizes)
  local n = 0
  for l = 1, #sizes - 1 do n = n + (sizes[l] + 1) * sizes[l + 1] end
  return n
end

-- A network ready to train, as the three phases of a step: forward with
-- the ELBO, backward, optimizer. Each phase takes the previous one's result.
local function phases(sizes, estimator, prior, build)
  local gen = bbb.Generator(1)
  local opts = { prior = PRIORS[prior](), estimator = estimator, generator = gen }
  local net = (build or bbb.nn.bayes_mlp)(sizes, opts)
  local opt = bbb.optim.Adam(net, { lr = 1e-3 })
  local elbo = bbb.elbo.ELBO{ n_data = 60000, batch_size = B }
  local x = bbb.rand({ B, sizes[1] }, 0, 2, gen)
  local labels = {}
  for i = 1, B do labels[i] = (i % sizes[#sizes]) + 1 end
  local y = bbb.tensor(labels)
  return {
    function() opt:zero_grad(); return elbo:loss(net, x, y, { batch = 1 }) end,
    function(loss) loss:backward() end,
    function() opt:step() end,
  }, net
end

-- run(n) times n training steps and returns the median times, overall and
-- by phase.
local function stepper(sizes, estimator, prior, build)
  local ph_fns, net = phases(sizes, estimator, prior, build)
  local function step(ph)
    local v, t = nil, { clock() }
    for k, f in ipairs(ph_fns) do
      v = f(v)
      t[k + 1] = clock()
    end
    if ph then
      ph.fwd[#ph.fwd + 1], ph.bwd[#ph.bwd + 1], ph.opt[#ph.opt + 1] = t[2] - t[1], t[3] - t[2], t[4] - t[3]
      ph.all[#ph.all + 1] = t[4] - t[1]
    end
  end
  for _ = 1, 5 do step() end
  return function(n)
    local ph = { fwd = {}, bwd = {}, opt = {}, all = {} }
    for _ = 1, n do step(ph) end
    return { step = median(ph.all), fwd = median(ph.fwd), bwd = median(ph.bwd), opt = median(ph.opt), net = net }
  end
end

-- On a shared machine a block of timings can land on a busy moment, and
-- this one also switches between a faster-GEMM and a slower-GEMM state that
-- last seconds: the step and its GEMM floor alternate over a few rounds,
-- each round's ratio pairs a step with the floor measured right after it
-- (so both come from the same state), and the round with the median ratio
-- is reported, its step and floor with it. (Each side's best round, taken
-- apart, could pair a floor from one state with steps from the other.)
local ROUNDS = 3
local function time_against_floor(run, floor, steps)
  local rounds = {}
  for i = 1, ROUNDS do
    local r = run(math.max(1, steps // ROUNDS))
    rounds[i] = { r = r, floor = floor() }
  end
  table.sort(rounds, function(a, b) return a.r.step / a.floor < b.r.step / b.floor end)
  local mid = rounds[(ROUNDS + 1) // 2]
  return mid.r, mid.floor
end

local function bench_net(sizes)
  local r, floor = time_against_floor(stepper(sizes, args.estimator, "ScaleMixture"),
    function() return gemm_floor(sizes, 11, false, B) end, math.tointeger(args.steps))
  r.gemm = floor
  -- Inference: S weight samples over the images, in batches of 1000.
  local n_img, S = math.tointeger(args.infer_images), math.tointeger(args.infer_samples)
  local gen = bbb.Generator(2)
  local xs = bbb.rand({ math.min(n_img, 1000), sizes[1] }, 0, 2, gen)
  local batches = math.ceil(n_img / 1000)
  r.net:evaluate()
  local t0 = clock()
  bbb.no_grad(function()
    for _ = 1, S do
      for _ = 1, batches do r.net:forward(xs):softmax() end
    end
  end)
  r.inf = clock() - t0
  r.inf_gemm = gemm_floor(sizes, 5, true, xs:size(1)) * S * batches
  r.S, r.n = S, batches * xs:size(1)
  return r
end

-- Busy time: run in a child process whose idle OpenMP threads sleep
-- (OMP_WAIT_POLICY=PASSIVE) instead of spinning, where process CPU time over
-- wall time times threads is the share of the threads' time spent working.
if args.busy_child then
  local wall, cpu = { 0, 0, 0 }, { 0, 0, 0 }
  local ph_fns = phases({ 784, 1200, 1200, 10 }, "weight", "ScaleMixture")
  for s = -2, math.tointeger(args.steps) do   -- three untimed steps first
    local v
    for k, f in ipairs(ph_fns) do
      local w0, c0 = clock(), os.clock()
      v = f(v)
      if s > 0 then wall[k], cpu[k] = wall[k] + clock() - w0, cpu[k] + os.clock() - c0 end
    end
  end
  print(("busy %.6f %.6f %.6f %.6f %.6f %.6f"):format(wall[1], cpu[1], wall[2], cpu[2], wall[3], cpu[3]))
  os.exit(0)
end

local TARGET = { ["784-1200-1200-10"] = 1.8, ["784-400-400-10"] = 2.0 }
local function verdict(ratio, target) return ratio <= target and "met" or "MISS" end

print(("bbb %s, %d thread(s), batch %d, 1 MC sample, ScaleMixture prior, Adam, estimator %s")
  :format(bbb.version, threads, B, args.estimator))
local blas_core, blas_env = bench.blas()
print(("OpenBLAS kernels %s (%s); the GEMM floors run on them too"):format(blas_core,
  blas_env and "OPENBLAS_CORETYPE=" .. blas_env or "OpenBLAS's own choice for this CPU"))
print(("%-18s %9s %9s %7s %7s %11s %11s %7s %7s"):format("network", "step ms", "GEMMs ms", "ratio",
  "target", "MC infer s", "infer GEMM", "ratio", "target"))
for _, sizes in ipairs{ { 784, 1200, 1200, 10 }, { 784, 400, 400, 10 } } do
  local name = table.concat(sizes, "-")
  local r = bench_net(sizes)
  local rs, ri = r.step / r.gemm, r.inf / r.inf_gemm
  print(("%-18s %9.2f %9.2f %7.2f %7s %11.2f %11.2f %7.2f %7s"):format(name,
    r.step * 1e3, r.gemm * 1e3, rs, ("<=%.1f %s"):format(TARGET[name], verdict(rs, TARGET[name])),
    r.inf, r.inf_gemm, ri, ("<=1.3 %s"):format(verdict(ri, 1.3))))
  print(("%-18s training %.1f steps/s; inference %d samples x %d images: %.1f sample-passes/s")
    :format("", 1 / r.step, r.S, r.n, r.S / r.inf))
  -- Adam reads g, p, m, v and writes p, m, v: 28 bytes per parameter, two
  -- parameters (mu, rho) per weight, whatever the implementation.
  local w = n_weights(sizes)
  print(("%-18s phases: forward+ELBO %.2f ms, backward %.2f ms, optimizer %.2f ms (%.1f GB/s over its %d MB)")
    :format("", r.fwd * 1e3, r.bwd * 1e3, r.opt * 1e3, 56 * w / r.opt / 1e9, 56 * w // 1000000))
end

-- The LeNet step (bbb.nn.lenet's defaults) against its GEMMs alone: per
-- convolution the im2col GEMMs of each batch tile conv2d makes (weights
-- (O, K) times columns (K, T P), then grad W and, above the first layer,
-- grad columns), and the dense layers' GEMMs. Every estimator against
-- these same GEMMs.
local function lenet_floor(reps)
  local t, cap = 0, bbb.conv_workspace()
  for l, c in ipairs { { 16, 25, 784 }, { 32, 400, 100 } } do
    local O, K, P = c[1], c[2], c[3]
    local T = math.max(1, math.min(B, cap // (P * (2 * K + O) * 4)))
    for n0 = 0, B - 1, T do
      local NP = math.min(T, B - n0) * P
      t = t + bench.sgemm(O, NP, K, false, false, reps) + bench.sgemm(O, K, NP, false, true, reps)
      if l > 1 then t = t + bench.sgemm(K, NP, O, true, false, reps) end
    end
  end
  return t + gemm_floor({ 800, 256, 10 }, reps, false, B) + bench.sgemm(B, 800, 256, false, false, reps)
end
local LENET_TARGET = { weight = 2.0, ["local"] = 2.5 }
for _, est in ipairs { "weight", "local", "flipout" } do
  local r, floor = time_against_floor(stepper({ 784, 10 }, est, "ScaleMixture", function(_, o) return bbb.nn.lenet(o) end),
    function() return lenet_floor(5) end, math.tointeger(args.steps))
  local t = LENET_TARGET[est]
  print(("%-18s %9.2f %9.2f %7.2f %7s   (LeNet 16-32-256, estimator %s)"):format("LeNet " .. est, r.step * 1e3,
    floor * 1e3, r.step / floor, t and ("<=%.1f %s"):format(t, verdict(r.step / floor, t)) or "", est))
end

if not args.no_table then
  local sizes = { 784, 1200, 1200, 10 }
  local steps = math.tointeger(args.steps)
  local gemm = gemm_floor(sizes, 21, false, B)

  -- Thread scaling: the same step on one thread and on all of them, in
  -- alternating rounds, each side keeping its best (as the floors do).
  if threads > 1 then
    local run = stepper(sizes, "weight", "ScaleMixture")
    local one, all, one_gemm
    for _ = 1, ROUNDS do
      bbb.set_num_threads(1)
      local r = run(math.max(1, steps // ROUNDS))
      if not one or r.step < one.step then one = r end
      local f = gemm_floor(sizes, 5, false, B)
      if not one_gemm or f < one_gemm then one_gemm = f end
      bbb.set_num_threads(threads)
      r = run(math.max(1, steps // ROUNDS))
      if not all or r.step < all.step then all = r end
    end
    local speedup = one.step / all.step
    print(("\nthread scaling, 784-1200-1200-10: 1 thread %.2f ms, %d threads %.2f ms: %.2fx "
      .. "(target >= 1.85 on 2 threads: %s); the GEMMs alone %.2fx")
      :format(one.step * 1e3, threads, all.step * 1e3, speedup,
        threads == 2 and verdict(1.85, speedup) or "n/a", one_gemm / gemm))
  end

  -- Contention: a user's machine is never idle. With one busy process
  -- spinning on a core, the step on all threads must not be slower than on
  -- one (threads that spin-wait for a descheduled partner would make it so).
  if threads > 1 then
    local busy = assert(bbb.sys.start(bbb.sys.bbblua_argv("-e", "while true do end")))
    bbb.sys.sleep(0.2)
    local small = { 784, 400, 400, 10 }
    local run = stepper(small, "weight", "ScaleMixture")
    local one, all
    for _ = 1, ROUNDS do
      bbb.set_num_threads(1)
      local r = run(math.max(1, steps // ROUNDS))
      if not one or r.step < one.step then one = r end
      bbb.set_num_threads(threads)
      r = run(math.max(1, steps // ROUNDS))
      if not all or r.step < all.step then all = r end
    end
    local in_use = bbb.threads_in_use()
    busy:stop(9)
    busy:wait()
    print(("with one busy process on a core, 784-400-400-10: 1 thread %.2f ms, %d threads asked (%d in use) %.2f ms: "
      .. "%.2fx (target >= 1.0: %s)"):format(one.step * 1e3, threads, in_use, all.step * 1e3,
      one.step / all.step, one.step / all.step >= 1 and "met" or "MISS"))
  end

  -- Busy time by phase, from a child process with sleeping idle threads.
  if threads > 1 then
    local out_path = os.tmpname()
    bbb.sys.run(bbb.sys.bbblua_argv(arg[0], "--busy-child", "--threads", threads, "--batch", B,
      "--steps", math.tointeger(args.steps)),
      { stdout = out_path, stderr = out_path, env = { OMP_WAIT_POLICY = "PASSIVE" } })
    local f = io.open(out_path)
    local out = f and f:read("a") or ""
    if f then f:close() end
    os.remove(out_path)
    local v = {}
    for num in (out:match("busy ([%d%. ]+)") or ""):gmatch("%S+") do v[#v + 1] = tonumber(num) end
    if #v == 6 then
      local names, parts = { "forward+ELBO", "backward", "optimizer" }, {}
      local tw, tc = 0, 0
      for k = 1, 3 do
        parts[k] = ("%s %.0f%%"):format(names[k], 100 * v[2 * k] / (v[2 * k - 1] * threads))
        tw, tc = tw + v[2 * k - 1], tc + v[2 * k]
      end
      print(("busy share of %d threads' time (idle threads sleeping), 784-1200-1200-10: %s; whole step %.0f%%")
        :format(threads, table.concat(parts, ", "), 100 * tc / (tw * threads)))
    else
      print("busy time: the child run failed: " .. out:sub(1, 200))
    end
  end

  -- What each estimator and each C prior costs, against the weight
  -- estimator's GEMM floor (local and flipout run more GEMMs of their own).
  print("\n784-1200-1200-10 step by estimator and prior (ms, and / the weight estimator's GEMMs, timed beside each cell):")
  local priors = { "ScaleMixture", "Gaussian", "Laplace" }
  local head = ("%-9s"):format("")
  for _, p in ipairs(priors) do head = head .. ("  %-20s"):format(p) end
  print(head)
  for _, est in ipairs{ "weight", "local", "flipout" } do
    local line = ("%-9s"):format(est)
    for _, p in ipairs(priors) do
      local r, g = time_against_floor(stepper(sizes, est, p), function() return gemm_floor(sizes, 5, false, B) end, steps)
      line = line .. ("  %-20s"):format(("%7.2f ms %5.2fx"):format(r.step * 1e3, r.step / g))
    end
    print(line)
  end
end
print(("peak RSS %.0f MiB"):format(peak_rss_mib()))

--- bbb.app.bench: the timing helpers of scripts/bench_bbb.lua. A training
-- step (forward with the ELBO, backward, Adam) is timed against the bare
-- sgemm calls it contains (bbb.bench.sgemm), measured in the same run.
--
--   local bl = require "bbb.app.bench"
--   local run = bl.stepper({ 784, 400, 400, 10 }, { batch = 128, estimator = "weight" })
--   local r, floor = bl.time_against_floor(run, function() return bl.gemm_floor(sizes, 5, { batch = 128 }) end, 30)
local bbb = require "bbb"
local bench = require "bbb.bench"
local sys = require "bbb.app.sys"

local clock = bbb.core.clock
local M = { ROUNDS = 3 }

function M.median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

function M.peak_rss_mib()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmHWM:%s+(%d+)")
    if kb then return tonumber(kb) / 1024 end
  end
end

-- How many times a step runs each GEMM of the plain layer: the weight
-- estimator, a plain and a dropout MLP once (x W^T); local reparameterization
-- twice (x mu^T and x^2 (sigma^2)^T, each with its backward pair); flipout
-- twice (x mu^T and (x * s_in) dW^T, each with its backward pair).
M.GEMM_COPIES = { weight = 1, plain = 1, dropout = 1, ["local"] = 2, flipout = 2 }

--- gemms(sizes, {batch =, forward_only =, estimator =}) -> the sgemm calls
-- of one step as {m, n, k, ta, tb}: per layer and copy, forward x W^T, then
-- backward g^T x (grad W) and g W (grad x, not for the input layer).
function M.gemms(sizes, o)
  local list, B = {}, o.batch
  for l = 1, #sizes - 1 do
    local n_in, n_out = sizes[l], sizes[l + 1]
    for _ = 1, M.GEMM_COPIES[o.estimator or "weight"] do
      list[#list + 1] = { B, n_out, n_in, false, true }
      if not o.forward_only then
        list[#list + 1] = { n_out, n_in, B, true, false }
        if l > 1 then list[#list + 1] = { B, n_in, n_out, false, false } end
      end
    end
  end
  return list
end

--- gemm_floor(sizes, reps, o) -> seconds: the sum of the median times of
-- the GEMMs of gemms(sizes, o), each timed alone reps times.
function M.gemm_floor(sizes, reps, o)
  local total = 0
  for _, g in ipairs(M.gemms(sizes, o)) do total = total + bench.sgemm(g[1], g[2], g[3], g[4], g[5], reps) end
  return total
end

-- The LeNet step (bbb.nn.lenet's defaults) against its GEMMs alone: per
-- convolution the im2col GEMMs of each batch tile conv2d makes (weights
-- (O, K) times columns (K, T P), then grad W and, above the first layer,
-- grad columns), and the dense layers' GEMMs; estimator "local" or
-- "flipout" makes each of them twice (the means' product and the
-- variances' or the perturbation's), as the step does.
local lenet_floor_once
function M.lenet_floor(B, reps, estimator)
  return M.GEMM_COPIES[estimator or "weight"] * lenet_floor_once(B, reps)
end

function lenet_floor_once(B, reps)
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
  return t + M.gemm_floor({ 800, 256, 10 }, reps, { batch = B }) + bench.sgemm(B, 800, 256, false, false, reps)
end

M.PRIORS = {
  ScaleMixture = function() return bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) } end,
  Gaussian = function() return bbb.prior.Gaussian{ sigma = 1 } end,
  Laplace = function() return bbb.prior.Laplace{ b = 1 } end,
}

-- The networks a step can train besides bayes_mlp: a plain MLP and one
-- with dropout 0.5 (the dropout model's default) after each hidden layer.
M.BUILD = {
  plain = function(sizes, o) return bbb.nn.mlp(sizes, { generator = o.generator }) end,
  dropout = function(sizes, o) return bbb.nn.mlp(sizes, { dropout = 0.5, generator = o.generator }) end,
  lenet = function(_, o) return bbb.nn.lenet(o) end,
}

function M.n_weights(sizes)
  local n = 0
  for l = 1, #sizes - 1 do n = n + (sizes[l] + 1) * sizes[l + 1] end
  return n
end

--- bayes_passes(sizes, prior, reps [, outs]) -> draws, sample, adam: seconds
-- (medians of reps, after 20 untimed) of an estimator's passes over the
-- weights and biases of an MLP of sizes, each timed alone without the graph
-- around it: the normal draws, the fused sample with its backward (prior
-- and posterior terms included), and Adam over means and rhos. With the
-- GEMMs they are a floor that no step made of these passes can go under.
-- outs: the sample passes to time, by what each writes (bbb.core.bayes_sample's
-- out): "w" for the weight estimator, "var" (sigma^2) for local
-- reparameterization, "delta" (sigma eps) for flipout (default {"w"});
-- sample is a table of seconds by out.
function M.bayes_passes(sizes, prior, reps, outs)
  local gen = bbb.Generator(1)
  local params, layers = {}, {}
  for l = 1, #sizes - 1 do
    for _, shape in ipairs { { sizes[l + 1], sizes[l] }, { sizes[l + 1] } } do
      local mu = bbb.randn(shape, 0, 0.05, gen):requires_grad(true)
      local rho = bbb.full(shape, -3):requires_grad(true)
      layers[#layers + 1] = { mu = mu, rho = rho, shape = shape }
      params[#params + 1] = { "mu" .. #layers, mu }
      params[#params + 1] = { "rho" .. #layers, rho }
    end
  end
  local opt = bbb.optim.Adam(params, { lr = 1e-3 })
  local function timed(f)
    local t = {}
    for i = 1, reps + 20 do
      local t0 = clock()
      f()
      if i > 20 then t[#t + 1] = clock() - t0 end
    end
    return M.median(t)
  end
  local draws = timed(function() for _, L in ipairs(layers) do bbb.randn(L.shape, 0, 1, gen) end end)
  local eps = {}
  for i, L in ipairs(layers) do eps[i] = bbb.randn(L.shape, 0, 1, gen) end
  local sample = {}
  for _, out in ipairs(outs or { "w" }) do
    sample[out] = timed(function()
      for i, L in ipairs(layers) do
        local _, kl = bbb.core.bayes_sample(L.mu, L.rho, prior, nil, eps[i], out)
        kl:backward()
      end
    end)
  end
  local adam = timed(function() opt:step() end)
  return draws, sample, adam
end

--- phases(sizes, {batch =, estimator =, prior =, model =}) -> the three
-- phases of a training step (forward with the ELBO, backward, optimizer;
-- each takes the previous one's result), net. model: nil (bayes_mlp) or a
-- key of M.BUILD.
function M.phases(sizes, o)
  local gen, B = bbb.Generator(1), o.batch
  local opts = { prior = M.PRIORS[o.prior or "ScaleMixture"](), estimator = o.estimator, generator = gen }
  local net = (o.model and M.BUILD[o.model] or bbb.nn.bayes_mlp)(sizes, opts)
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

--- stepper(sizes, o) -> run: run(n) times n training steps (after five
-- untimed ones) and returns the median times {step =, fwd =, bwd =, opt =, net =}.
function M.stepper(sizes, o)
  local ph_fns, net = M.phases(sizes, o)
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
    return { step = M.median(ph.all), fwd = M.median(ph.fwd), bwd = M.median(ph.bwd), opt = M.median(ph.opt), net = net }
  end
end

--- time_against_floor(run, floor, steps) -> r, floor seconds.
-- On a shared machine a block of timings can land on a busy moment, and
-- this one also switches between a faster-GEMM and a slower-GEMM state that
-- last seconds: the step and its GEMM floor alternate over a few rounds,
-- each round's ratio pairs a step with the floor measured right after it
-- (so both come from the same state), and the round with the median ratio
-- is reported, its step and floor with it. (Each side's best round, taken
-- apart, could pair a floor from one state with steps from the other.)
function M.time_against_floor(run, floor, steps)
  local rounds = {}
  for i = 1, M.ROUNDS do
    local r = run(math.max(1, steps // M.ROUNDS))
    rounds[i] = { r = r, floor = floor() }
  end
  table.sort(rounds, function(a, b) return a.r.step / a.floor < b.r.step / b.floor end)
  local mid = rounds[(M.ROUNDS + 1) // 2]
  return mid.r, mid.floor
end

--- one_vs_all(run, threads, steps [, floor]) -> one, all, one_floor: the
-- step on one thread and on threads, in alternating rounds, each side
-- keeping its best (and floor() on one thread, its best, when given).
function M.one_vs_all(run, threads, steps, floor)
  local one, all, one_floor
  for _ = 1, M.ROUNDS do
    bbb.set_num_threads(1)
    local r = run(math.max(1, steps // M.ROUNDS))
    if not one or r.step < one.step then one = r end
    local f = floor and floor()
    if f and (not one_floor or f < one_floor) then one_floor = f end
    bbb.set_num_threads(threads)
    r = run(math.max(1, steps // M.ROUNDS))
    if not all or r.step < all.step then all = r end
  end
  return one, all, one_floor
end

--- infer(net, sizes, n_img, S) -> seconds, GEMM floor seconds, images: S
-- weight samples over n_img images, in batches of 1000.
function M.infer(net, sizes, n_img, S)
  local xs = bbb.rand({ math.min(n_img, 1000), sizes[1] }, 0, 2, bbb.Generator(2))
  local batches = math.ceil(n_img / 1000)
  net:evaluate()
  local t0 = clock()
  bbb.no_grad(function()
    for _ = 1, S do
      for _ = 1, batches do net:forward(xs):softmax() end
    end
  end)
  local t = clock() - t0
  return t, M.gemm_floor(sizes, 5, { forward_only = true, batch = xs:size(1) }) * S * batches, batches * xs:size(1)
end

-- Busy and total jiffies of all cores (/proc/stat), or nil.
local function cpu_jiffies()
  local f = io.open("/proc/stat")
  local line = f and f:read("l")
  if f then f:close() end
  local v = {}
  for n in (line or ""):gmatch("%d+") do v[#v + 1] = tonumber(n) end
  if #v < 5 then return nil end
  local total = 0
  for i = 1, math.min(#v, 8) do total = total + v[i] end
  return total - v[4] - v[5], total
end

--- others_probe() -> done: done() is the share of the cores (0..1) that
-- other processes used since the probe (busy time less this process's own
-- CPU time, jiffies of 1/100 s), or nil when /proc/stat is unreadable. A
-- quiet run shows a few percent at most: more means the timings beside it
-- shared the cores.
function M.others_probe()
  local b0, t0 = cpu_jiffies()
  local c0 = os.clock()
  return function()
    local b1, t1 = cpu_jiffies()
    if not (b0 and b1 and t1 > t0) then return nil end
    local others = (b1 - b0) / 100 - (os.clock() - c0)
    return math.max(0, others / ((t1 - t0) / 100))
  end
end

--- busy_child(sizes, o, steps): prints "busy" and the wall and CPU seconds
-- of each phase over steps steps (after three untimed ones).
function M.busy_child(sizes, o, steps)
  local wall, cpu = { 0, 0, 0 }, { 0, 0, 0 }
  local ph_fns = M.phases(sizes, o)
  for s = -2, steps do
    local v
    for k, f in ipairs(ph_fns) do
      local w0, c0 = clock(), os.clock()
      v = f(v)
      if s > 0 then wall[k], cpu[k] = wall[k] + clock() - w0, cpu[k] + os.clock() - c0 end
    end
  end
  print(("busy %.6f %.6f %.6f %.6f %.6f %.6f"):format(wall[1], cpu[1], wall[2], cpu[2], wall[3], cpu[3]))
end

--- busy_share(argv, threads) -> the line of busy shares, or nil and the
-- child's output: runs argv (a busy_child) with sleeping idle threads
-- (OMP_WAIT_POLICY=PASSIVE), where process CPU time over wall time times
-- threads is the share of the threads' time spent working.
function M.busy_share(argv, threads)
  local out_path = os.tmpname()
  sys.run(argv, { stdout = out_path, stderr = out_path, env = { OMP_WAIT_POLICY = "PASSIVE" } })
  local f = io.open(out_path)
  local out = f and f:read("a") or ""
  if f then f:close() end
  os.remove(out_path)
  local v = {}
  for num in (out:match("busy ([%d%. ]+)") or ""):gmatch("%S+") do v[#v + 1] = tonumber(num) end
  if #v ~= 6 then return nil, out:sub(1, 200) end
  local names, parts, tw, tc = { "forward+ELBO", "backward", "optimizer" }, {}, 0, 0
  for k = 1, 3 do
    parts[k] = ("%s %.0f%%"):format(names[k], 100 * v[2 * k] / (v[2 * k - 1] * threads))
    tw, tc = tw + v[2 * k - 1], tc + v[2 * k]
  end
  return ("%s; whole step %.0f%%"):format(table.concat(parts, ", "), 100 * tc / (tw * threads))
end

--- torch(script, threads, batch, steps) -> {version =, python =, [net] =
-- {bayes =, plain =, gemms =} in seconds} or nil and why: runs
-- scripts/bench_torch.py (no shell) with the first of python3 (from PATH)
-- and /usr/bin/python3 (Debian's, where python3-torch installs) that can
-- import torch.
function M.torch(script, threads, batch, steps)
  local devnull = { stdin = "/dev/null", stdout = "/dev/null", stderr = "/dev/null" }
  local python
  for _, p in ipairs { "python3", "/usr/bin/python3" } do
    if not python and sys.run({ p, "-c", "import torch" }, devnull) then python = p end
  end
  if not python then return nil, "no python3 (PATH, /usr/bin) can import torch" end
  local out = sys.output({ python, script, "--threads", tostring(threads), "--batch", tostring(batch),
    "--steps", tostring(steps) })
  if not out then return nil, python .. " " .. script .. " failed" end
  local r = { version = out:match("torch_version (%S+)"), python = python }
  for what, net, ms in out:gmatch("(%w+)_ms (%S+) ([%d.]+)") do
    r[net] = r[net] or {}
    r[net][what] = tonumber(ms) / 1e3
  end
  return r
end

--- print_torch(t, ours, threads, B, nets [, floors]): the table of M.torch's
-- figures against bbb's steps `ours` (seconds by net name, and ours.lenet);
-- floors (seconds by net name): the floor of bbb's step, for the ratio
-- that floor would give.
function M.print_torch(t, ours, threads, B, nets, floors)
  print(("\nPyTorch %s (%s), %d thread(s), batch %d, float32; bbb's step from the table above:")
    :format(t.version or "?", t.python, threads, B))
  print(("%-18s %10s %10s %10s %12s %14s %12s"):format("network", "bbb ms", "torch BBB", "torch MLP", "torch GEMMs",
    "torch BBB/bbb", "MLP/GEMMs"))
  for _, sizes in ipairs(nets) do
    local name = table.concat(sizes, "-")
    local r = t[name]
    if r and r.bayes and r.plain and r.gemms then
      local x = r.bayes / ours[name]
      print(("%-18s %10.2f %10.2f %10.2f %12.2f %7.1fx %-6s %11.1fx"):format(name, ours[name] * 1e3, r.bayes * 1e3,
        r.plain * 1e3, r.gemms * 1e3, x, x >= 10 and "met" or "MISS", r.plain / r.gemms))
    else
      print(("%-18s PyTorch printed no figures for this net"):format(name))
    end
  end
  local r = t.lenet
  if r and r.bayes and r.plain and ours.lenet then
    local x = r.bayes / ours.lenet
    print(("%-18s %10.2f %10.2f %10.2f %12s %7.1fx %-6s %12s"):format("LeNet weight", ours.lenet * 1e3,
      r.bayes * 1e3, r.plain * 1e3, "-", x, x >= 5 and "met" or "MISS", "(target >= 5x)"))
  end
  print("(torch BBB/bbb: how many times faster bbb's Bayesian step is, target >= 10x; MLP/GEMMs: PyTorch's plain "
    .. "step over its own GEMMs)")
  for _, sizes in ipairs(floors and nets or {}) do
    local name = table.concat(sizes, "-")
    local r = t[name]
    if r and r.bayes and floors[name] then
      print(("%s: 10x needs a step of at most %.2f ms; the GEMMs with the step's own passes alone take %.2f ms (%.1fx)")
        :format(name, r.bayes / 10 * 1e3, floors[name] * 1e3, r.bayes / floors[name]))
    end
  end
end

return M

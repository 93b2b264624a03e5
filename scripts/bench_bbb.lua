--- Speed of a Bayes-by-Backprop training step against the GEMMs it contains,
-- measured in the same run: 784-1200-1200-10 and 784-400-400-10 (with a
-- plain and an MC-dropout MLP step, and the local and flipout estimators
-- against their own GEMMs), MC inference, thread scaling, the cost of each
-- estimator and C prior, and PyTorch's step when python3 has torch.
-- bbblua scripts/bench_bbb.lua --help
local bbb = require "bbb"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local cli = require "bbb.app.cli"
local bench = require "bbb.bench"
local bl = require "bbb.app.bench"

local parser = recipe.parser("bench_bbb.lua", "Time full training steps (forward, ELBO, backward, "
  .. "Adam) of Bayesian, plain and MC-dropout MLPs against the bare sgemm calls the step contains, "
  .. "MC inference over 10,000 images, the step on one thread against all, one table of the step's "
  .. "cost with each estimator and each C prior, and PyTorch's steps (scripts/bench_torch.py) when "
  .. "python3 can import torch. Ratios are against floors measured in the same run.", {})
recipe.declare(parser, { "threads" })
recipe.declare(parser, { "batch" })
flags.option(parser, "--steps", "Timed training steps per network.", "30"):convert(cli.positive_integer())
flags.option(parser, "--infer-samples", "MC samples for the inference timing.", "100"):convert(cli.positive_integer())
flags.option(parser, "--infer-images", "Images for the inference timing.", "10000"):convert(cli.positive_integer())
recipe.declare(parser, { "estimator" })
flags.flag(parser, "--no-table", "Skip the estimator x prior table, the thread scaling and the busy time.")
flags.flag(parser, "--no-torch", "Skip the comparison with PyTorch (scripts/bench_torch.py).")
flags.flag(parser, "--busy-child", "(internal) time steps for the busy-time measurement and print them."):hidden(true)
recipe.declare(parser, { "json" })
local args = cli.parse(parser)
local out = { networks = {}, lenet = {}, environment = bbb.core.environment() }   -- the figures --json writes
local threads, B, steps = math.tointeger(args.threads), math.tointeger(args.batch), math.tointeger(args.steps)
bbb.set_num_threads(threads)

if args.busy_child then
  bl.busy_child({ 784, 1200, 1200, 10 }, { batch = B, estimator = "weight" }, steps)
  os.exit(0)
end

local BIG, SMALL = { 784, 1200, 1200, 10 }, { 784, 400, 400, 10 }
local TARGET = { ["784-1200-1200-10"] = 1.6, ["784-400-400-10"] = 1.8 }
local function verdict(ratio, target) return ratio <= target and "met" or "MISS" end
local function target(ratio, t) return ("<=%.1f %s"):format(t, verdict(ratio, t)) end
local ROW = "%-20s %9.2f %9.2f %7.2f %9s"

-- A step of model (nil: bayes_mlp) with estimator against the GEMMs that
-- estimator performs, timed beside it.
local function against_floor(sizes, estimator, model, prior)
  local o = { batch = B, estimator = estimator, model = model, prior = prior }
  local r, floor = bl.time_against_floor(bl.stepper(sizes, o),
    function() return bl.gemm_floor(sizes, 11, { batch = B, estimator = model or estimator }) end, steps)
  r.gemm = floor
  return r
end

print(("bbb %s, %d thread(s), batch %d, 1 MC sample, ScaleMixture prior, Adam, estimator %s")
  :format(bbb.version, threads, B, args.estimator))
local blas_core, blas_env = bench.blas()
print(("OpenBLAS kernels %s (%s); the GEMM floors run on them too"):format(blas_core,
  blas_env and "OPENBLAS_CORETYPE=" .. blas_env or "OpenBLAS's own choice for this CPU"))
print(("%-20s %9s %9s %7s %9s %11s %11s %7s %7s"):format("network", "step ms", "GEMMs ms", "ratio",
  "target", "MC infer s", "infer GEMM", "ratio", "target"))
local ours, floors, others = {}, {}, bl.others_probe()
local OUT = { weight = "w", ["local"] = "var", flipout = "delta" }   -- what each estimator's sample pass writes
for _, sizes in ipairs{ BIG, SMALL } do
  local name = table.concat(sizes, "-")
  local r = against_floor(sizes, args.estimator)
  ours[name] = r.step
  local inf, inf_gemm, n = bl.infer(r.net, sizes, math.tointeger(args.infer_images), math.tointeger(args.infer_samples))
  local rs, ri = r.step / r.gemm, inf / inf_gemm
  local rec = { step_ms = r.step * 1e3, gemm_ms = r.gemm * 1e3, infer_s = inf, infer_gemm_s = inf_gemm, estimators = {} }
  out.networks[name] = rec
  print((ROW .. " %11.2f %11.2f %7.2f %7s"):format(name, r.step * 1e3, r.gemm * 1e3, rs, target(rs, TARGET[name]),
    inf, inf_gemm, ri, ("<=1.3 %s"):format(verdict(ri, 1.3))))
  print(("%-20s training %.1f steps/s; inference %d samples x %d images: %.1f sample-passes/s")
    :format("", 1 / r.step, args.infer_samples, n, args.infer_samples / inf))
  -- Adam reads g, p, m, v and writes p, m, v: 28 bytes per parameter, two
  -- parameters (mu, rho) per weight, whatever the implementation.
  local w = bl.n_weights(sizes)
  print(("%-20s phases: forward+ELBO %.2f ms, backward %.2f ms, optimizer %.2f ms (%.1f GB/s over its %d MB)")
    :format("", r.fwd * 1e3, r.bwd * 1e3, r.opt * 1e3, 56 * w / r.opt / 1e9, 56 * w // 1000000))
  -- The estimator's own passes over the weights, each timed alone: with the
  -- GEMMs, the floor of any step made of these passes.
  local outs = sizes == BIG and { OUT.weight, OUT["local"], OUT.flipout } or { OUT[args.estimator] }
  local d, smp, a = bl.bayes_passes(sizes, bl.PRIORS.ScaleMixture(), steps, outs)
  local s = smp[OUT[args.estimator]]
  floors[name] = r.gemm + d + s + a
  rec.passes = { draws_ms = d * 1e3, sample_ms = s * 1e3, adam_ms = a * 1e3, floor_ms = floors[name] * 1e3 }
  print(("%-20s own passes alone: normal draws %.2f ms, sample + its backward %.2f ms, Adam %.2f ms; with the "
    .. "GEMMs %.2f ms = %.2fx (no step made of these passes goes under it)")
    :format("", d * 1e3, s * 1e3, a * 1e3, floors[name] * 1e3, floors[name] / r.gemm))
  -- The other estimators against the GEMMs they perform (twice the weight
  -- estimator's: local x mu^T and x^2 (sigma^2)^T, flipout x mu^T and
  -- (x s) dW^T, each with its backward pair).
  for _, est in ipairs(sizes == BIG and { "local", "flipout" } or {}) do
    local e = est ~= args.estimator and against_floor(sizes, est)
    if e then
      rec.estimators[est] = { step_ms = e.step * 1e3, gemm_ms = e.gemm * 1e3,
        floor_ms = (e.gemm + d + smp[OUT[est]] + a) * 1e3 }
      print((ROW .. "   (own GEMMs: twice the weight estimator's; with its own passes alone %.2fx)")
        :format("  " .. est .. " estimator", e.step * 1e3, e.gemm * 1e3, e.step / e.gemm,
        target(e.step / e.gemm, 1.3), (e.gemm + d + smp[OUT[est]] + a) / e.gemm))
    end
  end
  for _, m in ipairs { { "plain", "  plain MLP", "" }, { "dropout", "  MC-dropout MLP", "   (dropout 0.5)" } } do
    local p = against_floor(sizes, nil, m[1])
    rec[m[1]] = { step_ms = p.step * 1e3, gemm_ms = p.gemm * 1e3 }
    print((ROW .. "%s"):format(m[2], p.step * 1e3, p.gemm * 1e3, p.step / p.gemm, target(p.step / p.gemm, 1.2), m[3]))
  end
end

-- Every LeNet estimator against the GEMMs its step makes (bbb.nn.lenet's
-- defaults): local and flipout make each of the weight estimator's GEMMs
-- twice; their ratio against the weight estimator's GEMMs is printed too.
local LENET_TARGET = { weight = 2.0, ["local"] = 2.5 }
for _, est in ipairs { "weight", "local", "flipout" } do
  local r, floor = bl.time_against_floor(bl.stepper({ 784, 10 }, { batch = B, estimator = est, model = "lenet" }),
    function() return bl.lenet_floor(B, 5, est) end, steps)
  local t = LENET_TARGET[est]
  local copies = bl.GEMM_COPIES[est]
  if est == "weight" then ours.lenet = r.step end
  out.lenet[est] = { step_ms = r.step * 1e3, gemm_ms = floor * 1e3 }
  print((ROW .. "   (LeNet 16-32-256, estimator %s%s)"):format("LeNet " .. est, r.step * 1e3, floor * 1e3,
    r.step / floor, t and target(r.step / floor, t) or "", est, copies > 1
      and ("; its GEMMs are twice the weight estimator's, against which it is %.2fx"):format(r.step * copies / floor)
      or ""))
end

local shared = others()
print(shared and ("other processes used %.0f%% of the cores during the rows above (a quiet run: a few %%)"):format(100 * shared)
  or "other processes' CPU use: /proc/stat unreadable")
if not args.no_table then
  local weight = { batch = B, estimator = "weight" }
  local gemm = bl.gemm_floor(BIG, 21, weight)
  if threads > 1 then
    -- Thread scaling: the same step on one thread and on all of them.
    local one, all, one_gemm = bl.one_vs_all(bl.stepper(BIG, weight), threads, steps,
      function() return bl.gemm_floor(BIG, 5, weight) end)
    local speedup = one.step / all.step
    print(("\nthread scaling, 784-1200-1200-10: 1 thread %.2f ms, %d threads %.2f ms: %.2fx "
      .. "(target >= 1.85 on 2 threads: %s); the GEMMs alone %.2fx")
      :format(one.step * 1e3, threads, all.step * 1e3, speedup,
        threads == 2 and verdict(1.85, speedup) or "n/a", one_gemm / gemm))

    -- Contention: a user's machine is never idle. With one busy process
    -- spinning on a core, the step on all threads must not be slower than on
    -- one (threads that spin-wait for a descheduled partner would make it so).
    local busy = assert(require("bbb.app.sys").start(require("bbb.app.sys").bbblua_argv("-e", "while true do end")))
    require("bbb.app.sys").sleep(0.2)
    one, all = bl.one_vs_all(bl.stepper(SMALL, weight), threads, steps)
    local in_use = bbb.threads_in_use()
    busy:stop(9)
    busy:wait()
    print(("with one busy process on a core, 784-400-400-10: 1 thread %.2f ms, %d threads asked (%d in use) %.2f ms: "
      .. "%.2fx (target >= 1.0: %s)"):format(one.step * 1e3, threads, in_use, all.step * 1e3,
      one.step / all.step, one.step / all.step >= 1 and "met" or "MISS"))

    -- Busy time by phase, from a child process with sleeping idle threads.
    local share, err = bl.busy_share(require("bbb.app.sys").bbblua_argv(arg[0], "--busy-child", "--threads", threads,
      "--batch", B, "--steps", steps), threads)
    print(share and ("busy share of %d threads' time (idle threads sleeping), 784-1200-1200-10: %s"):format(threads, share)
      or "busy time: the child run failed: " .. err)
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
      local r, g = bl.time_against_floor(bl.stepper(BIG, { batch = B, estimator = est, prior = p }),
        function() return bl.gemm_floor(BIG, 5, weight) end, steps)
      line = line .. ("  %-20s"):format(("%7.2f ms %5.2fx"):format(r.step * 1e3, r.step / g))
    end
    print(line)
  end
end

-- PyTorch's steps on the same nets (an optional reference: see bench_torch.py).
if args.no_torch then
  print("\nPyTorch comparison skipped (--no-torch)")
else
  local t, why = bl.torch((arg[0]:match("^(.*)/") or ".") .. "/bench_torch.py", threads, B, steps)
  if not t then
    print("\nPyTorch comparison skipped: " .. why)
  else
    bl.print_torch(t, ours, threads, B, { BIG, SMALL }, floors)
  end
end
print(("peak RSS %.0f MiB"):format(bl.peak_rss_mib()))
if args.json then cli.write_file(args.json, require("bbb.json").encode(out) .. "\n") end

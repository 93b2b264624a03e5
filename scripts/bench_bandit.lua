--- Speed of the Mushroom bandit's network updates (119-100-100-1 at batch
-- 64, one thread, as each bandit worker runs) against the GEMMs they
-- contain, measured in the same run, and the wall time this projects for
-- the paper's protocol (every agent, 5 seeds, 50,000 steps x 64 updates).
-- bbblua scripts/bench_bandit.lua --help
local bbb = require "bbb"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local cli = require "bbb.app.cli"
local bandit = require "bbb.bandit"
local bl = require "bbb.app.bench"
local bench = require "bbb.bench"
local fused = require "bbb.nn.fused"

local parser = recipe.parser("bench_bandit.lua", "Time the bandit agents' minibatch updates "
  .. "(forward, Gaussian ELBO, backward, Adam) for the Bayesian and the plain 119-100-100-1 "
  .. "network against the bare sgemm calls of an update, time whole bandit steps, and project "
  .. "the paper protocol's wall time on this machine. The machine may be shared: the numbers "
  .. "are medians, but still noisy.", { defaults = { threads = "1" } })
recipe.declare(parser, { "threads" })
flags.option(parser, "--updates", "Timed updates per network and way.", "2000"):convert(cli.positive_integer())
flags.option(parser, "--steps", "Timed bandit steps (64 updates each) per agent.", "20")
  :convert(cli.positive_integer())
flags.option(parser, "--cores", "Cores to project the paper protocol on (default: this machine's).")
  :convert(cli.positive_integer())
flags.option(parser, "--late", "Steps each agent plays before its steps are timed again, late in training (sparser "
  .. "activations; the projection's step times).", "2000"):convert(cli.nonnegative_integer())
recipe.declare(parser, { "json" })
local args = cli.parse(parser)
local out = { updates = {}, environment = bbb.core.environment() }   -- the figures --json writes
bbb.set_num_threads(args.threads)
local clock = bbb.core.clock
local B, SIZES = 64, { 119, 100, 100, 1 }

local median = bl.median
local function gemm_floor(reps) return bl.gemm_floor(SIZES, reps, { batch = B }) end

-- Median time of one update by phase, in seconds: through the graph
-- (elbo:loss, backward) or the fused step the agents run (bbb.nn.fused).
local function time_updates(kind, how)
  local gen = bbb.Generator(1)
  local net = kind == "bayes"
    and bbb.nn.bayes_mlp(SIZES, { prior = bbb.prior.Gaussian{ sigma = 0.1 }, generator = gen, rho_init = -3 })
    or bbb.nn.mlp(SIZES, { generator = gen })
  local opt = bbb.optim.Adam(net, { lr = 1e-3 })
  local elbo = bbb.elbo.ELBO{ n_data = 4096, batch_size = B, likelihood = "gaussian", sigma = 1,
    kl_weight = B / 4096 }
  local plan = how == "fused" and assert(fused.plan(net, elbo))
  local x = bbb.rand({ B, SIZES[1] }, 0, 1, gen):gt(0.8)   -- one-hot-like, as the bandit's
  local y = bbb.randn({ B, 1 }, 0, 5, gen)
  local ph = { fwd = {}, bwd = {}, opt = {}, all = {} }
  for i = 1, args.updates + 50 do
    local t0 = clock()
    if plan then elbo:fused_step(plan, x, y) else opt:zero_grad() end
    local loss = not plan and elbo:loss(net, x, y)
    local t1 = clock()
    if loss then loss:backward() end
    local t2 = clock()
    opt:step()
    local t3 = clock()
    if i > 50 then
      ph.fwd[#ph.fwd + 1], ph.bwd[#ph.bwd + 1], ph.opt[#ph.opt + 1] = t1 - t0, t2 - t1, t3 - t2
      ph.all[#ph.all + 1] = t3 - t0
    end
  end
  return { all = median(ph.all), fwd = median(ph.fwd), bwd = median(ph.bwd), opt = median(ph.opt) }
end

-- Median times of whole bandit steps (decide, act, store, 64 updates): early
-- (after 5 steps) and late (after --late more), the share of the late
-- steps' time their products took (bbb.core.gemm_clock, in place).
local function time_steps(make)
  local env = bandit.Mushroom{ seed = 1 }
  local agent = make()
  local function timed()
    local times, all = {}, 0
    bbb.core.gemm_clock(true)
    for _ = 1, args.steps do
      local t0 = clock()
      bandit.run(env, agent, 1)
      times[#times + 1] = clock() - t0
      all = all + times[#times]
    end
    return median(times), bbb.core.gemm_clock(false) / all
  end
  bandit.run(env, agent, 5)   -- warm up
  local early = timed()
  bandit.run(env, agent, args.late)
  local late, share = timed()
  return early, late, share
end

local cores = args.cores or require("bbb.app.sys").nproc()

print(("bbb %s, %d thread(s), OpenBLAS kernels %s, network %s at batch %d, Adam, Gaussian likelihood; medians of %d updates")
  :format(bbb.version, args.threads, bbb.core.environment().core, table.concat(SIZES, "-"), B, args.updates))
local gemm = gemm_floor(201)
-- how near the GEMMs run to the core's ceiling: its 8-wide fma rate, timed here
local flop, peak = 0, bench.fma_peak(21)
for _, g in ipairs(bl.gemms(SIZES, { batch = B })) do flop = flop + 2 * g[1] * g[2] * g[3] end
print(("an update's GEMMs: %.2f Mflop in %.3f ms, %.0f Gflop/s%s"):format(flop / 1e6, gemm * 1e3,
  flop / gemm / 1e9, peak and (", %.0f%% of this core's fma peak (%.0f Gflop/s)"):format(
  100 * flop / gemm / peak, peak / 1e9) or ""))
print(("%-13s %10s %10s %8s %10s %9s %9s %9s"):format("network", "update ms", "GEMMs ms", "ratio",
  "updates/s", "fwd ms", "bwd ms", "opt ms"))
print("(fused: the graph-free step the bandit's agents run; graph: elbo:loss and backward, the same numbers;"
  .. " the fused step's fwd column holds its whole gradient)")
for _, kind in ipairs { "bayes", "plain" } do
  for _, how in ipairs { "fused", "graph" } do
    local r = time_updates(kind, how)
    out.updates[kind .. "_" .. how] = { ms = r.all * 1e3, fwd_ms = r.fwd * 1e3, bwd_ms = r.bwd * 1e3, opt_ms = r.opt * 1e3 }
    print(("%-13s %10.3f %10.3f %8.1f %10.0f %9.3f %9.3f %9.3f"):format(kind .. " " .. how, r.all * 1e3,
      gemm * 1e3, r.all / gemm, 1 / r.all, r.fwd * 1e3, r.bwd * 1e3, r.opt * 1e3))
  end
end

-- The Bayesian update's passes over its weights, each timed alone without
-- the graph around them: with the GEMMs, a floor that no update made of
-- these passes can go under.
local bayes_floor
do
  local draws, samples, adam = bl.bayes_passes(SIZES, bbb.prior.Gaussian{ sigma = 0.1 }, math.max(200, args.updates // 4))
  local sample = samples.w
  local floor = gemm + draws + sample + adam
  bayes_floor = floor   -- the protocol's floor below
  out.gemm_ms, out.bayes_passes = gemm * 1e3, { draws_ms = draws * 1e3, sample_ms = sample * 1e3,
    adam_ms = adam * 1e3, floor_ms = floor * 1e3 }
  print(("bayes update's own passes, timed alone: normal draws %.3f ms, fused sample + its backward %.3f ms "
    .. "(given the draws), Adam %.3f ms; with the GEMMs %.3f ms = %.1fx the GEMMs, a floor for any update "
    .. "made of them (target 2.0x)"):format(draws * 1e3, sample * 1e3, adam * 1e3, floor * 1e3, floor / gemm))
end

-- Whole steps of every agent `bandit.lua --paper` runs, and the protocol's
-- wall time: 50,000 steps x 5 seeds of each, one worker process per run,
-- `cores` at a time, the longest job first, then each next job on the first
-- core to come free. The GEMM-only line is the same schedule with every
-- network agent's update cut to its bare sgemm calls: no implementation on
-- these GEMMs can beat it.
local MAKE = {
  { name = "bbb", net = true, make = function() return bandit.BBB{ seed = 2 } end },
  { name = "eps5", net = true, make = function() return bandit.EpsilonGreedy{ epsilon = 0.05, seed = 2 } end },
  { name = "eps1", net = true, same = "eps5" }, { name = "eps0", net = true, same = "eps5" },
  { name = "linear", make = function() return bandit.LinearTS{ seed = 2 } end },
  { name = "uniform", make = function() return bandit.Uniform{ seed = 2 } end },
  { name = "dropout", net = true, make = function() return bandit.MCDropout{ seed = 2 } end },
  { name = "neurallinear", net = true, make = function() return bandit.NeuralLinear{ seed = 2 } end },
}
local step, early, share, line, late_line, share_line = {}, {}, {}, {}, {}, {}
for _, m in ipairs(MAKE) do
  local n = m.name
  if m.same then early[n], step[n], share[n] = early[m.same], step[m.same], share[m.same]
  else early[n], step[n], share[n] = time_steps(m.make) end
  line[#line + 1] = ("%s %.1f"):format(n, early[n] * 1e3)
  late_line[#late_line + 1] = ("%s %.1f"):format(n, step[n] * 1e3)
  share_line[#share_line + 1] = ("%s %.0f%%"):format(n, 100 * share[n])
end
print(("bandit step (decide + 64 updates) ms: %s"):format(table.concat(line, ", ")))
print(("the same after %d more steps (the projection's): %s"):format(args.late, table.concat(late_line, ", ")))
print(("of which the products (matrix products, timed in place): %s"):format(table.concat(share_line, ", ")))
-- an update as the agents run it: a late step (its decision and minibatch
-- draws included) over its 64 updates, against the bare GEMMs above
print(("an update late in training (a step / 64): bbb %.3f ms = %.1fx its GEMMs, greedy %.3f ms = %.1fx (target "
  .. "for bbb: 2.0x)"):format(step.bbb / 64 * 1e3, step.bbb / 64 / gemm, step.eps0 / 64 * 1e3, step.eps0 / 64 / gemm))

local SEEDS, STEPS = 5, 50000
local function schedule(cost)
  local jobs = {}
  for _, m in ipairs(MAKE) do
    for _ = 1, SEEDS do jobs[#jobs + 1] = STEPS * cost(m) end
  end
  table.sort(jobs, function(a, b) return a > b end)
  local free = {}
  for c = 1, math.min(cores, #jobs) do free[c] = 0 end
  for _, j in ipairs(jobs) do
    table.sort(free)
    free[1] = free[1] + j
  end
  table.sort(free)
  return free[#free]
end
local wall = schedule(function(m) return step[m.name] end)
local floor = schedule(function(m) return m.net and 64 * gemm or 0 end)
local at_peak = peak and schedule(function(m) return m.net and 64 * flop / peak or 0 end)
local passes = schedule(function(m) return m.net and 64 * (m.name == "bbb" and bayes_floor or gemm) or 0 end)
-- the late steps less their products: what no kernel for these products can
-- take away
local rest = schedule(function(m) return step[m.name] * (1 - share[m.name]) end)
print(("paper protocol (%d agents x %d seeds x 50,000 steps of 64 updates) on %d core(s): projected %.0f min "
  .. "(target: at most 60 min); its network agents' GEMMs alone: %.0f min; with BBB's own passes "
  .. "(the floor above): %.0f min%s"):format(#MAKE, SEEDS, cores, wall / 60, floor / 60, passes / 60,
  at_peak and ("; the GEMMs at the fma peak: %.0f min"):format(at_peak / 60) or ""))
print(("the same steps with every product free (the rest of each step as timed): %.0f min"):format(rest / 60))
print("the machine may be shared with other work: these timings are noisy")
if args.json then
  out.step_ms, out.late_step_ms, out.product_share = {}, {}, {}
  for _, m in ipairs(MAKE) do
    out.step_ms[m.name], out.late_step_ms[m.name] = early[m.name] * 1e3, step[m.name] * 1e3
    out.product_share[m.name] = share[m.name]
  end
  out.protocol_min = { cores = cores, projected = wall / 60, gemms_alone = floor / 60, with_bbb_passes = passes / 60,
    products_free = rest / 60, gemms_at_peak = at_peak and at_peak / 60 or nil }
  cli.write_file(args.json, require("bbb.json").encode(out) .. "\n")
end

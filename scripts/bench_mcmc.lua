--- bench_mcmc: the cost of one gradient of HMC's log joint, and of one
-- NUTS leapfrog step around it, against the GEMMs of that gradient (the
-- net's forward and backward over every row) timed in the same run. The
-- ratio is the overhead of the tape and of the sampler's Lua arithmetic.
--   build/bbblua scripts/bench_mcmc.lua [--rows N] [--features D] [--hidden H]
local bbb = require "bbb"
local flags = require "bbb.app.flags"
local cli = require "bbb.app.cli"
local recipe = require "bbb.app.recipe"
local bl = require "bbb.app.bench"
local target = require "bbb.mcmc.target"
local kernel = require "bbb.mcmc.kernel"

local parser = recipe.parser("bench_mcmc", "Times HMC's gradient and NUTS's leapfrog step against their GEMMs.", {})
flags.option(parser, "--rows", "Rows of the full batch.", "193"):convert(cli.positive_integer { max = 1 << 20 })
flags.option(parser, "--features", "Inputs of the net.", "100"):convert(cli.positive_integer { max = 1 << 14 })
flags.option(parser, "--hidden", "Units of its one hidden layer.", "10"):convert(cli.positive_integer { max = 1 << 12 })
flags.option(parser, "--trees", "NUTS iterations timed (depth 6 each).", "8"):convert(cli.positive_integer { max = 1000 })
local args = cli.parse(parser)

bbb.set_num_threads(1)
local gen, N, D, H = bbb.Generator(1), args.rows, args.features, args.hidden
local net = bbb.nn.mlp({ D, H, 1 }, { generator = gen })
local t = target.net { net = net, x = bbb.randn({ N, D }, 0, 1, gen), y = bbb.randn({ N, 1 }, 0, 1, gen),
  likelihood = "gaussian", noise_sigma = "infer", noise_scale = 1, prior = bbb.prior.Gaussian { sigma = 1 } }
local q, ones = target.get(net), {}
q[#q + 1] = 0
for i = 1, #q do ones[i] = 1 end
q = bbb.core.vec(q)
local function gradient(n) for _ = 1, n do t.eval(q) end return { step = 0 } end
local function nuts(n)
  local st, steps, uniform = { q = q }, 0, function() return bbb.rand({ 1 }, 0, 1, gen):item() end
  st.lp, st.grad = t.eval(q)
  local t0 = bbb.core.clock()
  for _ = 1, n do steps = steps + select(4, kernel.nuts_transition(t, st, 1e-4, 6, kernel.diagonal(ones), gen, uniform)) end
  return { step = (bbb.core.clock() - t0) / steps }
end
local function timed(n) local t0 = bbb.core.clock(); gradient(n); return { step = (bbb.core.clock() - t0) / n } end
local floor = function() return bl.gemm_floor({ D, H, 1 }, 20, { batch = N }) end
local g, gf = bl.time_against_floor(timed, floor, 300)
local s, sf = bl.time_against_floor(nuts, floor, args.trees)
print(("net %d-%d-1 over %d rows, %d numbers in the position"):format(D, H, N, #q))
print(("  gradient       %.3f ms  (%.1fx its GEMMs, %.3f ms)"):format(1e3 * g.step, g.step / gf, 1e3 * gf))
print(("  NUTS per step  %.3f ms  (%.1fx its GEMMs)"):format(1e3 * s.step, s.step / sf))

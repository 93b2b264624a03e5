--- Data-parallel training step over MPI: steps per second and the share of
-- the step spent in the gradient all-reduce, for one rank or several.
--   bbblua scripts/bench_dist.lua                       # 1 process
--   mpirun -np 2 bbblua scripts/bench_dist.lua          # 2 ranks
local bbb = require "bbb"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local cli = require "bbb.app.cli"

local parser = recipe.parser("bench_dist.lua", "Time data-parallel training steps of a Bayesian MLP "
  .. "(784-H-H-10, global batch --batch) and the gradient all-reduce inside them, with the "
  .. "bytes all-reduced per step. Run it alone and under mpirun -np N to compare.", { defaults = { threads = "1" } })
flags.option(parser, "--hidden", "Units per hidden layer.", "1200"):convert(cli.positive_integer { max = 1 << 14 })
recipe.declare(parser, { "batch" })
flags.option(parser, "--steps", "Timed steps.", "20"):convert(cli.positive_integer())
recipe.declare(parser, { "threads" })
local args = cli.parse(parser)

local dist = bbb.dist.available and bbb.dist or nil
local rank, n = dist and dist.rank() or 0, dist and dist.size() or 1
bbb.set_num_threads(args.threads)
local clock = bbb.core.clock
local gen = bbb.Generator(1)
local H = args.hidden
local net = bbb.nn.bayes_mlp({ 784, H, H, 10 }, { generator = gen })
local opt = bbb.optim.Adam(net, { lr = 1e-4 })
local elbo = bbb.elbo.ELBO{ n_data = 60000, batch_size = args.batch }
local x = bbb.rand({ args.batch, 784 }, 0, 2, gen)
local labels = {}
for i = 1, args.batch do labels[i] = i % 10 + 1 end
local y = bbb.tensor(labels)

local per = (args.batch + n - 1) // n
local xl = x:narrow(1, rank * per + 1, math.min(per, args.batch - rank * per))
local yl = y:narrow(1, rank * per + 1, math.min(per, args.batch - rank * per))
local grads, floats = {}, 0
for _, p in ipairs(opt.params) do floats = floats + p.t:numel() end

local function step()
  opt:zero_grad()
  local loss = elbo:loss(net, xl, yl, { batch = 1, examples = args.batch, kl_share = 1 / n })
  loss:backward()
  local t0 = clock()
  if dist then
    for i, p in ipairs(opt.params) do grads[i] = p.t.grad end
    dist.allreduce_flat(grads, 0)
  end
  local t_reduce = clock() - t0
  opt:step()
  return t_reduce
end

for _ = 1, 3 do step() end
if dist then dist.barrier() end
local t0, reduce = clock(), 0
for _ = 1, args.steps do reduce = reduce + step() end
local total = clock() - t0
if dist then
  local r = dist.allreduce_numbers { total, reduce }
  total, reduce = r[1] / n, r[2] / n
end
if rank == 0 then
  local mb = floats * 4 / 1e6
  print(("784-%d-%d-10, global batch %d, %d rank(s) x %d thread(s)"):format(H, H, args.batch, n, args.threads))
  print(("  step %.2f ms, %.1f steps/s; all-reduce %.2f ms (%.0f%% of the step)"):format(
    1000 * total / args.steps, args.steps / total, 1000 * reduce / args.steps, 100 * reduce / total))
  print(("  bytes all-reduced per step: %.1f MB (%d floats, one call)"):format(mb, floats))
end
if dist then dist.finalize() end

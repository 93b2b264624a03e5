--- bench_conv: where the LeNet training step (bbb.nn.lenet, 16-32-256) spends
-- its time, op by op, with the step's own shapes: each op's forward and its
-- forward plus backward (from a seed gradient) against the im2col GEMMs
-- that op would need, then each BayesConv2d layer whole with every
-- estimator, then the step's phases.
--   build/bbblua scripts/bench_conv.lua [--threads N] [--batch B] [--reps R]
local bbb = require "bbb"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local core = require "bbb.core"
local cli = require "bbb.app.cli"
local bench = require "bbb.bench"

local parser = recipe.parser("bench_conv.lua", "Times the ops of a LeNet training step one by one "
  .. "(forward, and forward plus backward), each BayesConv2d layer with each estimator, and the "
  .. "step's phases. Medians of --reps calls, the best of three rounds.", { defaults = { reps = "15" } })
recipe.declare(parser, { "threads", "batch" })
recipe.declare(parser, { "reps" })
flags.option(parser, "--only", "Time only the ops, the layers or the step.", "all")
  :convert(cli.choice { "all", "ops", "layers", "step" })
local args = cli.parse(parser)
bbb.set_num_threads(math.tointeger(args.threads))
local B, REPS, clock = math.tointeger(args.batch), math.tointeger(args.reps), core.clock
local gen = bbb.Generator(1)

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or 0.5 * (t[n // 2] + t[n // 2 + 1])
end

-- Median seconds of f(), best of three rounds.
local function timed(f)
  local best = math.huge
  for _ = 1, 3 do
    f()
    local t = {}
    for r = 1, REPS do
      local t0 = clock()
      f()
      t[r] = clock() - t0
    end
    best = math.min(best, median(t))
  end
  return best
end

local function ms(s) return ("%8.3f"):format(s * 1e3) end

-- One op: fwd() makes its output; the backward runs from a fixed seed of
-- out_shape (forward only without one).
local function op_line(name, fwd, out_shape, floor)
  local f = timed(function() bbb.no_grad(fwd) end)
  if not out_shape then return print(("%-28s %s"):format(name, ms(f))) end
  local seed = bbb.randn(out_shape, 0, 1, gen)
  local fb = timed(function() local y = fwd(); y:backward(seed) end)
  print(("%-28s %s %s %s %s"):format(name, ms(f), ms(fb - f), ms(fb), floor and ms(floor) or ""))
end

-- The im2col GEMMs conv2d makes for (B, C, H, W) * (O, C, k, k) giving P
-- output pixels: forward, and with backward grad W (and grad x).
local function conv_floor(C, O, k, P, want_gx)
  local K, cap = C * k * k, bbb.conv_workspace()
  local T, t = math.max(1, math.min(B, cap // (P * (2 * K + O) * 4))), 0
  for n0 = 0, B - 1, T do
    local NP = math.min(T, B - n0) * P
    t = t + bench.sgemm(O, NP, K, false, false, 5) + bench.sgemm(O, K, NP, false, true, 5)
    if want_gx then t = t + bench.sgemm(K, NP, O, true, false, 5) end
  end
  return t
end

local function param(shape, s) return bbb.randn(shape, 0, s, gen):requires_grad(true) end

if args.only == "all" or args.only == "ops" then
  print(("bbb %s, %d thread(s), batch %d: ms per call (median of %d, best of 3 rounds)")
    :format(bbb.version, bbb.get_num_threads(), B, REPS))
  print(("%-28s %8s %8s %8s %8s"):format("op", "forward", "backward", "both", "GEMMs"))
  local x1 = bbb.rand({ B, 1, 28, 28 }, 0, 1, gen)
  local w1, b1 = param({ 16, 1, 5, 5 }, 0.2), param({ 16 }, 0.1)
  op_line("conv2d 1->16 5x5 pad 2", function() return bbb.conv2d(x1, w1, b1, { padding = 2 }) end,
    { B, 16, 28, 28 }, conv_floor(1, 16, 5, 784, false))
  local a1 = param({ B, 16, 28, 28 }, 1)
  op_line("relu 16x28x28", function() return a1:relu() end, { B, 16, 28, 28 })
  op_line("max_pool2d 2 16x28x28", function() return bbb.max_pool2d(a1, 2) end, { B, 16, 14, 14 })
  op_line("avg_pool2d 2 16x28x28", function() return bbb.avg_pool2d(a1, 2) end, { B, 16, 14, 14 })
  local x2 = param({ B, 16, 14, 14 }, 1)
  local w2, b2 = param({ 32, 16, 5, 5 }, 0.05), param({ 32 }, 0.1)
  op_line("conv2d 16->32 5x5", function() return bbb.conv2d(x2, w2, b2) end, { B, 32, 10, 10 },
    conv_floor(16, 32, 5, 100, true))
  local a2 = param({ B, 32, 10, 10 }, 1)
  op_line("relu 32x10x10", function() return a2:relu() end, { B, 32, 10, 10 })
  op_line("max_pool2d 2 32x10x10", function() return bbb.max_pool2d(a2, 2) end, { B, 32, 5, 5 })
  op_line("x:square() 16x14x14", function() return x2:square() end, { B, 16, 14, 14 })
  op_line("randn 16x28x28", function() return bbb.randn({ B, 16, 28, 28 }, 0, 1, gen) end)
  op_line("a + b 16x28x28", function() return a1 + a1 end, { B, 16, 28, 28 })
  op_line("a * b 16x28x28", function() return a1 * a1 end, { B, 16, 28, 28 })
  op_line("sqrt(a + 1e-16) 16x28x28", function() return (a1:square() + 1e-16):sqrt() end, { B, 16, 28, 28 })
end

-- A BayesConv2d layer forward (with its weight sample and KL) and backward
-- from a seed gradient of its output (the KL's backward is not timed).
local function layer_line(name, layer, x, out_shape)
  local seed = bbb.randn(out_shape, 0, 1, gen)
  local f = timed(function() bbb.no_grad(function() return layer:forward(x) end) end)
  local fb = timed(function() layer:forward(x):backward(seed) end)
  print(("%-28s %s %s %s"):format(name, ms(f), ms(fb - f), ms(fb)))
end

if args.only == "all" or args.only == "layers" then
  print(("%-28s %8s %8s %8s"):format("BayesConv2d layer", "forward", "backward", "both"))
  local x1 = bbb.rand({ B, 1, 28, 28 }, 0, 1, gen)
  local x2 = bbb.rand({ B, 16, 14, 14 }, 0, 1, gen):requires_grad(true)
  for _, est in ipairs { "weight", "local", "flipout" } do
    local o = { estimator = est, generator = gen, prior = bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) } }
    layer_line("1->16 pad 2, " .. est, bbb.nn.BayesConv2d(1, 16, 5, setmetatable({ padding = 2 }, { __index = o })),
      x1, { B, 16, 28, 28 })
    layer_line("16->32, " .. est, bbb.nn.BayesConv2d(16, 32, 5, o), x2, { B, 32, 10, 10 })
  end
end

if args.only == "all" or args.only == "step" then
  print(("%-28s %8s %8s %8s %8s"):format("LeNet step", "fwd+ELBO", "backward", "Adam", "step"))
  local x = bbb.rand({ B, 784 }, 0, 1, gen)
  local labels = {}
  for i = 1, B do labels[i] = i % 10 + 1 end
  local y = bbb.tensor(labels)
  for _, est in ipairs { "weight", "local", "flipout" } do
    local net = bbb.nn.lenet { estimator = est, generator = bbb.Generator(1) }
    local opt = bbb.optim.Adam(net, { lr = 1e-3 })
    local elbo = bbb.elbo.ELBO { n_data = 60000, batch_size = B }
    local loss
    local tf = timed(function() opt:zero_grad(); loss = elbo:loss(net, x, y, { batch = 1 }); loss:backward() end)
    local f = timed(function() opt:zero_grad(); loss = elbo:loss(net, x, y, { batch = 1 }) end)
    local all = timed(function()
      opt:zero_grad(); loss = elbo:loss(net, x, y, { batch = 1 }); loss:backward(); opt:step()
    end)
    print(("%-28s %s %s %s %s"):format("estimator " .. est, ms(f), ms(tf - f), ms(all - tf), ms(all)))
  end
end

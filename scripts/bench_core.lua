--- bench_core: core op speed against floors measured in the same run.
-- The matmul of a 1200-unit MNIST layer against a bare cblas_sgemm of the
-- same shape, softplus over 2.4M floats (the weights of that network)
-- against a scalar libm loop, and our vector math (vmath.h) against SLEEF's
-- vector functions: speed on one thread from cache, and the largest error
-- in ulp over a sweep of every binade. Ratios, not absolute times, are what
-- carry over between machines.
--   build/bbblua scripts/bench_core.lua [--threads N] [--reps R] [--no-vmath]
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local bbb = require "bbb"
local core = require "bbb.core"
local cli = require "bbb.app.cli"
local bench = require "bbb.bench"

local parser = recipe.parser("bench_core", "Times core ops against floors measured in the same run.", {})
recipe.declare(parser, { "threads" })
recipe.declare(parser, { "reps" })
flags.flag(parser, "--no-vmath", "Skip the vector math table (its error sweeps take a few seconds).")
local args = cli.parse(parser)

local clock = core.clock

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or 0.5 * (t[n // 2] + t[n // 2 + 1])
end

-- Median seconds of fn() over reps calls after a few untimed ones. fn
-- returns the tensor it made; closing it outside the timed span frees it
-- at once, so no garbage piles up between calls and skews the allocator.
local function time_op(fn, reps)
  for _ = 1, 3 do local y <close> = fn() end
  local t = {}
  for r = 1, reps do
    local t0 = clock()
    local y <close> = fn()
    t[r] = clock() - t0
  end
  return median(t)
end

-- On a shared machine one block of timings can land on a busy moment, so
-- each figure is the best of a few rounds' medians (and for matmul, ours
-- and the floor alternate, so both see the same moments).
local function best_of(rounds, f)
  local best = math.huge
  for _ = 1, rounds do best = math.min(best, f()) end
  return best
end

local ROUNDS = 3
bbb.set_num_threads(args.threads)
local gen = bbb.Generator(1)

-- (a) x (128, 784) times w (1200, 784)^T: a forward pass of BayesLinear(784, 1200).
local B, IN, OUT = 128, 784, 1200
local x, w = bbb.randn({B, IN}, 0, 1, gen), bbb.randn({OUT, IN}, 0, 0.05, gen)
local mm_ours, mm_floor = math.huge, math.huge
for _ = 1, ROUNDS do
  mm_ours = math.min(mm_ours, time_op(function() return bbb.matmul(x, w, false, true) end, args.reps))
  mm_floor = math.min(mm_floor, bench.sgemm(B, OUT, IN, false, true, args.reps))
end

-- (b) softplus over 2.4M floats: the sigma = softplus(rho) pass of that net.
local NSP = 2400000
local z = bbb.randn({NSP}, 0, 3, gen)
local function softplus() return z:softplus() end
local sp_ours = best_of(ROUNDS, function() return time_op(softplus, args.reps) end)
local sp_one = sp_ours
if args.threads ~= 1 then
  bbb.set_num_threads(1)
  sp_one = best_of(ROUNDS, function() return time_op(softplus, args.reps) end)
  bbb.set_num_threads(args.threads)
end
-- the scalar loop takes tens of ms a call: fewer reps keep the run short
local libm_reps = math.max(1, math.min(args.reps, 10))
local sp_libm = best_of(ROUNDS, function() return bench.softplus_libm(NSP, libm_reps) end)

local function mps(t) return NSP / t / 1e6 end

local rows = {
  {"op", "ours", "floor / baseline", "ratio", "target", "met"},
  {("matmul (%d,%d) x (%d,%d)^T"):format(B, IN, OUT, IN),
   ("%.3f ms"):format(mm_ours * 1e3), ("%.3f ms sgemm"):format(mm_floor * 1e3),
   ("%.3f"):format(mm_ours / mm_floor), "ratio <= 1.05",
   mm_ours / mm_floor <= 1.05 and "ok" or "MISS"},
  {("softplus 2.4M, %d thread%s"):format(args.threads, args.threads == 1 and "" or "s"),
   ("%.0f M/s"):format(mps(sp_ours)), ("%.0f M/s libm"):format(mps(sp_libm)),
   ("%.1fx"):format(sp_libm / sp_ours),
   args.threads == 2 and ">= 2000 M/s" or "(target is for 2 threads)",
   args.threads == 2 and (mps(sp_ours) >= 2000 and "ok" or "MISS") or ""},
}
if args.threads ~= 1 then
  rows[#rows + 1] = {"softplus 2.4M, 1 thread",
    ("%.0f M/s"):format(mps(sp_one)), ("%.0f M/s libm"):format(mps(sp_libm)),
    ("%.1fx"):format(sp_libm / sp_one), "", ""}
end

local widths = {}
for _, row in ipairs(rows) do
  for i, cell in ipairs(row) do widths[i] = math.max(widths[i] or 0, #cell) end
end
local blas_core, blas_env = bench.blas()
print(("bench_core: %d thread%s, median of %d reps, best of %d rounds, OpenBLAS kernels %s%s")
  :format(args.threads, args.threads == 1 and "" or "s", args.reps, ROUNDS, blas_core,
    blas_env and " (OPENBLAS_CORETYPE=" .. blas_env .. ")" or ""))
for r, row in ipairs(rows) do
  local cells = {}
  for i, cell in ipairs(row) do cells[i] = cell .. (" "):rep(widths[i] - #cell) end
  print((table.concat(cells, "  "):gsub("%s+$", "")))
  if r == 1 then
    local rule = {}
    for i = 1, #widths do rule[i] = ("-"):rep(widths[i]) end
    print((table.concat(rule, "  "):gsub("%s+$", "")))
  end
end

-- Our vector math against SLEEF (libsleef-dev): M/s on one thread over 64K
-- floats that stay in cache, and the worst error in ulp against double libm
-- over a stride-257 sweep of every float (its input named where it is not
-- finite). Softplus and sigmoid from SLEEF are composed the way ours are.
if not args.no_vmath then
  local N = 65536
  local impls = { "ours", "sleef_u10", "sleef_u35" }
  print(("\nvector math, 1 thread, %dK floats in cache (M/s, worst ulp)%s"):format(N // 1024,
    bench.has_sleef and "" or ": this build has no SLEEF (install libsleef-dev), ours alone"))
  local head = ("%-9s"):format("function")
  for _, i in ipairs(impls) do
    if i == "ours" or bench.has_sleef then head = head .. ("  %-22s"):format(i) end
  end
  print(head .. "  faster at equal accuracy")
  for _, f in ipairs { "exp", "log", "log1p", "tanh", "softplus", "sigmoid" } do
    local line, res = ("%-9s"):format(f), {}
    for _, i in ipairs(impls) do
      local t = best_of(ROUNDS, function() return bench.vmath(f, i, N, args.reps) end)
      if t then
        local ulp, at = bench.vmath_ulp(f, i)
        res[i] = { mps = N / t / 1e6, ulp = ulp }
        local err = ulp < math.huge and ("%.2f"):format(ulp) or ("inf at %.3g"):format(at)
        line = line .. ("  %-22s"):format(("%5.0f  %s"):format(N / t / 1e6, err))
      end
    end
    -- SLEEF wins where it is faster and no less accurate (0.05 ulp slack)
    local best = "ours"
    for _, i in ipairs { "sleef_u10", "sleef_u35" } do
      local r = res[i]
      if r and r.mps > res.ours.mps * 1.05 and r.ulp <= res.ours.ulp + 0.05 then best = i end
    end
    print(line .. "  " .. best)
  end
end

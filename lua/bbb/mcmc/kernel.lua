--- bbb.mcmc.kernel: one chain of Hamiltonian Monte Carlo on a target
-- {dim, eval(q) -> log density, gradient} over a flat list of numbers q,
-- by one of two kernels: "hmc", leapfrog trajectories of a jittered fixed
-- length with a Metropolis correction, or "nuts", the No-U-Turn Sampler
-- (multinomial, with the generalised no-U-turn criterion, as Stan runs it;
-- Betancourt 2017). The step size is tuned in warm-up by dual averaging
-- (Hoffman and Gelman 2014, algorithm 5, with Stan's constants) and a
-- diagonal inverse mass matrix estimated in Stan's doubling windows.
-- Positions, momenta and gradients are bbb.Vec (doubles, their loops in
-- C), energies and NUTS's log weights Lua doubles; only the target's own
-- arithmetic is float32.
local bbb = require "bbb"
local linear = require "bbb.mcmc.linear"

local vec = bbb.core.vec

local K = {}

-- Dual averaging's constants, as Stan and NumPyro set them.
local GAMMA, T0, KAPPA = 0.05, 10, 0.75
-- An energy error this large is a divergence: the trajectory left the
-- region the step size can follow, and its proposal is rejected.
K.DIVERGENCE = 1000

-- A position this far out has run away (and would not fit a float32 tensor).
local FAR = 1e30

local function finite(v) return v == v and v < math.huge and v > -math.huge end

-- A metric is the inverse mass matrix M^-1: {diag = Vec, isd = Vec of
-- diag^-1/2} (diagonal) or {cov = rows, chol = rows} (dense: the matrix
-- and its lower Cholesky factor, in Lua doubles). Dense costs P^2 a
-- leapfrog step instead of P, and evens out correlated scales that a
-- diagonal cannot.

--- K.diagonal(list) -> the diagonal metric with these variances.
function K.diagonal(v)
  local isd = {}
  for i = 1, #v do isd[i] = 1 / math.sqrt(v[i]) end
  return { diag = vec(v), isd = vec(isd) }
end

--- K.velocity(p, metric) -> M^-1 p, the rate of change of the position.
function K.velocity(p, m)
  if m.diag then return p:clone():mul(m.diag) end
  local v, pt = {}, p:totable()
  for i, row in ipairs(m.cov) do
    local t = 0
    for j = 1, #pt do t = t + row[j] * pt[j] end
    v[i] = t
  end
  return vec(v)
end

--- K.kinetic(p, metric [, v]) -> p^T M^-1 p / 2, the kinetic energy of
-- momentum p (v: its velocity M^-1 p, when already known).
function K.kinetic(p, m, v)
  return 0.5 * p:dot(v or K.velocity(p, m))
end

--- K.momentum(metric, gen) -> p ~ N(0, M): z / sqrt(diag), or for a
-- dense M^-1 = L L^T, p = L^-T z.
function K.momentum(m, gen)
  if m.diag then return vec(bbb.randn({ #m.diag }, 0, 1, gen)):mul(m.isd) end
  local z, L = bbb.randn({ #m.cov }, 0, 1, gen):totable(), m.chol
  for i = #z, 1, -1 do
    local t = z[i]
    for k = i + 1, #z do t = t - L[k][i] * z[k] end
    z[i] = t / L[i][i]
  end
  return vec(z)
end

--- leapfrog(target, q, p, grad, eps, L, metric [, h0]) -> q, p, lp, grad,
-- v: L steps of the leapfrog (velocity Verlet) integrator from (q, p),
-- grad the gradient of the log density at q, v the final velocity M^-1 p;
-- nil when the log density turned infinite or undefined or the position
-- ran away, or (h0 given: the starting energy) the energy error passed the
-- divergence bound on the way. q and p are not changed.
function K.leapfrog(target, q, p, grad, eps, L, metric, h0)
  q, p = q:clone(), p:clone():axpy(0.5 * eps, grad)
  local v, lp = K.velocity(p, metric), nil
  for l = 1, L do
    if not (q:axpy(eps, v):max_abs() < FAR) then return nil end
    lp, grad = target.eval(q)
    if not finite(lp) then return nil end
    p:axpy(l < L and eps or 0.5 * eps, grad)
    v = K.velocity(p, metric)
    if h0 and not (-lp + K.kinetic(p, metric, v) - h0 < K.DIVERGENCE) then return nil end
  end
  return q, p, lp, grad, v
end

--- transition(target, state, eps, L, metric, gen) -> accept_prob,
-- divergent: one HMC iteration from state {q, lp, grad}, updated in place
-- when the proposal is accepted. The energy error -dH decides, min(1, e^-dH).
function K.transition(target, st, eps, L, metric, gen)
  local p = K.momentum(metric, gen)
  local h0 = -st.lp + K.kinetic(p, metric)
  local q1, p1, lp1, g1, v1 = K.leapfrog(target, st.q, p, st.grad, eps, L, metric, h0)
  local dh = q1 and (-lp1 + K.kinetic(p1, metric, v1)) - h0 or math.huge
  local divergent = not (dh < K.DIVERGENCE)
  local accept = divergent and 0 or math.min(1, math.exp(-dh))
  if bbb.rand({ 1 }, 0, 1, gen):item() < accept then st.q, st.lp, st.grad = q1, lp1, g1 end
  return accept, divergent
end

-- The No-U-Turn Sampler. A trajectory grows by doubling, each time in a
-- random direction, until its ends turn back towards each other, a
-- subtree diverges or the depth limit is reached; the draw may be any of
-- its points, picked in proportion to e^-H (multinomial sampling), not
-- only its last. Subtrees hold {z (the outermost point, where the next leapfrog
-- step starts), pick (the point chosen inside), lw (log of the summed
-- weights e^(H0 - H)), rho (the summed momenta), p_in, ps_in (momentum and
-- velocity M^-1 p of the point next to the rest of the trajectory), p_out,
-- ps_out (of the outermost)}. Momenta are kept in forward time, so the
-- criterion reads the same whichever way a subtree was built.

local function log_add(a, b)
  if a == -math.huge then return b end
  if b == -math.huge then return a end
  local m = a > b and a or b
  return m + math.log(math.exp(a - m) + math.exp(b - m))
end

-- The generalised criterion (Betancourt 2017): both ends' velocities still
-- point along the summed momentum rho, here rho plus an optional extra
-- momentum (the point that joins two subtrees) without building the sum.
local function no_uturn(ps_a, ps_b, rho, extra)
  local a, b = ps_a:dot(rho), ps_b:dot(rho)
  if extra then a, b = a + ps_a:dot(extra), b + ps_b:dot(extra) end
  return a > 0 and b > 0
end

-- Uniform draws in blocks: a deep tree asks for one at every merge, and
-- a tensor per number would cost more than the number.
local function uniforms(gen)
  local buf, i = {}, 1
  return function()
    if i > #buf then buf, i = bbb.rand({ 256 }, 0, 1, gen):totable(), 1 end
    i = i + 1
    return buf[i - 1]
  end
end

-- One leapfrog step from z in the tree's direction (c.eps carries the
-- sign): a one-point subtree, or nil when it diverged. Every step counts
-- towards the acceptance statistic, diverged ones too, as Stan counts them.
local function leaf(c, z)
  local q, p, lp, grad, v = K.leapfrog(c.target, z.q, z.p, z.grad, c.eps, 1, c.metric)
  c.steps = c.steps + 1
  local lw = q and c.h0 - (-lp + K.kinetic(p, c.metric, v)) or -math.huge
  if lw ~= lw then lw = -math.huge end
  c.accept = c.accept + (lw > 0 and 1 or math.exp(lw))
  if not (lw > -K.DIVERGENCE) then
    c.divergent = true
    return nil
  end
  local pt = { q = q, p = p, lp = lp, grad = grad }
  return { z = pt, pick = pt, lw = lw, rho = p:clone(), p_in = p, ps_in = v, p_out = p, ps_out = v }
end

-- A subtree of 2^depth steps from z, or nil when any subtree inside it
-- diverged or turned back: then none of its points may be drawn.
local function subtree(c, z, depth)
  if depth == 0 then return leaf(c, z) end
  local a = subtree(c, z, depth - 1)
  if not a then return nil end
  local b = subtree(c, a.z, depth - 1)
  if not b then return nil end
  local lw = log_add(a.lw, b.lw)
  -- uniform (in the weights) within a subtree: b's pick by its share
  local pick = c.uniform() < math.exp(b.lw - lw) and b.pick or a.pick
  -- the merged subtree, and each half with the nearest point of the other,
  -- must not turn back (the extra checks catch a U-turn between halves)
  local ok = no_uturn(a.ps_in, b.ps_out, a.rho, b.rho)
    and no_uturn(a.ps_in, b.ps_in, a.rho, b.p_in)
    and no_uturn(a.ps_out, b.ps_out, b.rho, a.p_out)
  if not ok then return nil end
  local rho = a.rho:axpy(1, b.rho)
  return { z = b.z, pick = pick, lw = lw, rho = rho, p_in = a.p_in, ps_in = a.ps_in, p_out = b.p_out,
           ps_out = b.ps_out }
end

--- nuts_transition(target, state, eps, max_depth, metric, gen, uniform)
-- -> accept_stat, divergent, depth, steps: one NUTS iteration from state
-- {q, lp, grad}, moved in place to the point drawn. uniform() draws from
-- the chain's generator. accept_stat is the mean of min(1, e^(H0 - H))
-- over every step taken (the statistic dual averaging tunes), depth the
-- doublings kept, steps the leapfrog steps taken.
function K.nuts_transition(target, st, eps, max_depth, metric, gen, uniform)
  local p = K.momentum(metric, gen)
  local z0, v = { q = st.q, p = p, lp = st.lp, grad = st.grad }, K.velocity(p, metric)
  local c = { target = target, metric = metric, h0 = -st.lp + K.kinetic(p, metric, v), uniform = uniform,
              steps = 0, accept = 0, divergent = false }
  -- the trajectory's two ends: the point to go on from, its momentum and velocity
  local ends = { [1] = { z = z0, p = p, v = v }, [-1] = { z = z0, p = p, v = v } }
  local rho, lw, draw, depth = p:clone(), 0, z0, 0
  while depth < max_depth do
    local dir = uniform() > 0.5 and 1 or -1
    local near, far = ends[dir], ends[-dir]
    c.eps = dir * eps
    local s = subtree(c, near.z, depth)
    if not s then break end
    depth = depth + 1
    -- biased progressive sampling: the new subtree's pick replaces the
    -- draw with probability min(1, its weight / the old trajectory's)
    if uniform() < math.exp(s.lw - lw) then draw = s.pick end
    lw = log_add(lw, s.lw)
    local go_on = no_uturn(far.v, s.ps_out, rho, s.rho)
      and no_uturn(far.v, s.ps_in, rho, s.p_in)
      and no_uturn(near.v, s.ps_out, s.rho, near.p)
    rho:axpy(1, s.rho)
    ends[dir] = { z = s.z, p = s.p_out, v = s.ps_out }
    if not go_on then break end
  end
  st.q, st.lp, st.grad = draw.q, draw.lp, draw.grad
  return c.accept / c.steps, c.divergent, depth, c.steps
end

-- Stan's init_stepsize: doubles or halves eps until one leapfrog step's
-- acceptance crosses 0.8, so dual averaging starts at the right scale.
local function reasonable_step(target, st, eps, metric, gen)
  local log08 = math.log(0.8)
  local function delta(e)
    local p = K.momentum(metric, gen)
    local h0 = -st.lp + K.kinetic(p, metric)
    local q1, p1, lp1, _, v1 = K.leapfrog(target, st.q, p, st.grad, e, 1, metric)
    return q1 and h0 - (-lp1 + K.kinetic(p1, metric, v1)) or -math.huge
  end
  local direction = delta(eps) > log08 and 1 or -1
  for _ = 1, 100 do
    local next_eps = direction == 1 and 2 * eps or 0.5 * eps
    local d = delta(next_eps)
    if (direction == 1 and not (d > log08)) or (direction == -1 and d > log08) then
      return direction == 1 and eps or next_eps
    end
    eps = next_eps
  end
  error(("mcmc: the step size search ran off to %g without finding a sensible first step: is the log "
    .. "density flat, or its gradient wrong?"):format(eps), 0)
end

local function dual_averaging(eps)
  return { mu = math.log(10 * eps), s_bar = 0, x_bar = 0, count = 0 }
end

-- One dual-averaging update from an iteration's acceptance; the new step size.
local function adapt_step(da, accept, delta)
  da.count = da.count + 1
  local eta = 1 / (da.count + T0)
  da.s_bar = (1 - eta) * da.s_bar + eta * (delta - accept)
  local x = da.mu - da.s_bar * math.sqrt(da.count) / GAMMA
  local w = da.count ^ -KAPPA
  da.x_bar = w * x + (1 - w) * da.x_bar
  return math.exp(x)
end

--- windows(warmup) -> list of {first, last}: the warm-up iterations whose
-- draws estimate the mass matrix, as Stan's windowed adaptation lays them
-- out: a first buffer of 75 for the step size alone, windows of 25, 50,
-- 100, ... (the last stretched to fill), and a last buffer of 50 where the
-- step size settles for the final mass matrix. Short warm-ups scale the
-- buffers to 15% and 10%; under 20 iterations no mass matrix is estimated.
function K.windows(W)
  if W < 20 then return {} end
  local init, term, base = 75, 50, 25
  if init + term + base > W then
    init, term = math.floor(0.15 * W), math.floor(0.1 * W)
    base = W - init - term
  end
  local out, start, size = {}, init, base
  while true do
    local stop = start + size
    if stop + 2 * size > W - term then
      out[#out + 1] = { start + 1, W - term }
      return out
    end
    out[#out + 1] = { start + 1, stop }
    start, size = stop, 2 * size
  end
end

-- Welford's running mean and sums of squared deviations of the draws:
-- per coordinate (m2, a list) or, for a dense metric, per pair (m2, rows).
local function welford(P, dense)
  local w = { n = 0, mean = {}, m2 = {} }
  for i = 1, P do
    w.mean[i], w.m2[i] = 0, 0
    if dense then
      w.m2[i] = {}
      for j = 1, P do w.m2[i][j] = 0 end
    end
  end
  return w
end

local function welford_add(w, q)
  q = q:totable()
  w.n = w.n + 1
  local d = {}
  for i = 1, #q do
    d[i] = q[i] - w.mean[i]
    w.mean[i] = w.mean[i] + d[i] / w.n
  end
  for i = 1, #q do
    local row, di = w.m2[i], q[i] - w.mean[i]
    if type(row) == "number" then
      w.m2[i] = row + d[i] * di
    else
      for j = 1, #q do row[j] = row[j] + d[j] * di end
    end
  end
end

-- The window's (co)variances shrunk towards 1e-3 times the identity as
-- Stan does, so a short window cannot make a mass huge or singular: the
-- metric they define.
local function welford_metric(w)
  local n, P = w.n, #w.mean
  local a, b = n / (n + 5) / math.max(n - 1, 1), 1e-3 * (5 / (n + 5))
  if type(w.m2[1]) == "number" then
    local d = {}
    for i = 1, P do d[i] = n > 1 and a * w.m2[i] + b or 1 end
    return K.diagonal(d)
  end
  local cov = {}
  for i = 1, P do
    cov[i] = {}
    for j = 1, P do cov[i][j] = a * w.m2[i][j] + (i == j and b or 0) end
  end
  return { cov = cov, chol = linear.cholesky(cov) }
end

--- K.variances(metric) -> the list of M^-1's diagonal.
function K.variances(m)
  if m.diag then return m.diag:totable() end
  local d = {}
  for i, row in ipairs(m.cov) do d[i] = row[i] end
  return d
end

-- The number of leapfrog steps of one iteration, uniform on L/2 .. 3L/2:
-- a fixed trajectory length can lock onto a period of the target and
-- return where it started.
local function steps(L, gen)
  local lo, hi = math.max(1, L - L // 2), L + L // 2
  if lo == hi then return lo end
  return lo + math.floor(bbb.rand({ 1 }, 0, 1, gen):item() * (hi - lo + 1))
end

--- stepper(opts, gen) -> fn(target, state, eps, metric) -> accept_stat,
-- divergent, depth, steps: one iteration of opts.kernel ("hmc", the
-- default: a jittered opts.leapfrog steps, depth nil; "nuts": trees of at
-- most opts.max_depth doublings, 10 by default) drawing from gen.
function K.stepper(o, gen)
  if o.kernel == "nuts" then
    local uniform, max_depth = uniforms(gen), o.max_depth or 10
    return function(target, st, eps, metric)
      return K.nuts_transition(target, st, eps, max_depth, metric, gen, uniform)
    end
  end
  return function(target, st, eps, metric)
    local L = steps(o.leapfrog, gen)
    local accept, divergent = K.transition(target, st, eps, L, metric, gen)
    return accept, divergent, nil, L
  end
end

-- Warm-up: step size by dual averaging throughout (on the acceptance
-- statistic of whichever kernel steps), restarted after each mass-matrix
-- window (diagonal, or dense with o.metric = "dense"); the final step size
-- is the averaged iterate.
local function warmup(target, st, o, gen, step, report)
  local P, start = #st.q, {}
  for i = 1, P do start[i] = o.inv_mass and o.inv_mass[i] or 1 end
  local metric = K.diagonal(start)
  local eps = o.step_size or reasonable_step(target, st, 0.1, metric, gen)
  local da = dual_averaging(eps)
  local wins = o.adapt_mass == false and {} or K.windows(o.warmup)
  local win, acc = 1, nil
  for it = 1, o.warmup do
    local accept, _, depth, n = step(target, st, eps, metric)
    eps = adapt_step(da, accept, o.target_accept)
    local w = wins[win]
    if w and it >= w[1] then
      acc = acc or welford(P, o.metric == "dense")
      welford_add(acc, st.q)
      if it == w[2] then
        metric, acc, win = welford_metric(acc), nil, win + 1
        eps = reasonable_step(target, st, eps, metric, gen)
        da = dual_averaging(eps)
      end
    end
    report("warmup", it, eps, accept, depth, n)
  end
  if o.warmup > 0 then eps = math.exp(da.x_bar) end
  return eps, metric
end

--- run_chain(target, q0, opts, gen [, report]) -> chain: warm-up, then
-- opts.samples draws. opts: kernel ("hmc" or "nuts"), warmup, samples,
-- leapfrog (hmc: mean steps per iteration), max_depth (nuts: most
-- doublings of a tree), target_accept, adapt_mass (false: unit mass),
-- metric ("diag", the default, or "dense": the mass matrix warm-up
-- estimates), step_size and inv_mass (start from these instead of
-- searching). chain = {draws = (S, P) tensor, lp = {log density per draw},
-- accept_rate, divergences (after warm-up), step_size, inv_mass (the
-- inverse mass matrix's diagonal), metric, gradients (evaluations
-- made, warm-up included), steps (mean leapfrog steps per draw), tree_depth
-- (nuts: mean doublings per draw), max_depth_hits (nuts: draws whose tree
-- reached max_depth)}. report(phase, iteration, step_size, accept_stat,
-- depth, steps) is called every iteration.
function K.run_chain(target, q0, o, gen, report)
  report = report or function() end
  local evals = 0
  local counted = { dim = target.dim, eval = function(q) evals = evals + 1; return target.eval(q) end }
  local st = { q = vec(q0) }
  st.lp, st.grad = counted.eval(st.q)
  if not finite(st.lp) then
    error(("mcmc: the log density at the initial point is %s: start where it is finite"):format(tostring(st.lp)), 0)
  end
  local step = K.stepper(o, gen)
  local eps, metric = warmup(counted, st, o, gen, step, report)
  local P, S = #st.q, o.samples
  local draws = bbb.zeros { S, P }
  local lps, acc_sum, divergences, depth_sum, steps_sum, hits = {}, 0, 0, 0, 0, 0
  for s = 1, S do
    local accept, divergent, depth, n = step(counted, st, eps, metric)
    acc_sum, steps_sum = acc_sum + accept, steps_sum + n
    if divergent then divergences = divergences + 1 end
    if depth then
      depth_sum = depth_sum + depth
      if depth >= (o.max_depth or 10) then hits = hits + 1 end
    end
    draws:narrow(1, s, 1):copy(st.q:tensor():reshape(1, P))
    lps[s] = st.lp
    report("sampling", s, eps, accept, depth, n)
  end
  local nuts = o.kernel == "nuts"
  return { draws = draws, lp = lps, accept_rate = S > 0 and acc_sum / S or 0, divergences = divergences,
           step_size = eps, inv_mass = K.variances(metric), metric = metric.diag and "diag" or "dense", gradients = evals, steps = steps_sum / S,
           tree_depth = nuts and depth_sum / S or nil, max_depth_hits = nuts and hits or nil }
end

return K

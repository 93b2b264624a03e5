--- bbb.mcmc.target: the log joint density of a plain network's weights,
-- log p(y | x, w) + log p(w), and its gradient, as a target for the HMC
-- kernel: {dim, eval(q) -> value, gradient} over the weights flattened in
-- named_parameters' order (plus log sigma last when the noise is inferred),
-- q and the gradient bbb.Vec of doubles.
-- The likelihood's gradient comes from the autograd tape; its value is
-- summed from per-row terms in Lua doubles, and bbb's C priors are
-- evaluated in Lua doubles outright, so the energy the Metropolis test
-- compares carries no float32 rounding of the totals.
local bbb = require "bbb"
local prior_mod = require "bbb.prior"

local T = {}

local vec = bbb.core.vec

local LOG_2PI = math.log(2 * math.pi)

--- layout(net) -> {tensors, sizes, dim}: the net's parameters in
-- named_parameters' order and the length of their flattening.
function T.layout(net)
  local ps, sizes, dim = net:parameters(), {}, 0
  for i, p in ipairs(ps) do sizes[i] = p:numel(); dim = dim + sizes[i] end
  return { tensors = ps, sizes = sizes, dim = dim }
end

--- get(net) -> the net's weights as one flat list of numbers.
function T.get(net)
  local out = {}
  for _, p in ipairs(net:parameters()) do
    for _, v in ipairs(p:detach():reshape(-1):totable()) do out[#out + 1] = v end
  end
  return out
end

--- set(net, w): the net's weights from a flat list, a bbb.Vec or a 1-d tensor of their number.
function T.set(net, w, lay)
  lay = lay or T.layout(net)
  local flat = bbb.is_tensor(w) and w:reshape(-1) or bbb.core.is_vec(w) and w:tensor() or bbb.tensor(w)
  if flat:numel() < lay.dim then
    error(("mcmc: %d numbers given for a net of %d weights"):format(flat:numel(), lay.dim), 0)
  end
  bbb.no_grad(function()
    local off = 0
    for i, p in ipairs(lay.tensors) do
      p:copy(flat:narrow(1, off + 1, lay.sizes[i]):reshape(p:size()))
      off = off + lay.sizes[i]
    end
  end)
end

-- A C prior (Gaussian, Laplace, ScaleMixture) as log p and its gradient
-- per weight, in doubles: lp(q, n, grad) adds into grad's first n numbers
-- (bbb.Vec both), returns the sum. The Gaussian's are two passes in C;
-- the others loop in Lua over a list of q.
local function c_prior(p)
  if p.kind == "gaussian" then
    local s2, c = p.sigma * p.sigma, -(math.log(p.sigma) + 0.5 * LOG_2PI)
    return function(q, n, g)
      g:axpy(-1 / s2, q, n)
      return -0.5 * q:dot(q, n) / s2 + n * c
    end
  end
  local per_weight   -- v -> log p(v), d/dv log p(v)
  if p.kind == "laplace" then
    local b, c = p.b, -math.log(2 * p.b)
    per_weight = function(v) return c - math.abs(v) / b, -(v > 0 and 1 or v < 0 and -1 or 0) / b end
  else
    local s1, s2 = p.sigma1, p.sigma2
    local c1 = math.log(p.pi) - math.log(s1) - 0.5 * LOG_2PI
    local c2 = math.log(1 - p.pi) - math.log(s2) - 0.5 * LOG_2PI
    per_weight = function(v)
      local a, b = c1 - 0.5 * v * v / (s1 * s1), c2 - 0.5 * v * v / (s2 * s2)
      local m = math.max(a, b)
      local lse = m + math.log(math.exp(a - m) + math.exp(b - m))
      return lse, -v * (math.exp(a - lse) / (s1 * s1) + math.exp(b - lse) / (s2 * s2))
    end
  end
  return function(q, n, g)
    local s, d, qs = 0, {}, q:totable()
    for i = 1, n do
      local lp, dl = per_weight(qs[i])
      s, d[i] = s + lp, dl
    end
    g:axpy(1, vec(d), n)
    return s
  end
end

--- prior_sampler(prior) -> fn(n, gen) -> n draws from a C prior, or nil
-- for a prior written in Lua (which says how to evaluate, not to draw).
function T.prior_sampler(p)
  if not prior_mod.is_fused(p) then return nil end
  if p.kind == "gaussian" then
    return function(n, gen) return bbb.randn({ n }, 0, p.sigma, gen):totable() end
  elseif p.kind == "laplace" then
    return function(n, gen)
      local u = bbb.rand({ n }, -0.5, 0.5, gen):totable()
      for i, v in ipairs(u) do u[i] = -p.b * (v < 0 and -1 or 1) * math.log(1 - 2 * math.abs(v)) end
      return u
    end
  end
  return function(n, gen)
    local pick, z = bbb.rand({ n }, 0, 1, gen):totable(), bbb.randn({ n }, 0, 1, gen):totable()
    for i = 1, n do z[i] = z[i] * (pick[i] < p.pi and p.sigma1 or p.sigma2) end
    return z
  end
end

-- The likelihood of the outputs: a tensor to differentiate and its value
-- summed in doubles. Gaussian with noise sd sigma (a number), or
-- categorical with labels 1..C.
local function gaussian_loglik(out, y, sigma)
  local r = out - y
  local rows = r:detach():reshape(-1):totable()
  local ss = 0
  for i = 1, #rows do ss = ss + rows[i] * rows[i] end
  local n = #rows
  local value = -0.5 * ss / (sigma * sigma) - n * (math.log(sigma) + 0.5 * LOG_2PI)
  return r:square():sum() * (-0.5 / (sigma * sigma)), value, ss, n
end

local function categorical_loglik(out, picks)
  local chosen = out:log_softmax():reshape(-1):index_select(picks)
  local v = 0
  for _, x in ipairs(chosen:detach():totable()) do v = v + x end
  return chosen:sum(), v
end

-- The flat positions (1-based) of each row's label in the (N, C) logits.
local function label_positions(y, n, C)
  local labels, idx = y:reshape(-1):totable(), {}
  if #labels ~= n then error(("hmc: y has %d labels for %d rows of x"):format(#labels, n), 0) end
  for i, v in ipairs(labels) do
    local c = math.tointeger(v)
    if not c or c < 1 or c > C then
      error(("hmc: y[%d] is %s, not a class in 1..%d (the net's outputs)"):format(i, tostring(v), C), 0)
    end
    idx[i] = (i - 1) * C + c
  end
  return bbb.tensor(idx)
end

-- The half-Cauchy(0, scale) prior of the noise sd sigma = e^u, with the
-- Jacobian of u: log p(u) = log(2 / (pi scale)) - log(1 + e^2u / scale^2) + u.
local function noise_prior(u, scale)
  local r = math.exp(2 * u) / (scale * scale)
  return math.log(2 / (math.pi * scale)) - math.log(1 + r) + u, 1 - 2 * r / (1 + r)
end

-- Gathers the parameters' gradients into one bbb.Vec (zeros where none
-- reached), with `extra` more zeros at its end.
local function gradients(lay, extra)
  local gs = {}
  for i, p in ipairs(lay.tensors) do
    gs[i] = p.grad and p.grad:reshape(-1) or bbb.zeros(lay.sizes[i])
  end
  if extra > 0 then gs[#gs + 1] = bbb.zeros(extra) end
  return vec(bbb.cat(gs, 1))
end

--- net(o) -> target: the log joint of o.net's weights given o.x and o.y
-- (the options of bbb.mcmc.hmc, checked there). o.prior_fn: a C prior's
-- evaluator, or o.prior a Lua prior (log_prob on the tape per tensor).
function T.net(o)
  local net, x, lay = o.net, o.x, T.layout(o.net)
  local P, infer = lay.dim, o.noise_sigma == "infer"
  local y, picks = o.y, nil
  if o.likelihood == "categorical" then
    local out = bbb.no_grad(function() return net:forward(x) end)
    picks = label_positions(y, x:size(1), out:size(2))
  end
  local prior_fn = prior_mod.is_fused(o.prior) and c_prior(o.prior) or nil
  local function eval(q)
    T.set(net, q, lay)
    for _, p in ipairs(lay.tensors) do p:set_grad(nil) end
    local was = bbb.set_grad_enabled(true)
    local ok, value, grad = pcall(function()
      local out = net:forward(x)
      local t, v, ss, n
      if picks then t, v = categorical_loglik(out, picks)
      else
        local yy = y:dim() == out:dim() and y or y:reshape(out:size())
        t, v, ss, n = gaussian_loglik(out, yy, infer and math.exp(q[P + 1]) or o.noise_sigma)
      end
      if not prior_fn then
        for _, p in ipairs(lay.tensors) do
          local lp = o.prior:log_prob(p)
          t, v = t + lp, v + lp:item()
        end
      end
      t:backward()
      local g = gradients(lay, infer and 1 or 0)
      if prior_fn then v = v + prior_fn(q, P, g) end
      if infer then   -- d/du of -ss e^-2u / 2 - n u, and the noise prior
        local lpu, du = noise_prior(q[P + 1], o.noise_scale)
        v, g[P + 1] = v + lpu, ss * math.exp(-2 * q[P + 1]) - n + du
      end
      return v, g
    end)
    bbb.set_grad_enabled(was)
    if not ok then error(value, 0) end
    return value, grad
  end
  return { dim = infer and P + 1 or P, weights = P, eval = eval }
end

--- density(fn, dim) -> target: a log density written with tensor ops,
-- fn(x) -> 0-d tensor for x a (dim) tensor, differentiated by the tape.
function T.density(fn, dim)
  local function eval(q)
    local x = q:tensor():requires_grad(true)
    local was = bbb.set_grad_enabled(true)
    local ok, lp = pcall(fn, x)
    if ok and not (bbb.is_tensor(lp) and lp:numel() == 1) then
      ok, lp = false, ("sample: log_density must return a tensor of one element, got %s")
        :format(bbb.is_tensor(lp) and ("a tensor of " .. lp:numel() .. " elements") or type(lp))
    end
    if ok then
      local okb, err = pcall(lp.backward, lp)
      if not okb then ok, lp = false, err end
    end
    bbb.set_grad_enabled(was)
    if not ok then error(lp, 0) end
    return lp:item(), x.grad and vec(x.grad) or vec(dim)
  end
  return { dim = dim, weights = dim, eval = eval }
end

return T

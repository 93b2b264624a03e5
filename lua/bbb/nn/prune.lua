--- bbb.nn.prune(net, {fraction =, by = "snr" | "magnitude"}): removes the
-- given fraction of the weights and biases of every Bayesian layer, those
-- with the lowest signal-to-noise ratio |mu| / sigma (Blundell et al. 2015,
-- section 5.1) or the lowest |mu|, ranked together over the whole network.
-- A removed weight gets mu = 0 and a mask entry 0, which every forward
-- applies to the sampled weights, so it is 0 in MC samples too (sigma = 0).
-- The masks are buffers of the layers: bbb.save keeps them, bbb.load puts
-- them back.
local bbb = require "bbb"

local BY = { snr = true, magnitude = true }

local function fail(msg, ...) error(("bbb.nn.prune: " .. msg):format(...), 3) end

-- The Bayesian layers of net with their positions ("1", "3", "2.1").
local function bayes_layers(net)
  local out = {}
  local function walk(m, path)
    if m.weight_mu and m.weight_rho then out[#out + 1] = { layer = m, name = path } end
    for i, c in ipairs(m:children()) do walk(c, path == "" and tostring(i) or (path .. "." .. i)) end
  end
  walk(net, "")
  return out
end

-- The score tensor of one (mu, rho) pair: |mu| / softplus(rho) or |mu|,
-- with removed entries (mask 0) scored 0.
local function score(mu, rho, mask, by)
  return bbb.no_grad(function()
    local s = by == "snr" and mu:abs() / rho:softplus() or mu:abs()
    if mask then s = s * mask end
    return s
  end)
end

local function flat(t)
  return t:reshape{ t:numel() }:totable()
end

--- scores(net [, by]) -> a flat Lua list of every weight's and bias's score
-- (the ranking prune uses), and the layers found.
local function scores(net, by)
  local layers = bayes_layers(net)
  local all, parts = {}, {}
  for _, e in ipairs(layers) do
    local l = e.layer
    local ts = { { l.weight_mu, l.weight_rho, l.weight_mask } }
    if l.bias_mu then ts[2] = { l.bias_mu, l.bias_rho, l.bias_mask } end
    for _, t in ipairs(ts) do
      local v = flat(score(t[1], t[2], t[3], by))
      local n0 = #all
      for i = 1, #v do all[n0 + i] = v[i] end
      parts[#parts + 1] = { layer = e, first = n0 + 1, last = #all, shape = t[1]:size() }
    end
  end
  return all, layers, parts
end

-- A 0/1 tensor of the given shape from the keep flags of all[first..last].
local function mask_tensor(keep, first, last, shape)
  local chars, one, zero = {}, "\1", "\0"
  for i = first, last do chars[#chars + 1] = keep[i] and one or zero end
  return bbb.from_bytes(table.concat(chars), 0, shape)
end

--- prune(net, {fraction = f, by = "snr" | "magnitude"}) -> masks, info
-- masks: a list of {name = position of the layer, layer =, weight = mask,
-- bias = mask}; info = {total =, removed =, kept =, threshold =}. The net is
-- changed in place (clone it first to keep the original).
-- @raise bbb.nn.prune: ... when fraction is not in [0, 1], by is unknown, or
--   the net has no Bayesian layer
-- @usage
--   local net = bbb.nn.bayes_mlp({ 20, 30, 2 })
--   local masks, info = bbb.nn.prune(net, { fraction = 0.9 })
--   print(info.removed, info.kept)   -- 90% of the weights and biases, and the rest
local function prune(net, opts)
  if type(net) ~= "table" or type(net.children) ~= "function" then
    fail("net must be a module, got %s", type(net))
  end
  opts = opts or {}
  if type(opts) ~= "table" then fail("options must be a table, got %s", type(opts)) end
  local f = opts.fraction
  if type(f) ~= "number" or not (f >= 0 and f <= 1) then
    fail("fraction must be a number in [0, 1], got %s", tostring(f))
  end
  local by = opts.by or "snr"
  if not BY[by] then fail('by must be "snr" or "magnitude", got %s', tostring(by)) end
  local all, layers, parts = scores(net, by)
  if #layers == 0 then
    fail("the model has no Bayesian layers (BayesLinear) to prune: %s", tostring(net):gsub("\n.*", ""))
  end
  local N = #all
  local k = math.floor(f * N + 0.5)
  -- the k-th smallest score is the cut; ties at the cut go in index order
  local thr, ties = -math.huge, 0
  if k > 0 then
    local sorted = table.move(all, 1, N, 1, {})
    table.sort(sorted, function(a, b) return a < b or (a == a and b ~= b) end)
    thr = sorted[k]
    local less = 0
    for i = 1, k do if sorted[i] < thr then less = less + 1 end end
    ties = k - less
  end
  local keep = {}
  for i = 1, N do
    local s = all[i]
    if k == 0 or s > thr then
      keep[i] = true
    elseif s == thr and ties == 0 then
      keep[i] = true
    elseif s == thr then
      ties = ties - 1
      keep[i] = false
    else
      keep[i] = false   -- below the cut, or NaN
    end
  end
  local masks, by_layer = {}, {}
  for _, p in ipairs(parts) do
    local m = mask_tensor(keep, p.first, p.last, p.shape)
    local entry = by_layer[p.layer]
    if not entry then
      entry = { name = p.layer.name, layer = p.layer.layer }
      by_layer[p.layer] = entry
      masks[#masks + 1] = entry
    end
    if entry.weight then entry.bias = m else entry.weight = m end
  end
  for _, e in ipairs(masks) do e.layer:set_mask(e.weight, e.bias) end
  return masks, { total = N, removed = k, kept = N - k, threshold = k > 0 and thr or nil, by = by }
end

return setmetatable({ prune = prune, scores = scores }, { __call = function(_, ...) return prune(...) end })

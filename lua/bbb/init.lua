--- bbb: Bayes by Backprop on a C tensor core.
-- The tensor functions come from the C module bbb.core; the submodules
-- (nn, prior, elbo, optim, train, checkpoint, data, metrics, calibration, stats, progress,
-- testing, json, dist, bandit, mcmc) load on first use: `bbb.nn.BayesLinear(784, 400)`.
-- The application's modules (plot, cli, sys, the experiments) are not
-- here: they are required by their own names, bbb.app.plot and the like.
local core = require "bbb.core"

-- The folder this file was loaded from: bbb's own modules load from here
-- only, never through package.path, whose "./?.lua" would let a bbb/<name>.lua
-- in the working directory run in their place.
local own_dir = select(2, ...)
if type(own_dir) ~= "string" then own_dir = debug.getinfo(1, "S").source:sub(2) end
own_dir = own_dir:match("^(.*)[/\\]init%.lua$") or "."
local own_path = own_dir .. "/?.lua;" .. own_dir .. "/?/init.lua"

-- Finds "bbb.x.y" in bbb's own tree; nil and the places tried when absent.
local function own_file(modname)
  local rest = modname:match("^bbb%.(.+)$")
  if not rest then return nil, "" end
  return package.searchpath(rest, own_path)
end

-- A searcher ahead of package.path, so `require "bbb.nn"` (inside the library
-- too) takes bbb's own file even when package.path lists "./" first.
-- A name under bbb. that the tree lacks is an error, not a search of the
-- other folders: bbb.cli, say, moved to the application, and a ./bbb/cli.lua
-- of the working folder must not answer for it. Only a compiled module of
-- bbb's (bbb.dist_mpi) is looked for in the installed C folders.
local installed_searcher
local function own_searcher(modname)
  local file, tried = own_file(modname)
  if not file and tried ~= "" then
    local loader, where = installed_searcher(modname, true)
    if loader then return loader, where end
    error(("module '%s' is not part of bbb (no such file in %s)"):format(modname, own_dir), 0)
  end
  if not file then return nil end
  local chunk, err = loadfile(file)
  if not chunk then error(("error loading module '%s' from file '%s':\n\t%s"):format(modname, file, err), 0) end
  return chunk, file
end

-- The templates of a search path that do not depend on the working folder
-- (with lenient, those the caller set relative to it, as "build/?.so", but
-- not Lua's default "./?.so", which names whatever folder one stands in).
local function absolute_only(path, lenient)
  local keep = {}
  for t in path:gmatch("[^;]+") do
    if t:sub(1, 1) == "/" or (lenient and t:sub(1, 2) ~= "./" and t:sub(1, 1) ~= "?") then keep[#keep + 1] = t end
  end
  return table.concat(keep, ";")
end

-- Every other module (cjson, argparse, bbb.dist_mpi, a library a script
-- requires) is looked for first in the folders of package.path and then of
-- package.cpath that are absolute: Lua's own order tries "./?.lua" before
-- any C module, so a ./cjson.lua planted in the working folder would run
-- in place of the installed cjson.so. Only a module found in no installed
-- folder comes from the working folder, by the standard searchers after this one.
function installed_searcher(modname, compiled_only)
  local file = not compiled_only and package.searchpath(modname, absolute_only(package.path))
  if file then
    local chunk, err = loadfile(file)
    if not chunk then error(("error loading module '%s' from file '%s':\n\t%s"):format(modname, file, err), 0) end
    return chunk, file
  end
  file = package.searchpath(modname, absolute_only(package.cpath))
    or compiled_only and package.searchpath(modname, absolute_only(package.cpath, true))
  if not file then return nil end
  local sym = "luaopen_" .. (modname:match("^[^-]*-(.*)$") or modname):gsub("%.", "_")
  local loader, err = package.loadlib(file, sym)
  if not loader then error(("error loading module '%s' from file '%s':\n\t%s"):format(modname, file, err), 0) end
  return loader, file
end

local searchers = package.searchers
local installed = false
for _, s in ipairs(searchers) do
  if s == package.bbb_own_searcher then installed = true end
end
if not installed then
  package.bbb_own_searcher = own_searcher
  table.insert(searchers, 2, own_searcher)
  table.insert(searchers, 3, installed_searcher)
end

-- The public API: these names of bbb.core, and the Lua functions below.
-- Everything else in bbb.core (optimizer kernels, fused Bayesian passes,
-- file readers, checkpoint and signal plumbing) is internal and stays there.
local PUBLIC = {
  -- tensors
  "tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "randn", "rand", "dropout_mask", "rand_rows",
  "from_bytes", "is_tensor",
  -- ops as functions (also tensor methods)
  "exp", "log", "log1p", "softplus", "sigmoid", "tanh", "relu", "sqrt", "square", "abs",
  "pow", "clamp", "maximum", "minimum", "logaddexp", "sum", "mean", "max", "argmax",
  "logsumexp", "matmul", "linear", "log_softmax", "softmax", "nll", "reshape", "narrow",
  "index_select", "cat", "t", "transpose", "clone", "detach",
  "conv2d", "max_pool2d", "avg_pool2d", "conv_workspace",
  -- autograd, randomness, runtime
  "set_grad_enabled", "is_grad_enabled", "Generator", "manual_seed",
  "set_num_threads", "get_num_threads", "threads_in_use", "max_threads", "bytes_allocated",
}

local bbb = {}
for _, k in ipairs(PUBLIC) do
  bbb[k] = assert(core[k], k)
end
bbb.version = core.version
bbb.core = core

local Tensor = core.Tensor

--- Runs fn(...) with gradient recording off; returns what fn returns.
-- @usage
--   local w = bbb.ones(2):requires_grad(true)
--   local y = bbb.no_grad(function() return w * 2 end)
--   assert(y:grad_fn() == nil)   -- nothing recorded
function bbb.no_grad(fn, ...)
  local was = core.set_grad_enabled(false)
  local res = table.pack(pcall(fn, ...))
  core.set_grad_enabled(was)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- Mean (or "sum") cross-entropy of logits (B, C) against labels 1..C.
-- @usage
--   local logits = bbb.tensor{ { 2, 0, 0 }, { 0, 3, 0 } }
--   local loss = bbb.cross_entropy(logits, bbb.tensor{ 1, 2 })
--   assert(loss:item() > 0 and loss:item() < 0.2)
function bbb.cross_entropy(logits, labels, reduction)
  if not bbb.is_tensor(logits) then
    error(("cross_entropy: logits must be a (B, C) tensor, got %s"):format(type(logits)), 2)
  end
  local ok, res = pcall(core.nll, logits:log_softmax(), labels, reduction)
  if not ok then error(res, 2) end
  return res
end
Tensor.cross_entropy = bbb.cross_entropy

local HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

--- Gaussian log-likelihood, summed over elements: log N(y | mu, sigma^2).
-- sigma is a number or a tensor broadcastable to mu (e.g. a learned noise).
-- @raise gaussian_loglik: sigma must be > 0, got ... (a sigma, or an element of it, that is not positive)
-- @usage
--   local mu, y = bbb.zeros(3, 1), bbb.ones(3, 1)
--   print(bbb.gaussian_loglik(mu, y, 0.5):item())   -- 3 log N(1 | 0, 0.25)
function bbb.gaussian_loglik(mu, y, sigma)
  local r = y - mu
  if type(sigma) == "number" then
    if not (sigma > 0) then
      error(("gaussian_loglik: sigma must be > 0, got %s"):format(sigma), 2)
    end
    return (r:square() * (-0.5 / (sigma * sigma))):sum()
      - mu:numel() * (math.log(sigma) + HALF_LOG_2PI)
  end
  if not bbb.is_tensor(sigma) then
    error(("gaussian_loglik: sigma must be a number or a tensor, got %s"):format(type(sigma)), 2)
  end
  -- the log of a sigma <= 0 is NaN or -inf, and the loss would carry it on
  local s = sigma:detach()
  local low, total = 1, 0
  if s:numel() > 0 then low, total = -s:neg():max():item(), s:sum():item() end
  if not (low > 0) or total ~= total then
    for i, v in ipairs(s:reshape(-1):totable()) do
      if not (v > 0) then
        error(("gaussian_loglik: sigma must be > 0, got %s at element %d")
          :format(v ~= v and "NaN" or ("%g"):format(v), i), 2)
      end
    end
  end
  local ok, z = pcall(function() return r / sigma end)
  if not ok then error("gaussian_loglik: sigma: " .. tostring(z):gsub("^[^\n]-:%d+: ", ""), 2) end
  local per = z:square() * -0.5 - sigma:log() - HALF_LOG_2PI
  return per:sum()
end

--- save(path, obj): a model, or {model =, optimizer =, ...}, as a
-- safetensors checkpoint (see bbb.checkpoint); written atomically.
-- @usage
--   local path = os.tmpname()
--   bbb.save(path, bbb.nn.bayes_mlp({ 4, 8, 2 }))
--   local net = bbb.load(path)
--   os.remove(path)
--   assert(net.layers[1].n_in == 4)
function bbb.save(path, obj) return bbb.checkpoint.save(path, obj) end

--- load(path [, {generator =, prior =}]) -> model, info: the model rebuilt
-- from the checkpoint, ready for predict.
function bbb.load(path, opts) return bbb.checkpoint.load(path, opts) end

--- flatten(x [, start_dim]) -> x with dimensions start_dim (2 by default)
-- to the last merged into one: (B, C, H, W) -> (B, C H W). A view, as reshape.
-- @raise flatten: argument 1 (x): expected a tensor, got ...
-- @raise flatten: argument 2 (start_dim): must be an integer in 1..N, got ...
-- @usage
--   assert(bbb.flatten(bbb.zeros(8, 1, 28, 28)):size(2) == 784)
function bbb.flatten(x, start_dim)
  start_dim = start_dim or 2
  if not core.is_tensor(x) then
    error(("flatten: argument 1 (x): expected a tensor, got %s"):format(type(x)), 2)
  end
  local n = x:dim()
  if math.type(start_dim) ~= "integer" or start_dim < 1 or start_dim > math.max(n, 1) then
    error(("flatten: argument 2 (start_dim): must be an integer in 1..%d, got %s")
      :format(math.max(n, 1), tostring(start_dim)), 2)
  end
  local shape = {}
  for d = 1, start_dim - 1 do shape[d] = x:size(d) end
  shape[start_dim] = -1
  if x:numel() == 0 then   -- -1 cannot be inferred from no elements
    local m = 1
    for d = start_dim, n do m = m * x:size(d) end
    shape[start_dim] = m
  end
  return x:reshape(shape)
end
core.Tensor.flatten = bbb.flatten

--- A tensor of zeros with t's sizes.
function bbb.zeros_like(t) return core.zeros(t:size()) end
--- A tensor of ones with t's sizes.
function bbb.ones_like(t) return core.ones(t:size()) end

--- help([x]): a one-screen summary, or the signatures and doc of x (a
-- function or a name): bbb.help(bbb.randn), bbb.help "randn", ?bbb.randn.
-- @usage
--   bbb.help(bbb.randn)        -- in the REPL: ?bbb.randn
function bbb.help(x) return require("bbb.help").show(x) end

-- Submodules load lazily so `require "bbb"` stays cheap: bbb.<key> is the
-- module named by its value.
local submodules = {
  nn = "bbb.nn", prior = "bbb.prior", elbo = "bbb.elbo", optim = "bbb.optim", data = "bbb.data",
  metrics = "bbb.metrics", progress = "bbb.progress", testing = "bbb.testing",
  checkpoint = "bbb.checkpoint", train = "bbb.train", json = "bbb.json", dist = "bbb.dist",
  bandit = "bbb.bandit", calibration = "bbb.calibration", laplace = "bbb.laplace", stats = "bbb.stats",
  mcmc = "bbb.mcmc",
}
setmetatable(bbb, {
  __index = function(t, k)
    local name = submodules[k]
    if name then
      local m = package.loaded[name]
      if m == nil then
        local file = own_file(name)
        if not file then
          error(("bbb.%s: not part of this build of bbb (no %s/%s.lua)")
            :format(k, own_dir, (name:gsub("^bbb%.", ""):gsub("%.", "/"))), 2)
        end
        m = require(name)   -- the own searcher above finds `file` first
      end
      rawset(t, k, m)
      return m
    end
  end,
})

return bbb

--- bbb.prior: priors over weights.
-- Gaussian, ScaleMixture and Laplace run inside the fused C sampling pass.
-- Any table with log_prob(w) -> 0-d tensor, built from differentiable tensor
-- ops, is a prior too: it is called once per layer per step on the sampled
-- weights and differentiated by the tape.
local core = require "bbb.core"

local prior = {}

-- The C priors, from the registry the core was built with (BBB_PRIORS in
-- src/bayes/bayes.h): {kind =, label =, params = {names}, rules =}, in its
-- order, and by kind. Descriptions, configs and from_config follow it, so a
-- prior added there needs nothing here.
local KINDS = core.prior_kinds()
local KIND = {}
for _, k in ipairs(KINDS) do KIND[k.kind] = k end

local CPrior = {}
CPrior.__index = CPrior

function CPrior:log_prob(w) return core.prior_log_prob(self, w) end

function CPrior:__tostring()
  local k, parts = KIND[self.kind], {}
  for i, name in ipairs(k.params) do parts[i] = ("%s=%g"):format(name, self[name]) end
  return ("%s{%s}"):format(k.label, table.concat(parts, ", "))
end

-- Called from the constructors, never as a tail call: its error level
-- counts their frame, so a refusal points at their caller.
local function make(fields)
  local p = setmetatable(fields, CPrior)
  local ok, err = pcall(core.check_prior, p)
  if not ok then error(err, 3) end
  return p
end

local function num(opts, key, default, what)
  local v = opts[key]
  if v == nil then v = default end
  if type(v) ~= "number" then
    error(("%s prior: %s must be a number, got %s"):format(what, key, type(v)), 3)
  end
  return v
end

--- N(0, sigma^2)
-- @usage
--   local p = bbb.prior.Gaussian{ sigma = 1 }
--   print(p:log_prob(bbb.zeros(3)):item())   -- 3 log N(0 | 0, 1)
function prior.Gaussian(opts)
  opts = opts or {}
  local p = make({ kind = "gaussian", sigma = num(opts, "sigma", 1, "Gaussian") })
  return p
end

--- pi N(0, sigma1^2) + (1 - pi) N(0, sigma2^2), the paper's prior.
-- @usage
--   local p = bbb.prior.ScaleMixture{ pi = 0.5, sigma1 = 1, sigma2 = math.exp(-6) }
--   local net = bbb.nn.bayes_mlp({ 784, 400, 10 }, { prior = p })
function prior.ScaleMixture(opts)
  opts = opts or {}
  local p = make({ kind = "mixture", pi = num(opts, "pi", 0.5, "ScaleMixture"),
                   sigma1 = num(opts, "sigma1", 1, "ScaleMixture"),
                   sigma2 = num(opts, "sigma2", math.exp(-6), "ScaleMixture") })
  return p
end

--- Laplace(0, b)
-- @usage
--   local p = bbb.prior.Laplace{ b = 0.1 }
--   print(bbb.prior.describe(p), p:log_prob(bbb.zeros(2)):item())
function prior.Laplace(opts)
  opts = opts or {}
  local p = make({ kind = "laplace", b = num(opts, "b", 1, "Laplace") })
  return p
end

--- True for priors the fused C pass evaluates itself.
function prior.is_fused(p)
  return getmetatable(p) == CPrior
end

--- describe(p) -> a short name for any prior: a C prior's parameters, a
-- Lua prior's `name` field, or where its log_prob was written.
-- @usage
--   print(bbb.prior.describe(bbb.prior.ScaleMixture{ pi = 0.25, sigma1 = 1, sigma2 = math.exp(-7) }))
function prior.describe(p)
  if prior.is_fused(p) then return tostring(p) end
  local mt = getmetatable(p)
  if mt and mt.__tostring then return tostring(p) end
  if type(p) == "table" and type(p.name) == "string" then return p.name end
  if type(p) == "table" and type(p.log_prob) == "function" then
    local info = debug.getinfo(p.log_prob, "S")
    return ("LuaPrior(%s:%d)"):format(info.short_src, info.linedefined)
  end
  return tostring(p)
end

--- A table describing p (saved in checkpoints): the C priors' parameters,
-- or {kind = "lua", name = tostring(p)} for a prior written in Lua, which
-- must be passed again when the model is loaded.
-- @usage
--   local c = bbb.prior.config(bbb.prior.Gaussian{ sigma = 0.5 })
--   assert(bbb.prior.describe(bbb.prior.from_config(c)) == bbb.prior.describe(bbb.prior.Gaussian{ sigma = 0.5 }))
function prior.config(p)
  if prior.is_fused(p) then
    local c = { kind = p.kind }
    for _, name in ipairs(KIND[p.kind].params) do c[name] = p[name] end
    return c
  end
  return { kind = "lua", name = prior.describe(p), file = p.file, file_hash = p.file_hash }
end

local fnv1a = core.sys.fnv1a

--- from_file(path [, hash]) -> the prior a Lua file returns (see
-- examples/priors/student_t.lua). The file runs in its own environment (the
-- globals readable, none written) and must return a table with
-- log_prob(self, w). p.file and p.file_hash (of its text) are set, so a
-- checkpoint can find it again; with hash given, a file whose text changed
-- since is refused.
-- @raise prior file 'PATH' does not exist / is a ..., not a file
-- @raise prior file 'PATH' must return a table with log_prob(self, w), got ...
-- @raise prior file 'PATH' changed since the run was saved (with hash given)
-- @usage
--   local p = bbb.prior.from_file("examples/priors/student_t.lua")
--   print(bbb.prior.describe(p))
function prior.from_file(path, hash)
  if type(path) ~= "string" then error("prior.from_file: argument 1 (path): expected a string", 2) end
  local kind = require("bbb.core").sys.kind(path, true)   -- what a link leads to: a FIFO would block
  if kind == nil then error(("prior file '%s' does not exist"):format(path), 2) end
  if kind ~= "file" then error(("prior file '%s' is a %s, not a file"):format(path, kind), 2) end
  local f, err = io.open(path, "rb")
  if not f then error(("cannot read the prior file: %s"):format(err), 2) end
  local text = f:read("a")
  f:close()
  local h = fnv1a(text)
  if hash and hash ~= h then
    error(("prior file '%s' changed since the run was saved (hash %s, now %s)"):format(path, hash, h), 2)
  end
  local env = setmetatable({}, { __index = _G })
  local chunk, cerr = load(text, "@" .. path, "t", env)
  if not chunk then error(("prior file '%s': %s"):format(path, cerr), 2) end
  local ok, p = pcall(chunk)
  if not ok then error(("prior file '%s' failed: %s"):format(path, tostring(p)), 2) end
  if type(p) ~= "table" or type(p.log_prob) ~= "function" then
    error(("prior file '%s' must return a table with log_prob(self, w), got %s"):format(path, type(p)), 2)
  end
  local okc, cerr2 = pcall(prior.check, p, "prior file '" .. path .. "'")
  if not okc then error(cerr2, 2) end
  p.name = p.name or path:match("([^/]+)%.lua$")
  p.file, p.file_hash = path, h
  return p
end

-- A constructor for a C prior of the registry that has none written above
-- (with defaults and examples of its own): prior[label], taking every
-- parameter by name.
local function constructor(k)
  --- A C prior of the registry (BBB_PRIORS in src/bayes/bayes.h) that has
  -- no constructor of its own here: named by its row's label, it takes the
  -- row's parameters by name, every one of them given.
  return function(opts)
    opts = opts or {}
    local fields = { kind = k.kind }
    for _, name in ipairs(k.params) do fields[name] = num(opts, name, nil, k.label) end
    local p = make(fields)
    return p
  end
end

-- kind -> the name of its constructor in prior, for from_config.
local BUILDERS = {}
for _, k in ipairs(KINDS) do
  if prior[k.label] == nil then prior[k.label] = constructor(k) end
  BUILDERS[k.kind] = k.label
end

-- given_for(c, given) -> given, checked against the Lua prior config c
-- describes; an error that says how to pass the prior when given is nil.
local function given_for(c, given)
  local file = type(c.file) == "string" and c.file or nil
  if given == nil then
    error(("the model uses a prior written in Lua (%s%s), and opening a model never runs code "
      .. "it names: give the prior file for this run (--prior FILE, or "
      .. "bbb.load(path, {prior = bbb.prior.from_file(FILE)}))")
      :format(tostring(c.name), file and (", trained with " .. file) or ""), 0)
  end
  prior.check(given, "the prior given for the model")
  local want = type(c.file_hash) == "string" and c.file_hash or nil
  if want and given.file_hash and given.file_hash ~= want then
    error(("the prior file given (%s, hash %s) is not the one the model was trained with (%s, hash %s)")
      :format(tostring(given.file), given.file_hash, tostring(file), want), 0)
  end
  return given
end

--- The prior a config describes (the inverse of prior.config). A prior
-- written in Lua is never loaded from the file the config names: the config
-- comes from a file that anyone may have written, so opening it must not run
-- code. Such a prior comes from `given`, which the caller loaded from a path
-- its user named for this run; when both carry a hash they must agree.
-- `given` is ignored for the C priors, which the config describes whole.
function prior.from_config(c, given)
  if type(c) ~= "table" then
    error(("prior.from_config: expected a table, got %s"):format(type(c)), 2)
  end
  if c.kind == "lua" then return given_for(c, given) end
  local name = BUILDERS[c.kind]
  if not name then error(("prior.from_config: unknown prior kind %s"):format(tostring(c.kind)), 2) end
  local ok, p = pcall(prior[name], c)
  if not ok then error(p, 2) end
  return p
end

--- Checks that p can serve as a prior; errors name the problem.
-- @usage
--   bbb.prior.check({ log_prob = function(_, w) return (w * w):sum() * -0.5 end })
--   assert(not pcall(bbb.prior.check, { log_prob = function(w) return w end }))   -- takes self first
function prior.check(p, where)
  where = where or "prior"
  if type(p) ~= "table" or type(p.log_prob) ~= "function" then
    -- level 0: check is reached at any depth; the message names the caller
    error(("%s: a prior is a table with a log_prob(w) function, got %s"):format(where, type(p)), 0)
  end
  -- called as p:log_prob(w): a function(w) would get the prior as w
  if not prior.is_fused(p) then
    local info = debug.getinfo(p.log_prob, "u")
    if info.nparams == 1 and not info.isvararg then
      error(("%s: the prior's log_prob takes one parameter, but it is called as "
        .. "p:log_prob(w) with the prior first: write log_prob = function(self, w) "
        .. "(or function(_, w))"):format(where), 3)
    end
  end
  return p
end

--- Analytic KL(q || p) summed over weights, for a Gaussian prior; q has
-- means mu and standard deviations sigma (tensors).
function prior.gaussian_kl(p, mu, sigma)
  if not (prior.is_fused(p) and p.kind == "gaussian") then
    error(("kl = 'analytic' needs a Gaussian prior, got %s"):format(tostring(p)), 3)
  end
  local s2 = p.sigma * p.sigma
  -- log(sp / s) + (s^2 + mu^2) / (2 sp^2) - 1/2
  local t = (sigma:square() + mu:square()) * (0.5 / s2) - sigma:log()
  return t:sum() + mu:numel() * (math.log(p.sigma) - 0.5)
end

return prior

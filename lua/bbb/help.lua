--- bbb.help: help on the REPL. help() prints a one-screen summary; help(f)
-- or help "name" prints f's signatures and doc paragraph, taken from the doc
-- comments in bbb's sources (gathered when bbb was built, see bbb.core.docs).
local help = {}

help.SUMMARY = [[
bbb: Bayes by Backprop.  help(bbb.randn) or ?bbb.randn for one function.
  tensors: bbb.tensor{{1,2},{3,4}}, bbb.zeros(2,3), bbb.randn(2,3), x.shape, x:size()
  ops:     + - * / ^, x:exp(), x:softplus(), x:sum(dim), x:matmul(y), bbb.linear(x, W, b)
  grad:    w:requires_grad(true); loss:backward(); w.grad; bbb.no_grad(fn)
  layers:  bbb.nn.Sequential{bbb.nn.BayesLinear(784, 400), bbb.nn.ReLU(), ...},
           bbb.nn.bayes_mlp{784, 400, 10}; net:predict(x, {samples = 10})
  priors:  bbb.prior.Gaussian{sigma=1}, bbb.prior.ScaleMixture{pi=0.5, sigma1=1, sigma2=math.exp(-6)},
           or any table with log_prob = function(self, w) ... end
  loss:    elbo = bbb.elbo.ELBO{n_data=60000, batch_size=128}; elbo:loss(net, x, y)
  optim:   bbb.optim.Adam(net, {lr=1e-3}); opt:zero_grad(); loss:backward(); opt:step()
  seeds:   bbb.manual_seed(1); g = bbb.Generator(7); bbb.randn({3}, 0, 1, g)
  threads: bbb.set_num_threads(2)]]

local docs_cache

--- docs() -> {name = {sig = {...}, doc = "..."}} from the build's doc comments.
function help.docs()
  if not docs_cache then
    local core = require "bbb.core"
    docs_cache = core.docs and assert(load(core.docs(), "=bbb docs"))() or {}
  end
  return docs_cache
end

-- Where a function may live, with the prefix its name is written with.
local function places()
  local bbb, core = require "bbb", require "bbb.core"
  local out = { { bbb, "bbb." }, { core.Tensor, "Tensor:" }, { core, "bbb.core." } }
  for name, mod in pairs(package.loaded) do
    -- bbb.app.plot is shown as plot., its short name
    local short = type(name) == "string" and name:match("^bbb%.([%w_%.]+)$")
    if short then short = short:gsub("^app%.", "") end
    if short and short ~= "core" and type(mod) == "table" then
      out[#out + 1] = { mod, short .. "." }
      for k, v in pairs(mod) do   -- classes inside a module (nn.BayesLinear, ...)
        if type(v) == "table" and type(k) == "string" and k:match("^%u") then
          out[#out + 1] = { v, k .. ":" }
        end
      end
    end
  end
  return out
end

-- The names f goes by, as "prefix" and bare name.
local function names_of(f)
  local found = {}
  for _, p in ipairs(places()) do
    for k, v in pairs(p[1]) do
      if v == f and type(k) == "string" then found[#found + 1] = { p[2], k } end
    end
  end
  return found
end

local function entry(docs, prefix, name)
  local qualified = { prefix .. name, prefix:gsub(":$", ".") .. name }
  for _, q in ipairs(qualified) do
    if docs[q] then return docs[q], q end
  end
  return docs[name], name
end

local TAGS = { param = "argument ", ["return"] = "returns ", raise = "error: ", usage = "example:" }

--- untag(doc) -> doc with the LDoc tags of the reference (@param, @return,
-- @raise, @usage) as words: "argument x ...", "returns ...", "error: ...".
function help.untag(doc)
  local out = ("\n" .. doc):gsub("\n@(%a+) ?", function(tag) return TAGS[tag] and "\n" .. TAGS[tag] end)
  return out:sub(2)
end

--- text(x) -> the help text for x (a function or a name), or nil and why.
-- @usage
--   print(require("bbb.help").text(bbb.nn.bayes_mlp):match("^[^\n]+"))   -- the name it goes by
function help.text(x)
  local docs = help.docs()
  local d, shown
  if type(x) == "string" then
    local name = x:gsub("^bbb%.", "")
    local f = rawget(require "bbb", name)
    if type(f) == "function" then return help.text(f) end
    d, shown = docs[x] or docs["bbb." .. name] or docs[name], x
  elseif type(x) == "function" then
    for _, n in ipairs(names_of(x)) do
      d, shown = entry(docs, n[1], n[2])
      if d then shown = n[1] .. n[2]; break end
    end
  elseif type(x) == "table" and (getmetatable(x) or {}).__name then
    local name = getmetatable(x).__name
    -- a layer: its class's doc, or its constructor's
    d, shown = docs[name] or docs["nn." .. name] or docs[name .. ":init"], name
  end
  if not d then
    return nil, ("no help for %s"):format(type(x) == "string" and x or tostring(x))
  end
  local lines = {}
  for _, s in ipairs(d.sig) do lines[#lines + 1] = "  " .. s end
  if d.doc ~= "" then lines[#lines + 1] = help.untag(d.doc) end
  return (shown and (shown .. "\n") or "") .. table.concat(lines, "\n")
end

--- show([x]): prints the summary, or the help of x.
function help.show(x)
  if x == nil then print(help.SUMMARY); return end
  local t, err = help.text(x)
  print(t or err)
end

return help

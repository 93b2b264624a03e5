--- genref: the reference pages (doc/reference/*.md), one per public module,
-- from the same doc comments bbb.help shows. Run by bbblua (it loads bbb to
-- list the public names):
--   build/bbblua cmake/gendoc.lua --reference doc/reference
-- A public name is a function or class a module table holds (names with a
-- leading underscore and metamethods aside), a method of those classes, and
-- a method of the objects a page lists (an ELBO, an optimizer, a bar). Its
-- doc comment is the "---" block above its definition or above the line
-- that names it in the module (`M.key = ...`), or a block opening with
-- `@function key`. Inside a block, LDoc's tags give the sections:
--   @param name text   @return text   @raise text   @usage (then Lua lines)
-- @usage lines become a ```lua block, which tests/integration/docs_spec.lua
-- runs with the page's other blocks, in order.
local genref = {}

local bbb = require "bbb"

-- The pages: file, module, title, the objects whose methods are public too.
local function pages()
  local nn, elbo, optim, progress = bbb.nn, bbb.elbo, bbb.optim, bbb.progress
  local function opt()
    return optim.SGD({ bbb.zeros(1):requires_grad(true) }, { lr = 0.1 })
  end
  return {
    { file = "bbb.md", module = "bbb", title = "tensors, autograd, randomness, threads",
      objects = { { "Tensor", function() return bbb.core.Tensor end, "x" } } },
    { file = "nn.md", module = "bbb.nn", title = "layers and networks" },
    { file = "nn.fused.md", module = "bbb.nn.fused", title = "a training step without the graph",
      objects = { { "plan", function() return getmetatable(
        nn.fused.plan(nn.mlp({ 1, 1 }, { generator = bbb.Generator(1) }),
          elbo.ELBO{ n_data = 1, batch_size = 1, likelihood = "gaussian", sigma = 1 })) end, "plan" } } },
    { file = "prior.md", module = "bbb.prior", title = "priors over weights" },
    { file = "elbo.md", module = "bbb.elbo", title = "the variational free energy",
      objects = { { "ELBO", function() return getmetatable(elbo.ELBO{ n_data = 1, batch_size = 1 }) end, "elbo" } } },
    { file = "optim.md", module = "bbb.optim", title = "optimizers and schedules",
      objects = { { "optimizer", function() return getmetatable(opt()) end, "opt" },
        { "schedule", function() return getmetatable(optim.schedule.exponential(opt(), 0.9)) end, "sched" } } },
    { file = "train.md", module = "bbb.train", title = "the training loop" },
    { file = "data.md", module = "bbb.data", title = "data sets and batches" },
    { file = "metrics.md", module = "bbb.metrics", title = "scores of predictive distributions" },
    { file = "checkpoint.md", module = "bbb.checkpoint", title = "safetensors checkpoints" },
    { file = "progress.md", module = "bbb.progress", title = "progress bars with an ETA",
      objects = { { "bar", function() return getmetatable(progress.new{ total = 1, mode = "off" }) end, "bar" } } },
    { file = "testing.md", module = "bbb.testing", title = "gradient checks" },
    { file = "json.md", module = "bbb.json", title = "JSON" },
    { file = "dist.md", module = "bbb.dist", title = "data-parallel training over MPI" },
    { file = "bandit.md", module = "bbb.bandit", title = "contextual bandits and their agents" },
    { file = "help.md", module = "bbb.help", title = "help in the REPL" },
  }
end

-- Methods every layer has: documented once, under nn.Module.
local CONTRACT = { init = true, forward = true, config = true, describe = true, own_parameters = true,
  own_buffers = true, children = true }

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function lines_of(path)
  local t = {}
  for l in (read(path) .. "\n"):gmatch("(.-)\n") do t[#t + 1] = l end
  return t
end

-- The "---" block that ends on line i - 1 of lines, as a list of its lines.
local function block_above(lines, i)
  local c, j = {}, i - 1
  while j > 0 and lines[j]:match("^%s*%-%-") do
    table.insert(c, 1, (lines[j]:gsub("^%s*%-%-%-?%s?", "")))
    if lines[j]:match("^%s*%-%-%-") then return c end
    j = j - 1
  end
  return nil
end

-- The Lua files of a module: its file, and for a package every file in it.
local function module_files(root, name)
  local rel = name:gsub("^bbb%.?", ""):gsub("%.", "/")
  local dir = root .. "/lua/bbb" .. (rel ~= "" and "/" .. rel or "")
  if rel == "" then return { dir .. "/init.lua" } end
  local files = {}
  local single = io.open(dir .. ".lua")
  if single then single:close(); files[1] = dir .. ".lua" end
  local p = io.popen(("ls %q/*.lua 2>/dev/null"):format(dir))
  for f in p:lines() do
    if f:match("/init%.lua$") then table.insert(files, 1, f) else files[#files + 1] = f end
  end
  p:close()
  return files
end

-- The first line at or after i that is not a comment: the line, its number.
local function next_code(lines, i)
  while lines[i] and lines[i]:match("^%-%-") do i = i + 1 end
  return lines[i], i
end

local function escape(k) return (k:gsub("%W", "%%%0")) end

-- The doc block for key in the files, found by the line that defines or
-- names it; else a block opening with key's call (`key(...)`, `key{...}`)
-- above another name's definition (`local function key_raw`).
local function find_block(files, key, cache)
  local k, fallback = escape(key), nil
  local pats = { "^function%s+[%w_]+[.:]" .. k .. "%s*%(", "^function%s+[%w_]+%.[%w_]+%." .. k .. "%s*%(",
    "^local%s+function%s+" .. k .. "%s*%(", "^[%w_%.]+%." .. k .. "%s*=", "^local%s+" .. k .. "%s*=" }
  for _, f in ipairs(files) do
    cache[f] = cache[f] or lines_of(f)
    local lines = cache[f]
    for i, line in ipairs(lines) do
      for _, p in ipairs(pats) do
        if line:match(p) then
          local b = block_above(lines, i)
          if b then return b, line end
        end
      end
      if line:match("^%-%-%-%s*" .. k .. "%s*[%(%{]") and not (lines[i - 1] or ""):match("^%-%-") then
        fallback = fallback or block_above(lines, select(2, next_code(lines, i)))
      end
      if line:match("^%-%-%-%s*@function%s+" .. k .. "%s*$") then
        local b, j = {}, i + 1
        while lines[j] and lines[j]:match("^%-%-") do b[#b + 1] = lines[j]:gsub("^%-%-%s?", ""); j = j + 1 end
        return b, nil
      end
    end
  end
  return fallback, nil
end

-- The doc block of a Lua function from where it is defined, and that line.
local function block_of_function(f, cache)
  local info = debug.getinfo(f, "S")
  if info.what ~= "Lua" or info.source:sub(1, 1) ~= "@" then return nil end
  local path = info.source:sub(2)
  cache[path] = cache[path] or lines_of(path)
  local lines = cache[path]
  return block_above(lines, info.linedefined), lines[info.linedefined]
end

genref.find_block, genref.block_of_function = find_block, block_of_function

-- Splits a block into its text and its tagged sections.
local function sections(block)
  local s = { text = {}, params = {}, returns = {}, raises = {}, usage = {} }
  local list, in_usage = nil, false   -- the tag's list an indented line continues
  local LISTS = { param = s.params, ["return"] = s.returns, raise = s.raises }
  for _, l in ipairs(block) do
    local tag, rest = l:match("^%s*@(%w+)%s*(.*)$")
    if LISTS[tag] then list, in_usage = LISTS[tag], false; list[#list + 1] = rest
    elseif tag == "usage" then list, in_usage = nil, true; if rest ~= "" then s.usage[#s.usage + 1] = rest end
    elseif in_usage then s.usage[#s.usage + 1] = (l:gsub("^  ", ""))
    elseif list and l:match("^%s+%S") then list[#list] = list[#list] .. " " .. l:gsub("^%s+", "")
    else list = nil; s.text[#s.text + 1] = l end
  end
  return s
end
genref.sections = sections

-- The signature in the source: `function M.key(a, b)` -> `shown(a, b)`.
local function source_signature(line, shown)
  local args = line and line:match("^[^(]*(%b())")
  return args and shown .. args or nil
end

-- A doc text opening with a call of key (`key(a) -> r: ...`, `M.key{...}`,
-- `x = obj:key(...)`): that call, up to where its brackets close and the
-- "-> result" after it, and the rest of the text; else nil and the text.
-- Whether the word name appears in s.
local function names_in(name, s)
  return name ~= nil and s:find("%f[%w_]" .. name .. "%f[^%w_]") ~= nil
end

local function split_signature(text, key)
  local start = text:find("^[%w_%.:, =]-" .. escape(key) .. "%s*[%(%{]")
  if not start then return nil, text end
  local depth, i = 0, 1
  repeat
    local c = text:sub(i, i)
    if c == "(" or c == "{" or c == "[" then depth = depth + 1
    elseif c == ")" or c == "}" or c == "]" then depth = depth - 1; if depth == 0 then break end end
    i = i + 1
  until i > #text
  if depth ~= 0 then return nil, text end
  local after, tail = text:sub(i + 1), ""
  if after:match("^%s*%->") then   -- to the first ": " or ". " outside brackets
    local d, j = 0, 1
    while j <= #after do
      local c = after:sub(j, j)
      if c:match("[%(%[{]") then d = d + 1 elseif c:match("[%)%]}]") then d = d - 1
      elseif d == 0 and c:match("[:.]") and after:sub(j + 1, j + 1):match("^%s?$") then break
      elseif c == "\n" and (after:sub(j + 1, j + 1) == "\n" or names_in(after:match("^%s*([%w_]+):%s", j + 1),
          text:sub(1, i) .. after:sub(1, j))) then
        j = j - 1; break   -- a blank line, or the next line explains a name of the signature ("opts: ...")
      end
      j = j + 1
    end
    tail = after:sub(1, j)
  end
  local rest = after:sub(#tail + 1):gsub("^[:.]?%s*", "")
  tail = tail:gsub("[:.]$", "")
  local sig = (text:sub(1, i) .. tail):gsub("%s*\n%s*", " ")
  return sig, rest
end
genref.split_signature = split_signature

-- "-> what" on a signature line, up to the first ": " or ". ".
local function returns_of(sig)
  local lhs = sig and sig:match("^([%w_, ]-)%s*=[^=]")
  if lhs and lhs ~= "" then return lhs end
  local r = sig and sig:match("%->%s*(.-)%s*$")
  if not r or r == "" then return nil end
  return (r:gsub(":%s.*$", ""):gsub("%.%s.*$", ""))
end

-- The doc text as markdown lines: runs of indented lines (option tables,
-- code) go in a ```text block, where markdown keeps their columns.
local function layout(text)
  local out, fenced = {}, false
  for l in (text .. "\n"):gmatch("(.-)\n") do
    local indented = l:match("^  +%S") ~= nil
    if indented ~= fenced then
      out[#out + 1] = "```" .. (indented and "text" or "")
      fenced = indented
    end
    out[#out + 1] = l
  end
  if fenced then out[#out + 1] = "```" end
  return out
end

-- One entry: {name =, sigs =, block =} -> markdown lines.
local function render_entry(e)
  local s = sections(e.block or {})
  local out = { "### `" .. e.name .. "`", "" }
  local text = table.concat(s.text, "\n"):gsub("^%s+", ""):gsub("%s+$", "")
  if not e.c then
    local sig, rest = split_signature(text, e.key)
    if sig then e.sigs, text = { sig }, rest:gsub("^%l", string.upper); e.c_returns = returns_of(sig) end
  end
  if #e.sigs > 0 then
    out[#out + 1] = "```text"
    for _, sig in ipairs(e.sigs) do out[#out + 1] = sig end
    out[#out + 1] = "```"
    out[#out + 1] = ""
  end
  if text ~= "" then
    for _, l in ipairs(layout(text)) do out[#out + 1] = l end
    out[#out + 1] = ""
  end
  local function list(title, items)
    if #items == 0 then return end
    out[#out + 1] = "**" .. title .. "**"
    out[#out + 1] = ""
    for _, it in ipairs(items) do
      local name, rest = it:match("^([%w_%.%[%]]+)%s+(.*)$")
      out[#out + 1] = title == "Arguments" and name and ("- `%s`: %s"):format(name, rest) or "- " .. it
    end
    out[#out + 1] = ""
  end
  local returns = s.returns
  if #returns == 0 and e.c_returns then returns = { e.c_returns } end
  list("Arguments", s.params)
  list("Returns", returns)
  list("Errors", s.raises)
  if #s.usage > 0 then
    out[#out + 1] = "**Example**"
    out[#out + 1] = ""
    out[#out + 1] = "```lua"
    for _, l in ipairs(s.usage) do out[#out + 1] = l end
    out[#out + 1] = "```"
    out[#out + 1] = ""
  end
  return out
end
genref.render_entry, genref.returns_of = render_entry, returns_of

-- A class's doc when no line naming it has one: its init's, or the header
-- of the file defining init when that opens with the class's name.
local function class_block(cls, key, cache)
  local init = rawget(cls, "init")
  if type(init) ~= "function" then return nil end
  local b = block_of_function(init, cache)
  if b then return b end
  local path = debug.getinfo(init, "S").source:sub(2)
  local lines = cache[path] or lines_of(path)
  if not lines[1]:match("^%-%-%-%s*" .. escape(key) .. "[%(%{]") then return nil end
  local h = {}
  for _, l in ipairs(lines) do
    if not l:match("^%-%-") then break end
    h[#h + 1] = l:gsub("^%-%-%-?%s?", "")
  end
  return h
end

-- The entries of one table t shown as prefix..key (prefix "bbb.nn." or
-- "net:"), their doc blocks looked up in files (where defined first, for
-- methods only there); cdocs for C functions.
local function entries(t, prefix, files, cdocs, cache, skip, methods)
  local keys = {}
  for k, v in pairs(t) do
    if type(k) == "string" and not k:match("^_") and not (skip and skip[k])
      and (type(v) == "function" or (type(v) == "table" and k:match("^%u.*%l"))) then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v, e = t[k], { name = prefix .. k, key = k, sigs = {} }
    local found, line
    if not methods then found, line = find_block(files, k, cache) end
    if type(v) == "function" and debug.getinfo(v, "S").what == "C" then
      local d = cdocs[k]
      if d then e.sigs, e.block = d.sig, d.lines end
      e.c = true
      e.c_returns = d and returns_of(d.sig[1])
    else
      if type(v) == "function" then
        local b, l = block_of_function(v, cache)
        if b or methods then found, line = b, l end
      end
      e.block = found
      local sig = type(v) == "function" and source_signature(line, prefix .. k)
      if type(v) == "function" and not sig then
        sig = source_signature(select(2, block_of_function(v, cache)), prefix .. k)
      end
      e.sigs = { sig or (type(v) == "table" and prefix .. k) or nil }
      if type(v) == "table" then e.class = v; e.block = e.block or class_block(v, k, cache) end
    end
    out[#out + 1] = e
  end
  return out
end
genref.entries = entries

local function header_block(files, cache)
  local f = files[1]
  cache[f] = cache[f] or lines_of(f)
  local b = {}
  for _, l in ipairs(cache[f]) do
    if not l:match("^%-%-") then break end
    b[#b + 1] = l:gsub("^%-%-%-?%s?", "")
  end
  return table.concat(b, "\n")
end

-- A page: {lines =, missing = {names without a doc comment}}.
local function page(root, p, cdocs, cache)
  local mod = assert(package.loaded[p.module] or require(p.module))
  local files = module_files(root, p.module)
  local short = p.module:gsub("^bbb%.", "")
  local prefix = p.module == "bbb" and "bbb." or short .. "."
  local out = { ("# `%s`: %s"):format(p.module, p.title), "",
    "<!-- generated by cmake/gendoc.lua from the doc comments: do not edit -->", "" }
  for _, l in ipairs(layout(header_block(files, cache))) do out[#out + 1] = l end
  out[#out + 1] = ""
  out[#out + 1] = ("Source: %s. Back to the [index](README.md)."):format(table.concat(
    (function() local t = {} for i, f in ipairs(files) do t[i] = "`" .. f:sub(#root + 2) .. "`" end return t end)(), ", "))
  out[#out + 1] = ""
  local missing, list = {}, {}
  local function add(es)
    for _, e in ipairs(es) do
      list[#list + 1] = e
      if not e.block then missing[#missing + 1] = e.name end
    end
  end
  for _, e in ipairs(entries(mod, prefix, files, cdocs, cache)) do
    add { e }
    if e.class then
      local skip = e.class ~= bbb.nn.Module and p.module == "bbb.nn" and CONTRACT or nil
      add(entries(e.class, e.key .. ":", files, cdocs, cache, skip, true))
    end
  end
  for _, o in ipairs(p.objects or {}) do
    local ok, t = pcall(o[2])
    assert(ok and type(t) == "table", ("genref: %s's %s: %s"):format(p.module, o[1], tostring(t)))
    add(entries(t.__index ~= t and type(t.__index) == "table" and t.__index or t, o[3] .. ":", files,
      cdocs, cache, nil, true))
  end
  for _, e in ipairs(list) do
    for _, l in ipairs(render_entry(e)) do out[#out + 1] = l end
  end
  return { lines = out, missing = missing }
end

-- The pages, and one more for every module of lua/bbb/ the list lacks (a
-- new module gets its page without an edit here), titled from the first
-- line of its header ("--- bbb.name: title.").
local function with_unlisted(root, list)
  local listed = {}
  for _, p in ipairs(list) do listed[p.module] = true end
  local ls = io.popen(("cd %q/lua/bbb && ls *.lua */init.lua 2>/dev/null"):format(root))
  local found = {}
  for f in ls:lines() do found[#found + 1] = "bbb." .. f:gsub("/init%.lua$", ""):gsub("%.lua$", "") end
  ls:close()
  table.sort(found)
  for _, m in ipairs(found) do
    if not listed[m] and m ~= "bbb.init" and m ~= "bbb.app" then
      local first = lines_of(module_files(root, m)[1])[1] or ""
      local title = first:match("^%-%-%-%s*[%w_.]+:%s*(.-)%.?$") or m
      list[#list + 1] = { file = m:gsub("^bbb%.", "") .. ".md", module = m, title = title }
    end
  end
  return list
end

-- {file = text} for every page and the index, and the undocumented names.
function genref.generate(root, cdocs)
  local cache, files, missing = {}, {}, {}
  local index = { "# Reference", "", "<!-- generated by cmake/gendoc.lua from the doc comments: do not edit -->", "",
    "One page per public module of the library, generated from the doc comments",
    "that the REPL's `?name` shows. Regenerate after changing one:", "",
    "```sh", "build/bbblua cmake/gendoc.lua --reference doc/reference", "```", "",
    "Every function checks its arguments before any work and raises",
    "`bbb.fn: argument N (name): what was wrong` (or `module.fn: ...`), never a",
    "crash; the Errors of an entry are the other failures it reports.", "" }
  for _, p in ipairs(with_unlisted(root, pages())) do
    local pg = page(root, p, cdocs, cache)
    files[p.file] = table.concat(pg.lines, "\n"):gsub("\n\n+", "\n\n"):gsub("%s*$", "\n")
    for _, m in ipairs(pg.missing) do missing[#missing + 1] = p.module .. ": " .. m end
    index[#index + 1] = ("- [`%s`](%s): %s"):format(p.module, p.file, p.title)
  end
  files["README.md"] = table.concat(index, "\n") .. "\n"
  return files, missing
end

return genref

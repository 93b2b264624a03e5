--- bbb.app.repl: what bbblua's REPL uses to show results and complete names.
-- show(v) is a readable one-value text (tensors, sizes, modules, priors,
-- ELBO objects, plain tables); print(...) shows each result on its own
-- line; complete(word) lists the completions of `a.b.c` or `x:me`.
local repl = {}

local MAX_ITEMS, MAX_DEPTH = 16, 2

local function is_identifier(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local show

-- {1, 2, 3}, {a = 1, b = "x"}, nested to MAX_DEPTH, at most MAX_ITEMS entries.
local function show_table(t, depth, seen)
  if seen[t] then return "{<cycle>}" end
  if depth > MAX_DEPTH then return "{...}" end
  seen[t] = true
  local parts, n = {}, #t
  for i = 1, math.min(n, MAX_ITEMS) do parts[#parts + 1] = show(t[i], depth + 1, seen, true) end
  local keys = {}
  for k in pairs(t) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_order)
  for _, k in ipairs(keys) do
    if #parts >= MAX_ITEMS then break end
    local ks = is_identifier(k) and k or "[" .. show(k, depth + 1, seen, true) .. "]"
    parts[#parts + 1] = ks .. " = " .. show(t[k], depth + 1, seen, true)
  end
  seen[t] = nil
  if n + #keys > MAX_ITEMS then parts[#parts + 1] = ("... (%d entries)"):format(n + #keys) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- show(v) -> a readable text for one value.
function show(v, depth, seen, nested)
  local t = type(v)
  if t == "string" then return nested and ("%q"):format(v) or v end
  if t ~= "table" then
    if nested and t == "userdata" then
      local s = tostring(v)
      if s:find("\n") then return s:match("%[(.-)%]%s*$") or s end   -- a tensor inside a table
      return s
    end
    return tostring(v)
  end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  if type(v.log_prob) == "function" then return require("bbb.prior").describe(v) end
  return show_table(v, depth or 1, seen or {})
end
repl.show = show

--- print(...): each value on its own line, as show() writes it.
function repl.print(...)
  for i = 1, select("#", ...) do
    io.write(show((select(i, ...))), "\n")
  end
  io.flush()
end

-- The tables whose keys complete after `v.` or `v:`.
local function key_sources(v, colon)
  local out = {}
  if type(v) == "table" then out[#out + 1] = v end
  local core = package.loaded["bbb.core"]
  if core and core.is_tensor(v) then
    out[#out + 1] = core.Tensor
    if not colon then out[#out + 1] = { grad = true, shape = true } end
    return out
  end
  local mt = getmetatable(v)
  local seen = 0
  while type(mt) == "table" and type(mt.__index) == "table" and seen < 8 do
    out[#out + 1] = mt.__index
    mt = getmetatable(mt.__index)
    seen = seen + 1
  end
  return out
end

-- Names a lazy table (like bbb) would load on access.
local function lazy_names(v)
  if v == package.loaded.bbb then
    local names = {}
    for _, k in ipairs{ "nn", "prior", "elbo", "optim", "data", "metrics", "stats", "progress",
                        "testing", "train", "checkpoint" } do names[k] = true end
    return names
  end
  return {}
end

--- complete(word) -> sorted list of completions of word, which is a chain
-- of names with "." or a final ":" (`bbb.ze`, `x:so`, `pri`). Only reads
-- fields; never calls anything but __index tables.
function repl.complete(word, env)
  env = env or _G
  local path, sep, last = word:match("^(.*)([%.:])([%w_]*)$")
  local v = env
  if path then
    for name in path:gmatch("[^%.]+") do
      if not is_identifier(name) or type(v) ~= "table" and not (getmetatable(v) or {}).__index then
        return {}
      end
      local ok, nv = pcall(function() return v[name] end)
      if not ok or nv == nil then return {} end
      v = nv
    end
    if not path:match("^[%a_][%w_%.]*$") then return {} end
  else
    last, path, sep = word, "", ""
    if not word:match("^[%a_]?[%w_]*$") then return {} end
  end
  local found, list = {}, {}
  local sources = path == "" and { env } or key_sources(v, sep == ":")
  if path ~= "" then
    for k in pairs(lazy_names(v)) do found[k] = true end
  else
    for _, kw in ipairs{ "and", "break", "do", "else", "elseif", "end", "false", "for",
                         "function", "goto", "if", "in", "local", "nil", "not", "or",
                         "repeat", "return", "then", "true", "until", "while" } do
      found[kw] = true
    end
  end
  for _, src in ipairs(sources) do
    for k, fv in pairs(src) do
      if is_identifier(k) and (sep ~= ":" or type(fv) == "function") then found[k] = true end
    end
  end
  for k in pairs(found) do
    if k:sub(1, #last) == last and not k:match("^__") then list[#list + 1] = path .. sep .. k end
  end
  table.sort(list)
  return list
end

return repl

--- bbb.app.cli: command-line flags that are checked, never coerced.
-- Converters for lua-argparse's `:convert()` check type and range while the
-- command line is parsed, so a bad flag stops a script before any data is
-- loaded or any output opened. `cli.parse` adds the flag's name to every
-- converter's message and lets negative numbers follow a flag
-- (`--rho-init -3`, which argparse alone reads as an option named -3).
--
--   local cli, flags = require "bbb.app.cli", require "bbb.app.flags"
--   local parser = require("bbb.app.recipe").parser("x.lua", "About x.", { flags = { "seed" } })
--   flags.option(parser, "--widths", "Units per layer.", "400"):convert(cli.positive_integer())
--   flags.option(parser, "--plot-to", "A PNG."):convert(cli.output_path{ext = {"png"}})
--   local args = cli.parse(parser)
local cli = {}

-- Converters made here, so cli.parse names the flag in their messages only.
local ours = setmetatable({}, { __mode = "k" })

local function converter(fn)
  ours[fn] = true
  return fn
end

local function show(s)
  return ("'%s'"):format(tostring(s):gsub("%c", "?"))
end

-- Decimal notation only: no hex ("0x100"), no "inf"/"nan" words.
local DECIMAL_INT = "^%s*[+-]?%d+%s*$"
local function is_decimal_number(s)
  s = s:match("^%s*(.-)%s*$")
  local mant, exp = s:match("^[+-]?([%d.]+)([eE]?[+-]?%d*)$")
  if not mant or not mant:find("%d") or select(2, mant:gsub("%.", "")) > 1 then return false end
  return exp == "" or exp:match("^[eE][+-]?%d+$") ~= nil
end

local function range_text(opts)
  local lo = opts.min ~= nil and ("[" .. opts.min) or opts.above ~= nil and ("(" .. opts.above) or "(-inf"
  local hi = opts.max ~= nil and (opts.max .. "]") or opts.below ~= nil and (opts.below .. ")") or "inf)"
  return lo .. ", " .. hi
end

local function check_range(v, s, opts, kind)
  if (opts.min ~= nil and v < opts.min) or (opts.max ~= nil and v > opts.max)
      or (opts.above ~= nil and v <= opts.above) or (opts.below ~= nil and v >= opts.below) then
    return nil, ("%s %s is out of range: must be in %s"):format(kind, show(s), range_text(opts))
  end
  return v
end

--- cli.integer{min =, max =, above =, below =} -> converter.
-- Accepts decimal digits only ("12", "-3"): rejects "2.5", "1e19", "0x100",
-- and values beyond a 64-bit integer; then checks the (inclusive min/max,
-- exclusive above/below) bounds. Returns a Lua integer.
function cli.integer(opts)
  opts = opts or {}
  return converter(function(s)
    if type(s) ~= "string" or not s:find(DECIMAL_INT) then
      return nil, ("expected an integer in decimal digits, got %s"):format(show(s))
    end
    local v = math.tointeger(tonumber(s))
    if not v then return nil, ("integer %s is too large"):format(show(s)) end
    return check_range(v, s, opts, "integer")
  end)
end

--- cli.positive_integer{max =} -> converter: an integer >= 1.
function cli.positive_integer(opts)
  opts = opts or {}
  return cli.integer { min = 1, max = opts.max }
end

--- cli.nonnegative_integer{max =} -> converter: an integer >= 0.
function cli.nonnegative_integer(opts)
  opts = opts or {}
  return cli.integer { min = 0, max = opts.max }
end

--- cli.threads() -> converter: a thread count from 1 to bbb's cap
-- (bbb.max_threads(), a small multiple of the cores; see bbb.set_num_threads).
function cli.threads()
  local ok, core = pcall(require, "bbb.core")
  local cap = ok and core.max_threads and core.max_threads() or 1024
  return cli.integer { min = 1, max = cap }
end

--- cli.number{min =, max =, above =, below =} -> converter.
-- A finite number in decimal notation ("0.5", "-3", "1e-3"): rejects
-- "1e999" (infinite), "nan", "inf" and hex; then checks the (inclusive
-- min/max, exclusive above/below) bounds. Returns a Lua float or integer.
function cli.number(opts)
  opts = opts or {}
  return converter(function(s)
    if type(s) ~= "string" or not is_decimal_number(s) then
      return nil, ("expected a number, got %s"):format(show(s))
    end
    local v = tonumber((s:match("^%s*(.-)%s*$")))
    if not v or v ~= v or v == math.huge or v == -math.huge then
      return nil, ("number %s is not finite"):format(show(s))
    end
    return check_range(v, s, opts, "number")
  end)
end

--- cli.positive_number{max =} -> converter: a finite number > 0.
function cli.positive_number(opts)
  opts = opts or {}
  return cli.number { above = 0, max = opts.max }
end

--- cli.nonnegative_number{max =} -> converter: a finite number >= 0.
function cli.nonnegative_number(opts)
  opts = opts or {}
  return cli.number { min = 0, max = opts.max }
end

--- cli.probability() -> converter: a number in the open interval (0, 1).
function cli.probability()
  return cli.number { above = 0, below = 1 }
end

--- cli.int_list(n, {max =}) -> converter: n positive integers written A,B,...
-- (decimal digits, at most max each); returns the text as given, which
-- cli.ints turns into a list.
function cli.int_list(n, opts)
  opts = opts or {}
  return converter(function(s)
    local list = cli.ints(s)
    if not list or #list ~= n then
      return nil, ("expected %d integers as A%s, got %s"):format(n, n > 1 and ",B" or "", show(s))
    end
    for _, v in ipairs(list) do
      if v < 1 or (opts.max and v > opts.max) then
        return nil, ("%s is out of range: each must be in 1..%s"):format(show(s), tostring(opts.max or "inf"))
      end
    end
    return s
  end)
end

--- cli.ints(text) -> list of integers, or nil when text is not A,B,... in
-- decimal digits.
function cli.ints(s)
  if type(s) ~= "string" then return nil end
  local list = {}
  for w in (s .. ","):gmatch("([^,]*),") do
    local v = w:find("^%d+$") and math.tointeger(tonumber(w))
    if not v then return nil end
    list[#list + 1] = v
  end
  return list
end

--- cli.list(conv [, {unique = true | drop_repeats = true}]) -> converter: a
-- comma-separated list whose every item passes `conv` (a converter), returned
-- as a Lua list. An empty list or item ("", "1,,2") is refused; with unique,
-- so is a repeat; with drop_repeats, a repeat is taken once.
function cli.list(conv, opts)
  opts = opts or {}
  return converter(function(s)
    if type(s) ~= "string" or not s:find("[^,%s]") then
      return nil, ("expected a comma-separated list, got %s"):format(show(s))
    end
    local out, seen = {}, {}
    for item in (s .. ","):gmatch("([^,]*),") do
      item = item:match("^%s*(.-)%s*$")
      if item == "" then return nil, ("%s holds an empty item"):format(show(s)) end
      local v, err = conv(item)
      if v == nil then return nil, err end
      local again = seen[tostring(v)]
      if again and opts.unique then return nil, ("%s is given twice"):format(show(item)) end
      if not (again and opts.drop_repeats) then out[#out + 1] = v end
      seen[tostring(v)] = true
    end
    return out
  end)
end

--- cli.choice{"a", "b", ...} -> converter: one of the listed words.
function cli.choice(list)
  local set = {}
  for _, w in ipairs(list) do set[w] = true end
  return converter(function(s)
    if not set[s] then
      return nil, ("expected one of %s, got %s"):format(table.concat(list, ", "), show(s))
    end
    return s
  end)
end

--- cli.choice_or_number({"uniform", "blundell"}, {above = 0}) -> converter:
-- one of the words, or else a number checked as cli.number(opts) checks it.
function cli.choice_or_number(list, opts)
  local num = cli.number(opts)
  local set = {}
  for _, w in ipairs(list) do set[w] = true end
  return converter(function(s)
    if set[s] then return s end
    local v, err = num(s)
    if v == nil then
      return nil, ("expected %s or a number, got %s (%s)"):format(table.concat(list, ", "), show(s), err)
    end
    return v
  end)
end

local function is_dir(path)
  local f = io.open(path .. "/.", "r")
  if f then f:close() return true end
  return false
end

local function exists(path)
  local ok, _, code = os.rename(path, path)
  return ok or (code ~= 2 and code ~= 20)   -- ENOENT, ENOTDIR
end

-- Can a file be created in the existing folder `dir`? A probe file answers.
local function dir_writable(dir)
  for i = 1, 20 do
    local probe = ("%s/.bbb_probe_%d_%d"):format(dir, os.time(), math.random(1, 1 << 30) + i)
    if not exists(probe) then
      local f = io.open(probe, "w")
      if not f then return false end
      f:close()
      os.remove(probe)
      return true
    end
  end
  return false
end

-- The nearest path of path, itself or an ancestor, that exists ("." for a
-- relative path none of whose folders exist yet).
local function nearest_existing(path)
  local d = path
  while not exists(d) do
    local up = d:match("^(.*)/[^/]*$")
    if up == nil then d = "." elseif up == "" then d = "/" else d = up end
  end
  return d
end

--- cli.output_path{ext = {"png", "svg"}} -> converter: a file to write.
-- At parse time: the name is not empty and has no control character, the
-- extension is one of `ext` (when given), the path is not a folder, an
-- existing file can be opened for writing (without truncating it), and the
-- parent folder exists and takes new files, or the nearest existing ancestor
-- does (so the missing folders can be created). Write through
-- cli.write_file, which checks every write and the close (a full disk or
-- /dev/full is an error there, not a silent empty file).
function cli.output_path(opts)
  opts = opts or {}
  return converter(function(s)
    if type(s) ~= "string" or s == "" then return nil, "expected a file name, got ''" end
    if s:find("%c") then return nil, ("file name %s holds a control character"):format(show(s)) end
    if s:find("^%s*|") then return nil, ("file %s starts with '|', which gnuplot runs as a command"):format(show(s)) end
    if opts.ext then
      local e = (s:match("%.([%w]+)$") or ""):lower()
      local okext = false
      for _, x in ipairs(opts.ext) do okext = okext or e == x end
      if not okext then
        return nil, ("file %s must end in .%s"):format(show(s), table.concat(opts.ext, " or ."))
      end
    end
    if s:sub(-1) == "/" or is_dir(s) then return nil, ("%s is a folder, not a file"):format(show(s)) end
    -- what is there decides before anything opens it: opening a FIFO blocks,
    -- and a file is replaced by a rename, which a link or device cannot take
    local kind = require("bbb.core").sys.kind(s)
    if kind == "link" then
      return nil, ("%s is a symbolic link: name the file it points to"):format(show(s))
    elseif kind and kind ~= "file" then
      return nil, ("%s is a %s, not a regular file"):format(show(s), kind == "fifo" and "FIFO" or kind)
    end
    if exists(s) then
      local f, err = io.open(s, "a")
      if not f then return nil, ("cannot write %s: %s"):format(show(s), err) end
      f:close()
      return s
    end
    local d = nearest_existing(s)
    if not is_dir(d) then return nil, ("cannot write %s: %s is not a folder"):format(show(s), show(d)) end
    if not dir_writable(d) then return nil, ("cannot write %s: folder %s is not writable"):format(show(s), show(d)) end
    return s
  end)
end

--- cli.output_dir() -> converter: a folder to write into (made when missing).
-- Refuses an empty name, a control character, and a path that exists but
-- is not a folder; the folder itself is made by the script, before work.
function cli.output_dir()
  return converter(function(s)
    if type(s) ~= "string" or s == "" then return nil, "expected a folder name, got ''" end
    if s:find("%c") then return nil, ("folder name %s holds a control character"):format(show(s)) end
    if exists(s) and not is_dir(s) then return nil, ("%s exists and is not a folder"):format(show(s)) end
    -- the folders to make go under the nearest one that exists
    local d = nearest_existing(s)
    if not is_dir(d) then return nil, ("cannot make %s: %s is not a folder"):format(show(s), show(d)) end
    return s
  end)
end

--- cli.json_figures(v) -> a copy of v (numbers, strings, booleans, tables of
-- them) with every number JSON cannot hold (NaN, an infinity: a run that
-- diverged) as null, so a summary of such a run is still written.
function cli.json_figures(v)
  if type(v) == "number" then
    return (v ~= v or v == math.huge or v == -math.huge) and require("bbb.json").null or v
  end
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = cli.json_figures(x) end
  return t
end

local function write_fail(path, err)
  error(("cli.write_file: cannot write '%s': %s"):format(path, tostring(err)), 3)
end

--- cli.write_file(path, text) -> path: writes text (a string or a list of
-- strings) as the whole of path or nothing (bbb.core.sys.write_file: a
-- temporary beside it, fsync, rename), creating missing parent folders: a
-- full disk is an error naming the file, and the old file stays.
function cli.write_file(path, text)
  if type(path) ~= "string" then error("cli.write_file: path must be a string, got " .. type(path), 2) end
  local dir = path:match("^(.*)/[^/]*$")
  if dir and dir ~= "" and not exists(dir) then
    local ok, err = require("bbb.core").sys.mkdir_p(dir)
    if not ok then write_fail(path, err) end
  end
  local ok, err = require("bbb.core").sys.write_file(path, text)
  if not ok then write_fail(path, (tostring(err):gsub("^write: cannot write '[^']*': ", ""))) end
  return path
end

-- A negative number written as the next word ("-3", "-0.5", "-1e-3").
local function looks_negative_number(s)
  return type(s) == "string" and s:sub(1, 1) == "-" and is_decimal_number(s:sub(2)) and s:sub(2, 2) ~= "-"
end

-- Options of `parser` that take a value, by alias (argparse's own tables).
local function value_options(parser)
  local takes = {}
  for _, o in ipairs(parser._options or {}) do
    for _, a in ipairs(o._aliases or {}) do takes[a] = (o._maxargs or 0) > 0 end
  end
  return takes
end

--- cli.parse(parser [, argv]) -> args: parser:parse(argv or the script's arg)
-- after two changes: a negative number following a flag that takes a value
-- is joined to it (`--rho-init -3` becomes `--rho-init=-3`), and the
-- messages of cli converters start with the flag's name
-- ("--hidden: expected an integer in decimal digits, got '2.5'").
function cli.parse(parser, argv)
  argv = argv or arg or {}
  local takes = value_options(parser)
  local out, i, n = {}, 1, #argv
  while i <= n do
    local a = argv[i]
    if a == "--" then
      table.move(argv, i, n, #out + 1, out)
      break
    end
    if takes[a] and looks_negative_number(argv[i + 1]) then
      if a:sub(1, 2) == "--" then out[#out + 1] = a .. "=" .. argv[i + 1]
      else out[#out + 1] = a .. argv[i + 1] end   -- short option: -r-3
      i = i + 2
    else
      out[#out + 1] = a
      i = i + 1
    end
  end
  for _, o in ipairs(parser._options or {}) do
    local conv = o._convert
    if type(conv) == "function" and ours[conv] then
      local name = o._aliases[#o._aliases]
      for _, a in ipairs(o._aliases) do if a:sub(1, 2) == "--" then name = a break end end
      o._convert = function(s)
        local v, err = conv(s)
        if v == nil then return nil, name .. ": " .. err end
        return v
      end
    end
  end
  return parser:parse(out)
end

--- cli.given(parser [, argv]) -> {key = true} for every option written on
-- the command line ("--rho-init" or "--rho-init=-3" gives rho_init), so a
-- preset or a resumed run can tell an explicit flag from a default.
function cli.given(parser, argv)
  argv = argv or arg or {}
  local key_of = {}
  for _, o in ipairs(parser._options or {}) do
    local long
    for _, a in ipairs(o._aliases) do if a:sub(1, 2) == "--" then long = a break end end
    local key = o._target or (long or o._aliases[1]):gsub("^%-+", ""):gsub("%-", "_")
    for _, a in ipairs(o._aliases) do key_of[a] = key end
  end
  local out = {}
  for _, a in ipairs(argv) do
    if a == "--" then break end
    local name = a:match("^(%-%-?[^=]+)")
    if name and key_of[name] then out[key_of[name]] = true end
  end
  return out
end

return cli

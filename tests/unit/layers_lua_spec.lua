-- The Lua library (lua/bbb outside lua/bbb/app) never requires the
-- application (bbb.app.*): not at the top of a file, not lazily inside a
-- function, and not through names bbb could give them (bbb.plot, bbb.cli,
-- bbb.sys: init.lua gives none). Data flows from the application to
-- the library, so the library runs without the application's files.
local root = os.getenv("BBB_ROOT") or "."

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Every .lua file under dir, sorted, as paths relative to root.
local function lua_files(dir)
  local p = assert(io.popen(("find '%s/%s' -name '*.lua' -type f"):format(root, dir)))
  local out = {}
  for line in p:lines() do out[#out + 1] = line:sub(#root + 2) end
  p:close()
  table.sort(out)
  return out
end

-- src with every comment blanked (newlines kept, so positions keep their
-- line), and a second copy with string contents blanked too.
local function blank(s) return (s:gsub("[^\n]", " ")) end
local function strip(src)
  local code, bare, i = {}, {}, 1
  while i <= #src do
    local c = src:sub(i, i)
    local long = src:match("^%[(=*)%[", i)
    if src:sub(i, i + 1) == "--" then
      local lvl = src:match("^%-%-%[(=*)%[", i)
      local j = lvl and select(2, src:find("]" .. lvl .. "]", i, true))
      j = j or (src:find("\n", i, true) or #src + 1) - 1
      code[#code + 1] = blank(src:sub(i, j)); bare[#bare + 1] = code[#code]
      i = j + 1
    elseif c == '"' or c == "'" or long then
      local j
      if long then
        j = select(2, src:find("]" .. long .. "]", i, true)) or #src
      else
        j = i + 1
        while j <= #src and src:sub(j, j) ~= c and src:sub(j, j) ~= "\n" do
          j = j + (src:sub(j, j) == "\\" and 2 or 1)
        end
      end
      code[#code + 1] = src:sub(i, j); bare[#bare + 1] = blank(src:sub(i, j))
      i = j + 1
    else
      local j = (src:find("[%-\"'%[]", i + 1) or #src + 1) - 1
      code[#code + 1] = src:sub(i, j); bare[#bare + 1] = code[#code]
      i = j + 1
    end
  end
  return table.concat(code), table.concat(bare)
end

local function line_of(s, pos)
  local _, n = s:sub(1, pos):gsub("\n", "")
  return n + 1
end

-- Where a require call names a module with a literal string: require "m",
-- require("m"), require [[m]], pcall(require, "m").
local REQUIRE = {
  "%f[%w_]require%s*%(?%s*([\"'])(.-)%1",
  "%f[%w_]require%s*%(?%s*%[=*%[()(.-)%]=*%]",
  "%f[%w_]pcall%s*%(%s*require%s*,%s*([\"'])(.-)%1",
}

local function is_app(name) return name == "bbb.app" or name:find("^bbb%.app%.") ~= nil end

--- violations(src, name, app_names) -> {"name:line: what", ...}: the
-- requires of bbb.app.* in src, and uses of bbb.<n> for n in app_names.
local function violations(src, name, app_names)
  local code, bare = strip(src)
  local found = {}
  for _, pat in ipairs(REQUIRE) do
    local init = 1
    while true do
      local s, e, _, mod = code:find(pat, init)
      if not s then break end
      if is_app(mod) then
        found[#found + 1] = { line_of(code, s), ('requires "%s"'):format(mod) }
      end
      init = e + 1
    end
  end
  for _, n in ipairs(app_names or {}) do
    for pos in bare:gmatch("()%f[%w_]bbb%s*%.%s*" .. n .. "%f[^%w_]") do
      found[#found + 1] = { line_of(bare, pos), ("uses bbb.%s, the application's"):format(n) }
    end
  end
  table.sort(found, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local out = {}
  for _, f in ipairs(found) do out[#out + 1] = ("%s:%d: %s"):format(name, f[1], f[2]) end
  return out
end

-- The names init.lua's lazy table gives application modules (bbb.plot ->
-- "bbb.app.plot"): the library must not reach the application through them.
local function app_accessors(init_src)
  local names = {}
  for k, mod in init_src:gmatch("([%a_][%w_]*)%s*=%s*\"(bbb%.app[%w_.]*)\"") do
    if is_app(mod) then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

-- The modules src requires by a literal name, as a set.
local function requires_of(src)
  local code = strip(src)
  local out = {}
  for _, pat in ipairs(REQUIRE) do
    for _, mod in code:gmatch(pat) do out[mod] = true end
  end
  return out
end

-- The module name of a library file: lua/bbb/nn/init.lua -> bbb.nn.
local function module_of(path)
  return (path:gsub("^lua/", ""):gsub("/init%.lua$", ""):gsub("%.lua$", ""):gsub("/", "."))
end

-- A cycle of requires among the modules of graph (name -> set of names),
-- as "a -> b -> a", or nil.
local function cycle(graph)
  local state = {}
  local function visit(m, path)
    if state[m] == "open" then
      local from = 1
      while path[from] ~= m do from = from + 1 end
      return table.concat(table.move(path, from, #path, 1, {}), " -> ") .. " -> " .. m
    end
    if state[m] == "done" or not graph[m] then return nil end
    state[m] = "open"
    path[#path + 1] = m
    local next_names = {}
    for n in pairs(graph[m]) do next_names[#next_names + 1] = n end
    table.sort(next_names)
    for _, n in ipairs(next_names) do
      local c = visit(n, path)
      if c then return c end
    end
    path[#path] = nil
    state[m] = "done"
  end
  local names = {}
  for m in pairs(graph) do names[#names + 1] = m end
  table.sort(names)
  for _, m in ipairs(names) do
    local c = visit(m, {})
    if c then return c end
  end
end

describe("the library's requires", function()
  it("finds a cycle when there is one", function()
    assert.are.equal("a -> b -> a", cycle { a = { b = true }, b = { a = true } })
    assert.is_nil(cycle { a = { b = true }, b = { c = true } })
  end)

  it("hold no cycle below the bbb facade (lazy requires inside functions included)", function()
    local graph = {}
    for _, path in ipairs(lua_files("lua/bbb")) do
      if not path:find("^lua/bbb/app/") then
        local deps = requires_of(read(root .. "/" .. path))
        deps.bbb = nil   -- the facade: it loads the others lazily, by name, never at load time
        graph[module_of(path)] = deps
      end
    end
    graph.bbb = nil
    assert.is_nil(cycle(graph))
  end)
end)

describe("the layers of lua/bbb", function()
  it("finds a forbidden require wherever it is written, and nothing in comments", function()
    local src = table.concat({
      'local cli = require "bbb.app.cli"',
      "local function f()",
      "  return require('bbb.app.plot').lines",
      "end",
      'local ok = pcall(require, "bbb.app.sys")',
      'local r = require("bbb.app.experiments.mnist")',
      "local s = require [[bbb.app.recipe]]",
      '-- require "bbb.app.cli" in a comment',
      '--[[ require "bbb.app.cli"',
      "]] local x = bbb.plot.lines",
      'local msg = "bbb.plot is the application\'s"',
      'local nn = require "bbb.nn"; local a = require "bbb.apple"',
    }, "\n")
    assert.are.same({
      't.lua:1: requires "bbb.app.cli"',
      't.lua:3: requires "bbb.app.plot"',
      't.lua:5: requires "bbb.app.sys"',
      't.lua:6: requires "bbb.app.experiments.mnist"',
      't.lua:7: requires "bbb.app.recipe"',
      "t.lua:10: uses bbb.plot, the application's",
    }, violations(src, "t.lua", { "plot" }))
  end)

  it("bbb names no application module: init.lua's lazy table holds none", function()
    assert.are.same({}, app_accessors(read(root .. "/lua/bbb/init.lua")))
    assert.are.same({ "cli" }, app_accessors('local t = { cli = "bbb.app.cli", nn = "bbb.nn" }'))
  end)

  it("no library module requires an application module, init.lua included", function()
    local files = lua_files("lua/bbb")
    local found, library = {}, 0
    for _, path in ipairs(files) do
      if not path:find("^lua/bbb/app/") then
        library = library + 1
        -- the names bbb once gave the application's modules stay forbidden
        local names = { "cli", "plot", "sys" }
        for _, v in ipairs(violations(read(root .. "/" .. path), path, names)) do found[#found + 1] = v end
      end
    end
    assert.is_true(library > 20, ("only %d library files found under %s/lua/bbb"):format(library, root))
    assert.are.equal("", table.concat(found, "\n"))
  end)
end)

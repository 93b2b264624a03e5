-- One flag registry (bbb.app.flags): every script's flags are declared
-- through it, a name two scripts declare on their own is either shared or
-- listed in flags.DISTINCT, old spellings are refused with a pointer, and a
-- default that depends on the machine is computed when a parser is built.
local flags = require "bbb.app.flags"
local helpers = require "helpers"
local root = helpers.root

local function read(path)
  local f = assert(io.open(root .. "/" .. path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- The .lua files that build command lines: the application and the scripts.
local function script_files()
  local p = assert(io.popen(("cd '%s' && find lua/bbb/app scripts -name '*.lua' -type f | sort"):format(root)))
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- The registry itself builds options; everyone else goes through it.
local BUILDERS = { ["lua/bbb/app/flags.lua"] = true, ["lua/bbb/app/recipe.lua"] = true }

-- Lines of src (comments left out) that build an option or switch
-- directly on an argparse parser.
local function direct_calls(src)
  local hits = {}
  local n = 0
  for line in (src .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    local code = line:gsub("%-%-.*$", "")
    if code:find(":option%(") or code:find(":flag%(") or code:find('require%s*%(?%s*"argparse"') then
      hits[#hits + 1] = n
    end
  end
  return hits
end

-- long name -> {file = true} for the own flags src declares by a literal name.
local function own_names(src, file, into)
  for kind, names in src:gmatch('flags%.(%a+)%(parser,%s*"([^"]+)"') do
    if kind == "option" or kind == "flag" then
      for long in names:gmatch("%-%-[%w%-]+") do into[long] = into[long] or {}; into[long][file] = true end
    end
  end
  return into
end

local function count(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end

describe("the flag registry", function()
  it("is the only place that builds options (a planted direct call is caught)", function()
    assert.are.same({ 2 }, direct_calls('local p = recipe.parser("x.lua", "about")\np:option("--x", "X.")\n'))
    assert.are.same({}, direct_calls('-- parser:option("--x") in a comment\nflags.option(parser, "--x", "X.")\n'))
    local bad = {}
    for _, file in ipairs(script_files()) do
      if not BUILDERS[file] then
        for _, n in ipairs(direct_calls(read(file))) do bad[#bad + 1] = file .. ":" .. n end
      end
    end
    assert.are.same({}, bad)
  end)

  it("lets two scripts share a name only as one shared flag or a listed distinct idea", function()
    local planted = own_names('flags.option(parser, "--members", "N.")', "a.lua", {})
    own_names('flags.option(parser, "--members", "M.")', "b.lua", planted)
    assert.are.equal(2, count(planted["--members"]))
    local names = {}
    for _, file in ipairs(script_files()) do own_names(read(file), file, names) end
    local undeclared, stale = {}, {}
    for long, files in pairs(names) do
      if count(files) > 1 and not flags.DISTINCT[long] then undeclared[#undeclared + 1] = long end
    end
    for long in pairs(flags.DISTINCT) do
      local key = long:sub(3):gsub("-", "_")
      if count(names[long] or {}) < 2 and not (names[long] and flags.SHARED[key]) then stale[#stale + 1] = long end
    end
    table.sort(undeclared)
    table.sort(stale)
    assert.are.same({}, undeclared)
    assert.are.same({}, stale)
  end)

  it("refuses a shared name declared as a script's own flag", function()
    local recipe = require "bbb.app.recipe"
    local parser = recipe.parser("x.lua", "A test parser.", {})
    assert.has_error(function() flags.option(parser, "--members", "Mine.", "3") end,
      "flags: x.lua declares --members, a shared flag: declare it by name (recipe.declare)")
    flags.option(parser, "--widgets", "Mine.", "3")   -- a name of its own is fine
  end)

  it("computes the machine's defaults when a parser is built, not when it loads", function()
    assert.are.equal("function", type(flags.SHARED.threads.default))
    assert.are.equal("function", type(flags.SHARED.jobs.default))
    local recipe = require "bbb.app.recipe"
    local parser = recipe.parser("x.lua", "A test parser.", { flags = { "threads", "jobs" } })
    local args = parser:parse({})
    local cores = require("bbb.app.sys").nproc()
    assert.are.equal(cores, args.threads)
    assert.are.equal(cores, args.jobs)
  end)

  it("refuses an old spelling with a pointer to the new one, before any work", function()
    assert.are.equal("--pred-samples is now --test-samples (one name per idea)",
      flags.check_renamed { "--data", "x.csv", "--pred-samples=5" })
    assert.is_nil(flags.check_renamed { "--test-samples", "5", "--", "--pred-samples" })
    local status, out = helpers.run("scripts/fit.lua --data no-such.csv --target y --pred-samples 5")
    assert.are.equal(2, status)
    helpers.has(out, "fit.lua: --pred-samples is now --test-samples")
  end)

  it("gives predict, fit and the experiments one name for predictive samples", function()
    for _, name in ipairs { "fit", "predict", "uci", "reference", "regression", "mnist", "shift", "bandit_inspect" } do
      local parser = require("bbb.app.experiments." .. name).parser()
      local has = false
      for _, o in ipairs(parser._options) do
        for _, a in ipairs(o._aliases) do has = has or a == "--test-samples" end
      end
      assert.is_true(has, name)
    end
  end)
end)

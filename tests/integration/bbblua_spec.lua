-- The bbblua interpreter behaves like lua5.4 with bbb preloaded, and the
-- stock lua5.4 can load the same module by paths alone.
local build = os.getenv("BBB_BUILD") or "build"
local root = os.getenv("BBB_ROOT") or "."
local bbblua = build .. "/bbblua"

local helpers = require "helpers"
local q, run = helpers.q, helpers.sh   -- run(cmd) -> output, exit status

local tmp = os.tmpname()
local made = {tmp}
local function script(suffix, text)
  local path = tmp .. suffix
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  made[#made + 1] = path
  return path
end

describe("bbblua", function()
  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  it("-v prints its version and Lua's", function()
    local out, status = run(q(bbblua) .. " -v")
    assert.are.equal(0, status)
    assert.truthy(out:match("^bbblua %d+%.%d+%.%d+ %(Lua 5%.4%.%d+%)\n$"), out)
  end)
  it("-e runs a statement with bbb already loaded", function()
    local out, status = run(q(bbblua) .. " -e " .. q("print(bbb.ones{2,2}:sum():item())"))
    assert.are.equal(0, status)
    assert.are.equal(4, tonumber(out))
  end)
  it("passes a script its arguments in arg and ...", function()
    local path = script(".args.lua", [[
print(arg[0], arg[1], arg[2], #arg, select("#", ...), ...)
print(arg[-1] ~= nil)
]])
    local out, status = run(q(bbblua) .. " " .. q(path) .. " one 'two words'")
    assert.are.equal(0, status)
    assert.are.equal(path .. "\tone\ttwo words\t2\t2\tone\ttwo words\ntrue\n", out)
  end)
  it("exits with status 1 and 'script: message' when a script fails; BBB_DEBUG=1 adds the traceback", function()
    local path = script(".fail.lua", [[
local function inner() error("boom from the script") end
local function outer() inner() end
outer()
]])
    local out, status = run(q(bbblua) .. " " .. q(path))
    assert.are.equal(1, status)
    assert.are.equal(path:match("[^/]+$") .. ": boom from the script\n", out)
    out, status = run("BBB_DEBUG=1 " .. q(bbblua) .. " " .. q(path))
    assert.are.equal(1, status)
    assert.truthy(out:find("boom from the script", 1, true), out)
    assert.truthy(out:find("stack traceback:", 1, true), out)
    assert.truthy(out:find("in local 'inner'", 1, true) or out:find("in function 'inner'", 1, true)
      or out:find("in upvalue 'inner'", 1, true), out)
  end)
  it("exits with status 1 when a bbb error escapes", function()
    local out, status = run(q(bbblua) .. " -e " .. q("local x = bbb.zeros(2, 3) + bbb.zeros(4)"))
    assert.are.equal(1, status)
    assert.truthy(out:find("add: shapes (2, 3) and (4) cannot be broadcast", 1, true), out)
  end)
  it("runs a script piped on stdin", function()
    local out, status = run("printf 'print(bbb.tensor{1, 2, 3}:sum():item())\\nprint(...)\\n' | "
      .. q(bbblua) .. " - a b")
    assert.are.equal(0, status)
    assert.are.equal("6.0\na\tb\n", out)
  end)
  it("reads stdin as a script when it is not a terminal and no script is given", function()
    local out, status = run("echo 'print(type(bbb.randn))' | " .. q(bbblua))
    assert.are.equal(0, status)
    assert.are.equal("function\n", out)
  end)
end)

describe("the stock lua5.4", function()
  it("loads bbb from the build and the source tree by paths alone", function()
    -- LUA_PATH/LUA_CPATH from run_busted would make this pass vacuously
    local code = ('package.cpath = %q .. package.cpath; '
      .. 'package.path = %q .. package.path; '
      .. 'local bbb = require "bbb"; print(bbb.ones{2,2})')
      :format(build .. "/?.so;", root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;")
    local out, status = run("env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 lua5.4 -e "
      .. q(code))
    assert.are.equal(0, status, out)
    assert.are.equal(" 1 1\n 1 1\n[bbb.Tensor of size 2x2]\n", out)
  end)
end)

-- Installing: `cmake --install` into a prefix and `luarocks make` into a
-- tree put bbb.core, the Lua library and bbblua where Lua looks, so that
-- require "bbb" works from the stock lua5.4 in any folder.
local build = os.getenv("BBB_BUILD") or "build"
local root = os.getenv("BBB_ROOT") or "."

local helpers = require "helpers"
local q, run = helpers.q, helpers.sh   -- run(cmd) -> output, exit status

local function ok(cmd)
  local out, status = run(cmd)
  assert(status == 0, cmd .. "\n" .. out)
  return out
end

local tmp = ok("mktemp -d"):gsub("%s+$", "")
local elsewhere = tmp .. "/elsewhere"
ok("mkdir -p " .. q(elsewhere))

-- Runs code on the stock lua5.4 from another folder with only the tree's
-- module folders on the paths (what LUA_PATH and LUA_CPATH say for any
-- prefix; /usr/local is on lua5.4's default paths already).
local function stock_lua(tree, code)
  local lua_dir, c_dir = tree .. "/share/lua/5.4", tree .. "/lib/lua/5.4"
  return run(("cd %s && LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s"):format(q(elsewhere),
    q(lua_dir .. "/?.lua;" .. lua_dir .. "/?/init.lua"), q(c_dir .. "/?.so"), q(code)))
end

local CHECK = [[
local bbb = require "bbb"
print(bbb.ones(2, 3):sum():item())
print(package.searchpath("bbb", package.path))
print(package.searchpath("bbb.core", package.cpath))
print(require("bbb.help").text(bbb.randn) ~= nil)
print(bbb.nn.BayesLinear(2, 1) ~= nil)]]

local function check_tree(tree)
  local out, status = stock_lua(tree, CHECK)
  assert.are.equal(0, status, out)
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  assert.are.equal("6.0", lines[1], out)
  assert.are.equal(tree .. "/share/lua/5.4/bbb/init.lua", lines[2])
  assert.are.equal(tree .. "/lib/lua/5.4/bbb/core.so", lines[3])
  assert.are.same({ "true", "true" }, { lines[4], lines[5] })
  -- bbblua finds the installed library, not the source tree
  out, status = run(("cd %s && %s -e %s"):format(q(elsewhere), q(tree .. "/bin/bbblua"),
    q('print(package.searchpath("bbb", package.path))')))
  assert.are.equal(0, status, out)
  assert.truthy(out:find(tree .. "/bin/../share/lua/5.4/bbb/init.lua", 1, true), out)
end

describe("installing bbb", function()
  teardown(function() run("rm -rf " .. q(tmp)) end)

  it("cmake --install to a prefix", function()
    local prefix = tmp .. "/prefix"
    ok(("cmake --install %s --prefix %s"):format(q(build), q(prefix)))
    check_tree(prefix)
    -- the benchmarks' floors stay out of the installed module
    assert.are.equal(1, select(2, stock_lua(prefix, 'require "bbb.bench"')))
  end)

  it("luarocks make into a tree", function()
    assert(select(2, run("command -v luarocks")) == 0,
      "luarocks is needed for this spec (scripts/bootstrap installs it)")
    -- a copy of the sources, so the build folder luarocks makes stays out of the tree
    local src = tmp .. "/src"
    ok(("mkdir -p %s && cd %s && cp -r CMakeLists.txt bbb-scm-1.rockspec cmake src lua scripts examples %s/")
      :format(q(src), q(root), q(src)))
    local tree = tmp .. "/tree"
    ok(("cd %s && luarocks --lua-version 5.4 make --tree %s bbb-scm-1.rockspec"):format(q(src), q(tree)))
    check_tree(tree)
    -- the scripts come with the rock, run as the rockspec says
    local rock_dir = ok(("luarocks --lua-version 5.4 --tree %s show --rock-dir bbb"):format(q(tree))):gsub("%s+$", "")
    local out = ok(("cd %s && %s %s --help"):format(q(elsewhere), q(tree .. "/bin/bbblua"),
      q(rock_dir .. "/scripts/fit.lua")))
    assert.truthy(out:find("Usage: fit.lua", 1, true), out)
    assert.truthy(io.open(rock_dir .. "/examples/priors/student_t.lua"), "examples/ not in the rock")
  end)
end)

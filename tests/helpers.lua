-- What the specs share: where the build and the repository are, and running
-- bbblua from the repository root with its output and exit status.
local assert = require "luassert"

local helpers = {}

helpers.build = os.getenv("BBB_BUILD") or "build"
helpers.root = os.getenv("BBB_ROOT") or "."
helpers.bbblua = helpers.build .. "/bbblua"

--- run(args [, env]) -> exit status, output (stdout and stderr) of
-- `bbblua args`, with env ("NAME=value ...") set for it when given (a
-- string: run(s:gsub(...)) passes gsub's count, which is not one)
function helpers.run(args, env)
  env = type(env) == "string" and env .. " " or ""
  local cmd = ("cd %q && %s%q %s 2>&1; echo \"exit=$?\""):format(helpers.root, env,
    helpers.bbblua, args)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return tonumber(out:match("exit=(%d+)%s*$")), out
end

--- q(s) -> s quoted for the shell (single quotes)
function helpers.q(s) return "'" .. s:gsub("'", [['\'']]) .. "'" end

--- sh(cmd) -> output (stdout and stderr), exit status of a shell command
function helpers.sh(cmd)
  local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"status=$?\""))
  local out = p:read("a")
  p:close()
  local body, status = out:match("^(.-)status=(%d+)\n$")
  return body, tonumber(status)
end

--- has(out, want): want appears in out, as plain text
function helpers.has(out, want)
  assert.truthy(out:find(want, 1, true), ("expected %q in:\n%s"):format(want, out))
end

--- errors_with(fn, text): fn raises an error whose message contains text
function helpers.errors_with(fn, text)
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error")
  assert.truthy(tostring(err):find(text, 1, true), ("%q not in %q"):format(text, tostring(err)))
end

--- ok(args, ...) -> output: `bbblua args` exits 0 and prints every ... text
function helpers.ok(args, ...)
  local status, out = helpers.run(args)
  assert.are.equal(0, status, out)
  for _, want in ipairs { ... } do helpers.has(out, want) end
  return out
end

--- read(path) -> the file's bytes, or nil when it cannot be opened
function helpers.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- write(path, s): writes the bytes s to path
function helpers.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

--- recorded_environment() -> true, or false and why: whether this machine
-- can run the products in the environment the recorded results were made
-- in, OpenBLAS 0.3.21 pinned to its Haswell kernels (OPENBLAS_CORETYPE=
-- Haswell, which needs AVX2 and FMA). A replay of those results compares
-- bits only there.
function helpers.recorded_environment()
  local f = io.open("/proc/cpuinfo")
  local cpu = f and f:read("a") or ""
  if f then f:close() end
  if not (cpu:find("%savx2%s") and cpu:find("%sfma%s")) then
    return false, "the recorded environment (OpenBLAS's Haswell kernels) needs AVX2 and FMA"
  end
  local blas = require("bbb").core.environment().openblas
  if not blas:find("OpenBLAS 0.3.21", 1, true) then
    return false, ("the recorded results were made on OpenBLAS 0.3.21, this is %s"):format(blas)
  end
  return true
end

--- with_threads(n, fn) -> fn() run on n threads of bbb, the previous count
-- put back even on error (so a failure cannot slow or skew later specs).
function helpers.with_threads(n, fn)
  local bbb = require "bbb"
  local old = bbb.get_num_threads()
  bbb.set_num_threads(n)
  local ok, res = pcall(fn)
  bbb.set_num_threads(old)
  if not ok then error(res, 0) end
  return res
end

return helpers

--- bbb.app.sys: processes and folders without a shell.
-- Every process bbb starts (gnuplot, a grid's or a bandit's workers) is
-- started from an argument vector, and every folder is made by mkdir(2):
-- no path or flag given by a user is ever read by /bin/sh.
--
--   local sys = require "bbb.app.sys"
--   local ok, how, code = sys.run({ "gnuplot", script }, { stderr = err_path })
--   local job = sys.start(sys.bbblua_argv("scripts/mnist.lua", "--epochs", "3"), { stdout = log, stderr = log })
--   local done, how, code = job:poll()
-- A pool of workers is bbb.app.jobs.run's.
local core_sys = require("bbb.core").sys

local sys = {}
for k, v in pairs(core_sys) do sys[k] = v end

local Job = {}
Job.__index = Job

--- sys.start(argv [, {stdin =, stdout =, stderr =}]) -> job | nil, message
-- Starts argv (a list of strings) without a shell; job:poll() and
-- job:wait() collect it, job:stop() sends it SIGTERM.
function sys.start(argv, opts)
  local pid, err = core_sys.spawn(argv, opts)
  if not pid then return nil, err end
  return setmetatable({ pid = pid, argv = argv }, Job)
end

--- job:poll() -> true, "exit"|"signal", code once the process has ended;
-- false while it runs.
function Job:poll()
  if self.how then return true, self.how, self.code end
  local how, code = core_sys.wait(self.pid, true)
  if how == nil then return false end
  self.how, self.code = how, code
  return true, how, code
end

--- job:wait() -> "exit"|"signal", code: blocks until the process ends.
function Job:wait()
  if not self.how then self.how, self.code = core_sys.wait(self.pid) end
  return self.how, self.code
end

--- job:stop([signal]): asks the process to end (SIGTERM unless told).
function Job:stop(sig)
  if not self.how then core_sys.kill(self.pid, sig) end
end

--- sys.run(argv [, opts]) -> ok, "exit"|"signal", code: starts argv and
-- waits for it; ok is true when it exited with status 0.
function sys.run(argv, opts)
  local job, err = sys.start(argv, opts)
  if not job then return false, "error", err end
  local how, code = job:wait()
  return how == "exit" and code == 0, how, code
end

--- sys.read_file(path) -> the whole of the file as bytes, or nil when it
-- cannot be opened (a missing file is no error).
function sys.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

--- sys.output(argv) -> what argv printed on stdout (its last newline
-- dropped), or nil when it could not start or did not exit with status 0.
function sys.output(argv)
  local tmp = os.tmpname()
  local ok = sys.run(argv, { stdin = "/dev/null", stdout = tmp, stderr = "/dev/null" })
  local text = sys.read_file(tmp)
  os.remove(tmp)
  return ok and text and (text:gsub("\n$", "")) or nil
end

--- sys.bbblua_argv(script, ...) -> argv: the command that runs script with
-- this same interpreter (bbblua, or the lua that runs this program).
function sys.bbblua_argv(script, ...)
  local interp = arg and arg[-1] or "bbblua"
  local i = -2
  while arg and arg[i] do interp = arg[i]; i = i - 1 end   -- lua -e ...: the program is first
  local argv = { interp, script }
  for _, w in ipairs { ... } do argv[#argv + 1] = tostring(w) end
  return argv
end

--- sys.mkdir_for(path) -> true | nil, message: makes the folder that the
-- file path goes in, when it is missing.
function sys.mkdir_for(path)
  local dir = path:match("^(.*)/[^/]*$")
  if not dir or dir == "" then return true end
  return core_sys.mkdir_p(dir)
end

return sys

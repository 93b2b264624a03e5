--- bbb.app.sys (bbb.sys): processes and folders without a shell.
-- Every process bbb starts (gnuplot, a grid's or a bandit's workers) is
-- started from an argument vector, and every folder is made by mkdir(2):
-- no path or flag given by a user is ever read by /bin/sh.
--
--   local sys = require "bbb.app.sys"
--   local ok, how, code = sys.run({ "gnuplot", script }, { stderr = err_path })
--   local job = sys.start(sys.bbblua_argv("scripts/mnist.lua", "--epochs", "3"), { stdout = log, stderr = log })
--   local done, how, code = job:poll()
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

--- sys.run_all(argvs, jobs [, opts]) -> results: runs every argument vector
-- of argvs, at most jobs at once, each started as sys.start(argv, opts)
-- (stdout and stderr inherited unless opts says otherwise); polls fifty
-- times a second (a worker may take a tenth of one). results[i] = {how =,
-- code =, ok =} for argvs[i]. A start that fails is a result with how =
-- "error" and the message as code. On a
-- signal the workers are stopped (stop_all) and opts.on_stop() runs
-- (removing what the workers shared, say).
function sys.run_all(argvs, jobs, opts)
  local results, running, next_i = {}, {}, 1
  local core = require "bbb.core"
  core.sigint_trap(true)
  while next_i <= #argvs or #running > 0 do
    if core.sigint_pending() > 0 then sys.stop_all(running, core.interrupt_signal(), opts and opts.on_stop) end
    while #running < jobs and next_i <= #argvs do
      local job, err = sys.start(argvs[next_i], opts)
      if job then running[#running + 1] = { job = job, i = next_i }
      else results[next_i] = { how = "error", code = err, ok = false } end
      next_i = next_i + 1
    end
    local any = false
    for k = #running, 1, -1 do
      local done, how, code = running[k].job:poll()
      if done then
        results[running[k].i] = { how = how, code = code, ok = how == "exit" and code == 0 }
        table.remove(running, k)
        any = true
      end
    end
    if not any and #running > 0 then core_sys.sleep(0.02) end
  end
  core.sigint_trap(false)
  return results
end

--- sys.stop_all(running, signal [, on_stop]): a signal to the program ends
-- its workers too (none is left running on its own): each gets the same
-- signal, so it can save what it has, and is waited for; then on_stop()
-- runs, when given, and the program exits with 128 + the signal.
function sys.stop_all(running, sig, on_stop)
  sig = sig ~= 0 and sig or 15
  for _, r in ipairs(running) do r.job:stop(sig) end
  for _, r in ipairs(running) do r.job:wait() end
  if on_stop then on_stop() end
  local script = (arg and arg[0] or "bbblua"):match("([^/]*)$")
  io.stderr:write(("\n%s: interrupted; %d running worker(s) stopped with it\n"):format(script, #running))
  os.exit(128 + sig)
end

--- sys.output(argv) -> what argv printed on stdout (its last newline
-- dropped), or nil when it could not start or did not exit with status 0.
function sys.output(argv)
  local tmp = os.tmpname()
  local ok = sys.run(argv, { stdin = "/dev/null", stdout = tmp, stderr = "/dev/null" })
  local f = io.open(tmp, "rb")
  local text = f and f:read("a")
  if f then f:close() end
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

--- bbb.app.jobs: the one way the application runs worker processes.
-- A pool of at most `jobs` processes at once, each started from an argument
-- vector (no shell), each ended with this process whatever ends it
-- (bbb.core.sys.spawn sets the parent-death signal). A signal to the
-- program (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) goes to every running worker,
-- which is waited for (so it can save what it has), then run raises
-- {signal = N, message =}: recipe.main exits with 128 + N. Nothing here
-- exits the process.
--
--   local jobs = require "bbb.app.jobs"
--   local results = jobs.run({ { argv = sys.bbblua_argv("scripts/mnist.lua", "--epochs", "1") } }, { jobs = 2 })
--   assert(results[1].ok)
local sys = require "bbb.app.sys"
local core = require "bbb.core"

local jobs = {}

-- Starts task (argv and the files of its standard streams); -> a running
-- entry, or the result of a start that failed.
local function start(task, i)
  local job, err = sys.start(task.argv, { stdin = task.stdin or "/dev/null", stdout = task.stdout,
    stderr = task.stderr, env = task.env, cwd = task.cwd })
  if not job then return nil, { how = "error", code = err, ok = false, seconds = 0 } end
  return { job = job, i = i, task = task, t0 = core.clock() }
end

-- Every running worker gets sig and is waited for.
local function stop(running, sig)
  for _, r in ipairs(running) do r.job:stop(sig) end
  for _, r in ipairs(running) do r.job:wait() end
end

-- The running entries that ended, moved to results; -> whether any did.
local function collect(running, results, o)
  local any = false
  for k = #running, 1, -1 do
    local r = running[k]
    local done, how, code = r.job:poll()
    if done then
      table.remove(running, k)
      local res = { how = how, code = code, ok = how == "exit" and code == 0, seconds = core.clock() - r.t0 }
      results[r.i], any = res, true
      if o.on_done then o.on_done(r.task, res, r.i) end
      if not res.ok and o.stop_on_failure then return any, r end
    end
  end
  return any
end

--- jobs.run(tasks [, {jobs = 1, poll = 0.02, on_start = fn(task, i), on_done =
-- fn(task, result, i), stop_on_failure = false, on_stop = fn()}]) -> results.
-- on_start runs just before task i starts (it may fill in the task's argv).
-- tasks[i] = {argv = {...} [, stdout =, stderr =, stdin =, env =, cwd =]}
-- (files the worker appends to or reads); results[i] = {how = "exit" |
-- "signal" | "error", code, ok, seconds}. With stop_on_failure the first
-- task that fails stops the others and run raises an error naming it. On a
-- signal, or any error, the workers are stopped and on_stop runs before run
-- raises.
function jobs.run(tasks, o)
  o = o or {}
  local width, poll = o.jobs or 1, o.poll or 0.02
  local results, running, next_i = {}, {}, 1
  core.sigint_trap(true)
  local ok, err = pcall(function()
    while next_i <= #tasks or #running > 0 do
      if core.sigint_pending() > 0 then
        local sig = core.interrupt_signal()
        sig = sig ~= 0 and sig or 15
        stop(running, sig)
        error({ signal = sig, message = ("interrupted; %d running worker(s) stopped with it"):format(#running) }, 0)
      end
      while #running < width and next_i <= #tasks do
        if o.on_start then o.on_start(tasks[next_i], next_i) end   -- it may fill in the task
        local r, failed = start(tasks[next_i], next_i)
        if r then running[#running + 1] = r else results[next_i] = failed end
        next_i = next_i + 1
      end
      local any, failed = collect(running, results, o)
      if failed then
        error(("worker %d (%s) ended with %s %s"):format(failed.i, tostring(failed.task.argv[2] or failed.task.argv[1]),
          results[failed.i].how, tostring(results[failed.i].code)), 0)
      end
      if not any and #running > 0 then core.sys.sleep(poll) end
    end
  end)
  if not ok then stop(running, 15) end
  core.sigint_trap(false)
  if not ok then
    if o.on_stop then o.on_stop() end
    error(err, 0)
  end
  return results
end

return jobs

--- The hostile-input battery: bad flags to every script, bad arguments to the
-- library, corrupted files to every reader, outputs in the way, signals and
-- planted code, run against a build of bbb with each outcome classified. A
-- developer reruns it after a change:
--   build/bbblua tests/battery.lua                            # this checkout's build
--   build/bbblua tests/battery.lua --target OTHER_CHECKOUT    # another build (before/after)
-- The cases live in tests/battery/*.lua; this file sets up the fixtures, runs
-- the cases (two at a time by default) and counts the outcomes:
--   clean       refused with a message a person reads ("script.lua: ...",
--               "bbb.fn: ...", argparse's usage error), no traceback
--   unclear     refused, but the message is buried in a traceback or missing
--   silent      accepted what it should refuse
--   data loss   a file that should survive did not
--   code exec   a planted Lua file ran
--   hang        still running after the time limit
--   crash       ended by a signal it did not ask for
--   ok          ran (or, for a robustness case, ended) as it should; a case
--               with verify also gave the right numbers (else: silent)
local sys = require("bbb.core").sys
local argparse = require "argparse"
local json = require "bbb.json"

local p = argparse("battery.lua", "Runs the hostile-input battery against a build and counts the outcomes.")
p:option("--target", "The checkout whose build/bbblua is tested (default: this one).")
p:option("--build", "The build folder, under the target checkout unless absolute.", "build")
p:option("--timeout", "Seconds before a case counts as hung.", "30")
p:option("--jobs", "Cases run at once.", "2")
p:option("--only", "Run only the cases whose name contains this text.")
p:option("--json", "Also write the counts and every finding to this JSON file.")
p:flag("--verbose", "Print every case's output.")
local args = p:parse(arg)

local function absolute(path)
  return path:sub(1, 1) == "/" and path or os.getenv("PWD") .. "/" .. path
end
local here = absolute(arg[0]:match("^(.*)/tests/[^/]*$") or ".")
local root = absolute(args.target or here)
local limit, jobs = tonumber(args.timeout), tonumber(args.jobs)
assert(limit and limit > 0 and jobs and jobs >= 1, "battery.lua: --timeout and --jobs must be positive numbers")
local bbblua = (args.build:sub(1, 1) == "/" and args.build or root .. "/" .. args.build) .. "/bbblua"
assert(sys.kind(bbblua) == "file", "battery.lua: no build at " .. bbblua)

local work = os.tmpname()
os.remove(work)
assert(sys.mkdir_p(work .. "/fx"))
-- Tools run without the sanitizer runtime a sanitized build preloads: it
-- makes find, ps and friends misbehave.
local function sh(argv, cwd)
  argv = { "env", "-u", "LD_PRELOAD", table.unpack(argv) }
  local pid = assert(sys.spawn(argv, { cwd = cwd or work, stdin = "/dev/null", stdout = "/dev/null", stderr = "/dev/null" }))
  local how, code = sys.wait(pid)
  return how == "exit" and code == 0
end
assert(sh { "ln", "-s", root .. "/data", work .. "/data" })

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local ctx = {
  here = here, root = root, bbblua = bbblua, S = root .. "/scripts/", work = work, fx = work .. "/fx",
  read = read, write = write, sh = sh, kind = sys.kind, cases = {},
  PWNED = work .. "/PWNED",
}
-- check: "refuse" (must be refused with a clear message), "ok" (must
-- succeed), "robust" (either; a refusal must be clear), or a
-- function(how, code, out) saying whether the user's files survived; with
-- refuse = true such a case must also be refused clearly.
function ctx.case(name, argv, check, opts)
  opts = opts or {}
  if args.only and not name:find("^fixture:") and not name:find(args.only, 1, true) then return end
  local c = { name = name, argv = argv, check = check or "refuse", group = ctx.group }
  for k, v in pairs(opts) do c[k] = v end
  ctx.cases[#ctx.cases + 1] = c
end
function ctx.lua(code) return { bbblua, "-e", code } end
-- Processes still running in the work folder (the cases' folder) once a
-- case has ended: workers or children it left behind. They are killed, so
-- the next case starts on a quiet machine.
function ctx.leftover()
  local left = false
  local ls = io.popen("env -u LD_PRELOAD ls -l /proc/[0-9]*/cwd 2>/dev/null")
  for line in ls:lines() do
    local pid, dir = line:match("/proc/(%d+)/cwd %-> (.*)$")
    if pid and dir == work then
      left = true
      sys.kill(tonumber(pid), 9)
    end
  end
  ls:close()
  return left
end

local function load_cases(name)
  ctx.group = name
  dofile(here .. "/tests/battery/" .. name .. ".lua")(ctx)
end
load_cases("fixtures")   -- trains the small models the other cases open
for _, name in ipairs { "sequence", "planted", "flags", "outputs", "library", "files", "tables", "signals", "semantic" } do
  load_cases(name)
end

-- Classification.
local function message_is_clear(c, out)
  local first = out:match("[^\n]*%S[^\n]*") or ""
  if c.argv[2] == "-e" then
    -- library code run by the interpreter: the message must name the
    -- function (bbb.fn:, ELBO:, load: ...) or the argument (bad argument #k to 'fn')
    local msg = first:match("%(command line%):%d+: (.*)$") or first:match("^%S*bbblua: (.*)$") or first
    -- "Linear: ...", "bbb.load: ...", "ScaleMixture prior: ..."
    return msg:find("^[%w_.:]+ ?[%w_]*: ") ~= nil or msg:find("^bad argument #%d+ to '[%w_.:]+'") ~= nil
  end
  if out:find("stack traceback", 1, true) then return false end
  -- an internal position ("predict.lua: .../tabular.lua:241: ...") is for
  -- a developer, not for the person who ran the script
  if first:find("%.lua:%d+: ") then return false end
  return first:find("^[%w_.]+%.lua: ") or first:find("bbb%.[%w_.]+: ") or out:find("\nError: ")
    or first:find("^Usage:") or first:find("^Error: ")
end

local function classify(c, how, code, out)
  if read(ctx.PWNED) then
    os.remove(ctx.PWNED)
    return "code exec"
  end
  if how == "hang" then return "hang" end
  -- a sanitized build reports memory and undefined-behaviour errors and exits 1
  if out:find("ERROR: AddressSanitizer", 1, true) or out:find("runtime error: ", 1, true) then return "crash" end
  if c.leftover and c.leftover() then return "hang" end
  if c.expect_exit then
    -- a signal case: 128 + N is the answer; 0 takes the signal as the end
    -- of the work, and dying of the signal skips the script's own ending
    if how == "exit" and code == c.expect_exit then return "ok" end
    if how == "exit" then return code == 0 and "silent" or "unclear" end
    return "crash"
  end
  -- a signal no process can catch (SIGKILL) or one left to its default
  -- (SIGPIPE, SIGUSR1): dying of it is the answer, with nothing left behind
  if c.dies then return how == "signal" and code == c.signal and "ok" or "crash" end
  if how == "signal" and not (c.signal and code == c.signal) then return "crash" end
  if c.check == "ok" then
    if code ~= 0 then return "unclear" end
    return (c.verify and not c.verify()) and "silent" or "ok"
  end
  if type(c.check) == "function" then
    if not c.check(how, code, out) then return "data loss" end
    if not c.refuse then return "ok" end
  end
  if how == "exit" and code == 0 then return c.check == "robust" and "ok" or "silent" end
  if how == "signal" then return "ok" end
  if c.want and not out:find(c.want, 1, true) then return "unclear" end   -- refused, but for another reason
  return message_is_clear(c, out) and "clean" or "unclear"
end

-- Running: up to --jobs cases at once; a case with serial = true runs alone
-- (it depends on what the cases before it left).
local running = {}
local function start(i, c)
  if c.prep then c.prep() end
  local out = ("%s/.out%d"):format(work, i)
  os.remove(out)
  local pid = assert(sys.spawn(c.argv, { cwd = work, stdin = "/dev/null", stdout = out, stderr = out }))
  running[#running + 1] = { i = i, c = c, pid = pid, out = out, t0 = sys.clock and sys.clock() or os.time(), sent = false }
end

local function now() return os.time() end
local counts = { clean = 0, unclear = 0, silent = 0, ["data loss"] = 0, ["code exec"] = 0, hang = 0, crash = 0, ok = 0 }
local findings, done = {}, 0
local function finish(r, how, code)
  local out = read(r.out) or ""
  os.remove(r.out)
  local class = classify(r.c, how, code, out)
  counts[class] = counts[class] + 1
  done = done + 1
  local bad = class ~= "clean" and class ~= "ok"
  if bad then findings[#findings + 1] = { case = r.c.name, group = r.c.group, class = class, output = out:sub(1, 400) } end
  if args.verbose or bad then
    print(("%4d/%d %-10s %s"):format(done, #ctx.cases, class, r.c.name))
    print("      " .. (out:gsub("\n+$", ""):gsub("\n", "\n      "):sub(1, 600)))
  elseif done % 250 == 0 then
    print(("%4d/%d cases run"):format(done, #ctx.cases))
  end
  io.stdout:flush()
end

-- Whether a signal case's process is far enough into its work: the file
-- it names exists, or --delay seconds have passed since its first output
-- (after_output; counting from the start instead would make the case
-- depend on how long a loaded machine takes to start the script), or
-- since it started.
local function ready_for_signal(r)
  local c = r.c
  if c.ready then return read(work .. "/" .. c.ready) ~= nil end
  if not c.after_output then return now() - r.t0 >= (c.delay or 0) end
  if not r.spoke then
    local out = read(r.out)
    if out and #out > 0 then r.spoke = now() end
    return false
  end
  return now() - r.spoke >= (c.delay or 0)
end

local function poll()
  for k = #running, 1, -1 do
    local r = running[k]
    if r.c.signal and not r.sent then
      if ready_for_signal(r) or now() - r.t0 > limit then
        r.sent = now()
        sys.sleep(0.3)
        sys.kill(r.pid, r.c.signal)
      end
    end
    local how, code = sys.wait(r.pid, true)
    if not how and now() - r.t0 > (r.c.timeout or limit) then
      sys.kill(r.pid, 9)
      sys.wait(r.pid)
      how = "hang"
    end
    if how then
      table.remove(running, k)
      finish(r, how, code)
    end
  end
end

local t0 = os.time()
for i, c in ipairs(ctx.cases) do
  local width = (c.serial or c.signal) and 1 or jobs
  while #running >= width or (c.serial and #running > 0) do
    poll()
    sys.sleep(0.01)
  end
  start(i, c)
  if c.serial then
    while #running > 0 do poll(); sys.sleep(0.01) end
  end
end
while #running > 0 do poll(); sys.sleep(0.01) end
os.execute("rm -rf '" .. work .. "'")

local n = #ctx.cases
local summary = {
  target = root, cases = n, seconds = os.time() - t0, clean = counts.clean, unclear = counts.unclear,
  silent = counts.silent, data_loss = counts["data loss"], code_exec = counts["code exec"], hangs = counts.hang,
  crashes = counts.crash, ran_as_they_should = counts.ok, findings = findings,
}
print(("\n%d cases against %s (%d s): %d clean errors, %d unclear, %d silent, %d data loss, %d code executions, %d hangs, %d crashes, %d ran as they should")
  :format(n, bbblua, summary.seconds, counts.clean, counts.unclear, counts.silent, counts["data loss"],
    counts["code exec"], counts.hang, counts.crash, counts.ok))
if args.json then
  local f = assert(io.open(args.json, "w"))
  f:write(json.encode(summary), "\n")
  f:close()
end

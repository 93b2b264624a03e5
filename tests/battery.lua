--- The hostile-input battery: bad flags, bad library arguments, hostile
-- files, signals and outputs in the way, run against a build of bbb and
-- each outcome classified. A developer reruns it after a change:
--   build/bbblua tests/battery.lua                      # this checkout's build
--   build/bbblua tests/battery.lua --target OTHER_CHECKOUT   # another build (before/after)
-- Classes: clean (refused with a message a person reads: "script.lua: ..."
-- or "bbb.fn: ...", no traceback), unclear (refused, but the message is
-- buried in a traceback or missing), silent (accepted what it should
-- refuse), data loss (a file that should survive did not), hang (still
-- running after the time limit), crash (ended by a signal).
local sys = require("bbb.core").sys
local argparse = require "argparse"

local p = argparse("battery.lua", "Runs the hostile-input battery against a build and counts the outcomes.")
p:option("--target", "The checkout whose build/bbblua is tested (default: this one).")
p:option("--timeout", "Seconds before a case counts as hung.", "20")
p:flag("--verbose", "Print every case's output.")
local args = p:parse(arg)

local here = (arg[0]:match("^(.*)/tests/[^/]*$") or ".")
if here:sub(1, 1) ~= "/" then here = os.getenv("PWD") .. "/" .. here end
local root = args.target or here
if root:sub(1, 1) ~= "/" then root = os.getenv("PWD") .. "/" .. root end
local bbblua = root .. "/build/bbblua"
local limit = tonumber(args.timeout)

local work = os.tmpname()
os.remove(work)
assert(sys.mkdir_p(work))
assert(sys.spawn({ "ln", "-s", root .. "/data", work .. "/data" }))
sys.sleep(0.2)

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

-- Runs argv in the work folder; returns how it ended and its output.
local function run(argv, opts)
  opts = opts or {}
  local out = work .. "/.out"
  os.remove(out)
  local pid = assert(sys.spawn(argv, { cwd = work, stdin = "/dev/null", stdout = out, stderr = out }))
  local t0 = os.time()
  if opts.signal then
    while not (opts.ready and read(work .. "/" .. opts.ready)) and os.time() - t0 < limit do sys.sleep(0.05) end
    sys.sleep(0.3)
    sys.kill(pid, opts.signal)
  end
  while true do
    local how, code = sys.wait(pid, true)
    if how then return how, code, read(out) or "" end
    if os.time() - t0 > limit then
      sys.kill(pid, 9)
      sys.wait(pid)
      return "hang", nil, read(out) or ""
    end
    sys.sleep(0.05)
  end
end

local S = root .. "/scripts/"
local SMALL = { "--limit", "200", "--test-limit", "100", "--hidden", "8", "--threads", "1", "--test-samples", "1" }
local function mnist(...)
  local a = { bbblua, S .. "mnist.lua" }
  for _, w in ipairs(SMALL) do a[#a + 1] = w end
  for _, w in ipairs { ... } do a[#a + 1] = w end
  return a
end
local function lua(code) return { bbblua, "-e", code } end

local cases = {}
-- check: nil (must be refused with a clear message), "ok" (must succeed),
-- or a function(how, code, out) that says whether the work survived; with
-- refuse = true the case must also be refused clearly.
local function case(name, argv, check, refuse)
  cases[#cases + 1] = { name = name, argv = argv, check = check, refuse = refuse }
end

-- Bad flags: every script must refuse them before any work.
for _, s in ipairs { "mnist", "ood", "regression", "grid", "prune", "table1", "bandit" } do
  case(s .. " --seed 1.5", { bbblua, S .. s .. ".lua", "--seed", "1.5" })
  case(s .. " --nope", { bbblua, S .. s .. ".lua", "--nope" })
end
for _, f in ipairs { { "--hidden", "0" }, { "--lr", "nan" }, { "--threads", "0" }, { "--epochs", "-1" },
                     { "--pixel-scale", "1e300" }, { "--batch", "0" }, { "--dataset", "cifar" },
                     { "--prior", "missing.lua" }, { "--sigma2", "0" }, { "--kl-weight", "inf" } } do
  case("mnist " .. table.concat(f, " "), { bbblua, S .. "mnist.lua", f[1], f[2] })
end
case("bandit --out ''", { bbblua, S .. "bandit.lua", "--steps", "5", "--out", "" })
case("regression --out '|cmd'", { bbblua, S .. "regression.lua", "--task", "toy", "--steps", "3", "--out", "|touch pwned;.png" },
  function() return not read(work .. "/pwned") end)
case("grid -- --lr 1 (a grid axis given as an mnist flag)", { bbblua, S .. "grid.lua", "--epochs", "1", "--limit", "100",
  "--val", "50", "--results", "g.jsonl", "--jobs", "1", "--", "--lr", "1" })

-- Bad arguments to the library.
for _, code in ipairs {
  "bbb.zeros('abc')", "bbb.zeros(nil)", "bbb.tensor{1e39}", "bbb.randn(2, 3):softmax(3)",
  "bbb.linspace(0, 0/0, 5)", "bbb.from_bytes('abc', {2, 2})",
  "bbb.elbo.ELBO{n_data = 10, n_batches = 1, kl_weight = math.huge}",
  "bbb.optim.SGD(bbb.nn.Linear(2, 2), {lr = 0.1, momentum = 1})",
  "bbb.optim.Adam(bbb.nn.Linear(2, 2), {lr = 0.1, betas1 = 0.9})",
  "bbb.conv2d(bbb.randn(1, 1, 4, 4), bbb.randn(2, 1, 9, 9))",
  "bbb.data.load_mnist{split = 'train', scale = 0/0}",
  "bbb.data.read_csv('data/none.csv')",
} do
  case("lib " .. code, lua(code))
end

-- Hostile and odd files.
write(work .. "/garbage.ckpt", ("\255"):rep(64))
write(work .. "/huge_header.ckpt", string.pack("<I8", 1 << 40) .. "{}")
case("bbb.load(garbage)", lua("bbb.load('garbage.ckpt')"))
case("bbb.load(header larger than the file)", lua("bbb.load('huge_header.ckpt')"))
case("bbb.load(a folder)", lua("bbb.load('data')"))
case("bbb.load(a FIFO) does not block", lua("os.execute('mkfifo f1'); bbb.load('f1')"))
case("make a FIFO", { bbblua, "-e", "os.execute('mkfifo f2')" }, "ok")
case("mnist --resume FIFO", mnist("--resume", "f2"))
case("bandit --data a FIFO", { bbblua, S .. "bandit.lua", "--steps", "5", "--data", "f2" })
case("read_csv of a FIFO", lua("bbb.data.read_csv('f2')"))

-- Outputs in the way and work that must survive.
case("save over a FIFO leaves it", lua("os.execute('mkfifo f3'); bbb.save('f3', bbb.nn.Linear(2, 2))"),
  function() return sys.kind(work .. "/f3") == "fifo" end, true)
write(work .. "/target.txt", "precious")
case("save through a symlink leaves its target", lua("os.execute('ln -sf target.txt link.ckpt'); bbb.save('link.ckpt', bbb.nn.Linear(2, 2))"),
  function() return read(work .. "/target.txt") == "precious" end, true)
case("a trained run", mnist("--epochs", "1", "--checkpoint", "a/run.ckpt", "--log", "a/run.jsonl", "--save", "a/model.ckpt"), "ok")
case("copy the checkpoint", { "cp", "a/run.ckpt", "copy.ckpt" }, "ok")
case("--resume of a copy leaves the original run's files", { bbblua, S .. "mnist.lua", "--resume", "copy.ckpt", "--epochs", "2" },
  function(how, code)
    return how == "exit" and code == 0 and read(work .. "/a/run.jsonl") and #read(work .. "/a/run.jsonl") > 0
      and select(2, read(work .. "/a/run.jsonl"):gsub("\n", "")) == 1
  end)
case("--checkpoint X --log X", mnist("--epochs", "1", "--checkpoint", "same.x", "--log", "same.x"))
case("--save into a folder that cannot be made (checked before training)", mnist("--epochs", "3", "--save", "target.txt/m.ckpt"),
  function(_, _, out) return not out:find("epoch  1", 1, true) end, true)
write(work .. "/old.jsonl", '{"kept":1}\n')
case("--log appends", mnist("--epochs", "1", "--log", "old.jsonl"), function() return read(work .. "/old.jsonl"):find('^{"kept":1}') ~= nil end)
case("SIGTERM saves the run", mnist("--epochs", "2000", "--log", "t.jsonl"),
  function(how, code) return how == "exit" and code == 143 and read(work .. "/mnist-interrupted.ckpt") ~= nil end)
cases[#cases].opts = { signal = 15, ready = "t.jsonl" }
case("SIGHUP saves the run, in a file of its own", mnist("--epochs", "2000", "--log", "h.jsonl"),
  function(how, code) return how == "exit" and code == 129 and read(work .. "/mnist-interrupted-2.ckpt") ~= nil end)
cases[#cases].opts = { signal = 1, ready = "h.jsonl" }

-- Classification. A case with a check function passes when it returns true
-- (else: data loss); one with "ok" must succeed; every other case must be
-- refused with a clear message.
local counts = { clean = 0, unclear = 0, silent = 0, ["data loss"] = 0, hang = 0, crash = 0, ok = 0 }
local function classify(c, how, code, out)
  if how == "hang" then return "hang" end
  if how == "signal" then return "crash" end
  if c.check == "ok" then return code == 0 and "ok" or "unclear" end
  if type(c.check) == "function" then
    if not c.check(how, code, out) then return "data loss" end
    if not c.refuse then return "ok" end
  end
  if code == 0 then return "silent" end
  local first = out:match("[^\n]*%S[^\n]*") or ""
  if c.argv[2] == "-e" then
    -- library code run by the interpreter: its traceback is the interpreter's
    -- way; the message must name the function (bbb.fn:, ELBO:, SGD:, load: ...)
    local msg = first:match("%(command line%):%d+: (.*)$") or first
    return msg:find("^[%w_.]+: ") and "clean" or "unclear"
  end
  if out:find("stack traceback", 1, true) then return "unclear" end
  if first:find("^[%w_.]+%.lua: ") or first:find("bbb%.[%w_.]+: ") or first:find("^[%w_.]+%.lua:%d*:? ?.*bbb")
    or out:find("\nError: ") or first:find("^Usage:") then
    return "clean"
  end
  return "unclear"
end

local t0 = sys.sleep and os.time()
for i, c in ipairs(cases) do
  local how, code, out = run(c.argv, c.opts)
  local class = classify(c, how, code, out)
  counts[class] = counts[class] + 1
  print(("%3d/%d %-10s %s"):format(i, #cases, class, c.name))
  if args.verbose or (class ~= "clean" and class ~= "ok") then
    print("      " .. (out:gsub("\n+$", ""):gsub("\n", "\n      "):sub(1, 600)))
  end
  io.stdout:flush()
end
os.execute("rm -rf '" .. work .. "'")
print(("\n%d cases against %s (%d s): %d clean errors, %d unclear, %d silent, %d data loss, %d hangs, %d crashes, %d ran as they should")
  :format(#cases, bbblua, os.time() - t0, counts.clean, counts.unclear, counts.silent, counts["data loss"],
    counts.hang, counts.crash, counts.ok))

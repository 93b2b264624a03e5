--- Cases that depend on the ones before them: a trained run, its copy, its
-- resume, logs that must keep their records, signals that must save.
return function(t)
  local B, S, read, work = t.bbblua, t.S, t.read, t.work
  local SMALL = { "--limit", "200", "--test-limit", "100", "--hidden", "8", "--threads", "1", "--test-samples", "1" }
  local function mnist(...)
    local a = { B, S .. "mnist.lua" }
    for _, w in ipairs(SMALL) do a[#a + 1] = w end
    for _, w in ipairs { ... } do a[#a + 1] = w end
    return a
  end
  local serial = { serial = true }
  t.case("make a FIFO", t.lua("os.execute('mkfifo f2')"), "ok", serial)
  t.case("bbb.load(a FIFO) does not block", t.lua("os.execute('mkfifo f1'); bbb.load('f1')"), "refuse", serial)
  t.case("mnist --resume FIFO", mnist("--resume", "f2"), "refuse", serial)
  t.case("bandit --data a FIFO", { B, S .. "bandit.lua", "--steps", "5", "--data", "f2" }, "refuse", serial)
  t.case("read_csv of a FIFO", t.lua("bbb.data.read_csv('f2')"), "refuse", serial)
  t.case("save over a FIFO leaves it", t.lua("os.execute('mkfifo f3'); bbb.save('f3', bbb.nn.Linear(2, 2))"),
    function() return t.kind(work .. "/f3") == "fifo" end, { refuse = true, serial = true })
  t.write(work .. "/target.txt", "precious")
  t.case("save through a symlink leaves its target",
    t.lua("os.execute('ln -sf target.txt link.ckpt'); bbb.save('link.ckpt', bbb.nn.Linear(2, 2))"),
    function() return read(work .. "/target.txt") == "precious" end, { refuse = true, serial = true })
  t.case("a trained run", mnist("--epochs", "1", "--checkpoint", "a/run.ckpt", "--log", "a/run.jsonl", "--save", "a/model.ckpt"),
    "ok", serial)
  t.case("copy the checkpoint", { "env", "-u", "LD_PRELOAD", "cp", "a/run.ckpt", "copy.ckpt" }, "ok", serial)
  t.case("--resume of a copy leaves the original run's files", { B, S .. "mnist.lua", "--resume", "copy.ckpt", "--epochs", "2" },
    function(how, code)
      local log = read(work .. "/a/run.jsonl")
      return how == "exit" and code == 0 and log and #log > 0 and select(2, log:gsub("\n", "")) == 1
    end, serial)
  t.case("--checkpoint X --log X", mnist("--epochs", "1", "--checkpoint", "same.x", "--log", "same.x"), "refuse", serial)
  t.case("--save into a folder that cannot be made (checked before training)", mnist("--epochs", "3", "--save", "target.txt/m.ckpt"),
    function(_, _, out) return not out:find("epoch  1", 1, true) end, { refuse = true, serial = true })
  t.write(work .. "/old.jsonl", '{"kept":1}\n')
  t.case("--log appends", mnist("--epochs", "1", "--log", "old.jsonl"),
    function() return read(work .. "/old.jsonl"):find('^{"kept":1}') ~= nil end, serial)
  t.case("SIGTERM saves the run", mnist("--epochs", "2000", "--log", "t.jsonl"),
    function(how, code) return how == "exit" and code == 143 and read(work .. "/mnist-interrupted.ckpt") ~= nil end,
    { signal = 15, ready = "t.jsonl", serial = true })
  t.case("SIGHUP saves the run, in a file of its own", mnist("--epochs", "2000", "--log", "h.jsonl"),
    function(how, code) return how == "exit" and code == 129 and read(work .. "/mnist-interrupted-2.ckpt") ~= nil end,
    { signal = 1, ready = "h.jsonl", serial = true })
  t.case("regression --out '|cmd' runs nothing", { B, S .. "regression.lua", "--task", "toy", "--steps", "3", "--out", "|touch pwned;.png" },
    function() return not read(work .. "/pwned") end, serial)
end

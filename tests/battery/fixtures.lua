--- The files the other cases open: small tables, a planted prior, a FIFO, a
-- folder, and small models trained by the build under test. Every fixture
-- case must succeed ("ok"); they run alone, before the rest.
return function(t)
  local fx = t.fx
  local rows = { "y,a,b,c,kind" }
  local rng = 12345
  local function rand()
    rng = (rng * 1103515245 + 12345) % 2147483648
    return rng / 2147483648
  end
  for i = 1, 80 do
    local a, b, c = rand(), rand(), rand()
    rows[#rows + 1] = ("%.5f,%.5f,%.5f,%.5f,%s"):format(a + 2 * b - c + 0.1 * rand(), a, b, c, ({ "u", "v", "w" })[i % 3 + 1])
  end
  t.write(fx .. "/small.csv", table.concat(rows, "\n") .. "\n")
  local crows = { "label,a,b" }
  for i = 1, 80 do
    local a, b = rand(), rand()
    crows[#crows + 1] = ("%s,%.5f,%.5f"):format(a + b > 1 and "yes" or "no", a, b)
  end
  t.write(fx .. "/class.csv", table.concat(crows, "\n") .. "\n")
  -- Running this file is the code execution the battery watches for.
  t.write(fx .. "/evil.lua", ("io.open(%q, 'w'):write('ran'):close() return {}\n"):format(t.PWNED))
  t.write(fx .. "/empty", "")
  t.write(fx .. "/garbage", ("\0\255\1\254garbage\n"):rep(40))
  t.write(fx .. "/precious.txt", "precious")
  assert(t.sh { "mkfifo", fx .. "/fifo" })
  assert(t.sh { "mkdir", "-p", fx .. "/dir" })

  local S, B = t.S, t.bbblua
  local serial = { serial = true }
  t.case("fixture: fit a regression model", { B, S .. "fit.lua", "--data", "fx/small.csv", "--target", "y", "--epochs", "3",
    "--save", "fx/model.ckpt", "--threads", "1" }, "ok", serial)
  t.case("fixture: fit a classifier", { B, S .. "fit.lua", "--data", "fx/class.csv", "--target", "label", "--epochs", "3",
    "--save", "fx/class.ckpt", "--threads", "1" }, "ok", serial)
  t.case("fixture: a small MNIST run", { B, S .. "mnist.lua", "--limit", "200", "--test-limit", "100", "--hidden", "8",
    "--threads", "1", "--test-samples", "1", "--epochs", "1", "--save", "fx/mnist.ckpt", "--checkpoint", "fx/run.ckpt",
    "--log", "fx/run.jsonl", "--summary", "fx/summary.json" }, "ok", serial)
  t.case("fixture: a small grid", { B, S .. "grid.lua", "--epochs", "1", "--limit", "100", "--val", "50", "--hidden", "8",
    "--jobs", "1", "--lr", "0.001", "--pi", "0.25", "--log-sigma1", "0", "--log-sigma2", "6",
    "--samples", "1", "--results", "fx/grid.jsonl" }, "ok", serial)
end

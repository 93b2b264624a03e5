--- What one flag at a time cannot find: pairs of flags that cannot act
-- together, numbers at float32's edges and far from zero, a parent killed
-- by a signal it cannot catch while its workers run. Written from the
-- scripts' --help, so the same cases run against any build.
local json = require "bbb.json"

-- A table whose target is `centre` plus a spread of about `spread`, with a
-- feature column of `feature` (a number as text) in its third row.
local function edge_table(t, path, centre, spread, feature)
  local rows = { "a,b,y" }
  for i = 1, 120 do
    local a, b = math.sin(i * 1.3), math.cos(i * 0.7)
    local cell = i == 3 and feature or ("%.5f"):format(a)
    rows[#rows + 1] = ("%s,%.5f,%.17g"):format(cell, b, centre + spread * (a - b + 0.1 * math.sin(i * 7.7)))
  end
  t.write(t.fx .. "/" .. path, table.concat(rows, "\n") .. "\n")
end

-- The summary a case wrote says the fit kept its digits: a test RMSE below
-- the spread, where float32 steps of the size of the spread give more, and
-- above the noise the table holds (about 0.07 of the spread): an RMSE of
-- nothing is targets rounded to the same float as their predictions.
local function rmse_between(t, file, low, high)
  return function()
    local text = t.read(t.work .. "/" .. file)
    local ok, s = pcall(json.decode, text or "")
    local r = ok and type(s) == "table" and type(s.test) == "table" and s.test.rmse
    return type(r) == "number" and r > low and r < high
  end
end

local function conflicts(t)
  local B, S = t.bbblua, t.S
  local fit = { B, S .. "fit.lua", "--data", "fx/small.csv", "--target", "y", "--tune", "off", "--threads", "1", "--epochs", "2" }
  local cls = { B, S .. "fit.lua", "--data", "fx/class.csv", "--target", "label", "--tune", "off", "--threads", "1", "--epochs", "2" }
  local function with(base, ...)
    local argv = { table.unpack(base) }
    for _, w in ipairs { ... } do argv[#argv + 1] = w end
    return argv
  end
  local pairs_ = {
    { "fit --members without an ensemble", with(fit, "--members", "3") },
    { "fit --dropout with bbb", with(fit, "--dropout", "0.3") },
    { "fit --weight-decay with bbb", with(fit, "--weight-decay", "0.01") },
    { "fit --prior-sigma with mlp", with(fit, "--model", "mlp", "--prior-sigma", "0.5") },
    { "fit --rho-init with dropout", with(fit, "--model", "dropout", "--rho-init", "-4") },
    { "fit --kl-weight with ensemble", with(fit, "--model", "ensemble", "--kl-weight", "0.5") },
    { "fit --samples with mlp", with(fit, "--model", "mlp", "--samples", "3") },
    { "fit --estimator with dropout", with(fit, "--model", "dropout", "--estimator", "flipout") },
    { "fit --epochs 0", with(fit, "--epochs", "0") },
    { "fit --df without student-t", with(fit, "--df", "5") },
    { "fit student-t with hetero noise", with(fit, "--likelihood", "student-t", "--noise", "hetero") },
    { "fit --conformal on a classifier", with(cls, "--conformal") },
    { "fit --noise on a classifier", with(cls, "--noise", "hetero") },
    { "fit --likelihood on a classifier", with(cls, "--likelihood", "student-t") },
    { "fit --task regression on text", { B, S .. "fit.lua", "--data", "fx/class.csv", "--target", "label", "--task", "regression" } },
    { "fit every feature ignored", with(fit, "--ignore", "a", "--ignore", "b", "--ignore", "c", "--ignore", "kind") },
    { "fit --split a FIFO", with(fit, "--split", "fx/fifo") },
    { "fit --test without the target", with(fit, "--test", "fx/no_target.csv") },
    { "predict --id with --keep-columns", { B, S .. "predict.lua", "--model", "fx/model.ckpt", "--data", "fx/small.csv",
      "--id", "kind", "--keep-columns", "--out", "sem_p.csv" } },
    { "predict a text target with a regression model", { B, S .. "predict.lua", "--model", "fx/model.ckpt", "--data",
      "fx/text_target.csv", "--out", "sem_p2.csv" }, "the model predicts numbers" },
    { "predict a numeric column turned text", { B, S .. "predict.lua", "--model", "fx/model.ckpt", "--data",
      "fx/text_feature.csv", "--out", "sem_p3.csv" }, "holds text now" },
  }
  for _, c in ipairs(pairs_) do t.case("semantic: " .. c[1] .. " is refused", c[2], "refuse", { want = c[3] }) end
end

local function edges(t)
  local B, S = t.bbblua, t.S
  t.write(t.fx .. "/no_target.csv", "y_not,a,b,c,kind\n1,0.1,0.2,0.3,u\n")
  t.write(t.fx .. "/text_target.csv", "y,a,b,c,kind\nhigh,0.1,0.2,0.3,u\nlow,0.2,0.1,0.3,v\n")
  t.write(t.fx .. "/text_feature.csv", "a,b,c,kind\nlow,0.2,0.3,u\nhigh,0.1,0.3,v\n")
  local tables = {
    { "near 1e8, spread 1", 1e8, 1, "0.5", 0.6 },
    { "near -3e7, spread 0.5", -3e7, 0.5, "0.5", 0.3 },
    { "near 1e12, spread 2000", 1e12, 2000, "0.5", 1200 },
    { "near 0, spread 1e-6", 0, 1e-6, "0.5", 6e-7 },
  }
  for k, e in ipairs(tables) do
    local file, summary = ("edge%d.csv"):format(k), ("sem_edge%d.json"):format(k)
    edge_table(t, file, e[2], e[3], e[4])
    t.case(("semantic: a target %s keeps its digits"):format(e[1]), { B, S .. "fit.lua", "--data", "fx/" .. file,
      "--target", "y", "--tune", "off", "--threads", "1", "--epochs", "300", "--summary", summary }, "ok",
      { verify = rmse_between(t, summary, 0.02 * e[3], e[5]) })
  end
  for k, v in ipairs { "1e39", "-1e300", "3.5e38" } do
    local file = ("huge%d.csv"):format(k)
    edge_table(t, file, 0, 1, v)
    t.case(("semantic: a feature of %s is refused with its row"):format(v), { B, S .. "fit.lua", "--data", "fx/" .. file,
      "--target", "y", "--tune", "off", "--threads", "1", "--epochs", "2" }, "refuse")
  end
end

-- SIGKILL, SIGPIPE and SIGUSR1 end the parent without a word: its ensemble
-- workers must end with it and leave no temporary folder.
local function parent_deaths(t)
  local B, S = t.bbblua, t.S
  for _, sig in ipairs { { "KILL", 9 }, { "PIPE", 13 }, { "USR1", 10 }, { "TERM", 15 } } do
    local tmp = ("tmp_%s"):format(sig[1])
    assert(t.sh { "mkdir", "-p", t.work .. "/" .. tmp })
    t.case(("semantic: fit's ensemble workers end with a parent killed by SIG%s"):format(sig[1]),
      { "env", "TMPDIR=" .. t.work .. "/" .. tmp, B, S .. "fit.lua", "--data", "fx/small.csv", "--target", "y",
        "--model", "ensemble", "--members", "4", "--threads", "2", "--tune", "off", "--epochs", "100000",
        "--min-epochs", "100000", "--patience", "100000" },
      function() return true end,
      { signal = sig[2], delay = 3, timeout = 60, serial = true, dies = sig[2] ~= 15,
        expect_exit = sig[2] == 15 and 128 + 15 or nil,
        leftover = function()
          local left = t.leftover()
          os.execute("sleep 1")
          local p = io.popen("ls -A '" .. t.work .. "/" .. tmp .. "'")
          local entries = p:read("a")
          p:close()
          return left or entries ~= ""
        end })
  end
end

-- Ctrl-C while a big table is read (in C, where no Lua runs) or trained on:
-- 130 either way, never a failure's 1 or 2.
local function interrupt_reading(t)
  local rows = { "a,b,c,y" }
  for i = 1, 300000 do rows[#rows + 1] = ("%.4f,%.4f,%.4f,%.4f"):format(i % 97 / 97, i % 89 / 89, i % 83 / 83, i % 7) end
  t.write(t.fx .. "/big.csv", table.concat(rows, "\n") .. "\n")
  t.case("semantic: SIGINT while fit reads a big table ends with 130", { t.bbblua, t.S .. "fit.lua", "--data", "fx/big.csv",
    "--target", "y", "--threads", "1" }, nil, { expect_exit = 130, signal = 2, delay = 0, timeout = 60, serial = true })
end

return function(t)
  interrupt_reading(t)
  edges(t)
  conflicts(t)
  parent_deaths(t)
end

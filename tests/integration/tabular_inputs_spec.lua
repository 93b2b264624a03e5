-- fit.lua and predict.lua on input a hostile user gives: flags that cannot
-- act in the run, files that change or block, numbers at float32's edges.
-- Every refusal comes before any training, naming the flag or the cell.
local bbb = require "bbb"
local H = require "helpers"
local json = require "bbb.json"

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. H.q(dir)))

-- y = x1 - x2 (+ small noise) around `centre`; label "hi" when y > centre.
local function table_csv(path, n, centre, opts)
  opts = opts or {}
  local g = bbb.Generator(3)
  local x = bbb.randn({ n, 3 }, 0, 1, g):totable()
  local lines = { "x1,x2,y,label" }
  for i = 1, n do
    local y = x[i][1] - x[i][2] + 0.1 * x[i][3]
    local cell = ("%.4f"):format(centre + y)
    if opts.blank and i % opts.blank == 0 then cell = "" end
    lines[#lines + 1] = ("%.4f,%.4f,%s,%s"):format(x[i][1], x[i][2], cell, y > 0 and "hi" or "lo")
  end
  H.write(path, table.concat(lines, "\n") .. "\n")
end

local data = dir .. "/t.csv"
table_csv(data, 200, 0)
local fit = "scripts/fit.lua --data " .. H.q(data) .. " --tune off --every 0 "

-- The exit status and output of a run expected to be refused before work.
local function refused(args, want)
  local status, out = H.run(args)
  assert.are.equal(2, status, out)
  H.has(out, want)
  assert.falsy(out:find("trained %d+ epochs"), "it trained first:\n" .. out)
end

describe("a flag that cannot act in the run", function()
  it("is refused before any work, naming the flag and why", function()
    refused(fit .. "--target y --ignore label --members 3", "--members acts on --model ensemble only")
    refused(fit .. "--target y --ignore label --dropout 0.3", "--dropout acts on --model dropout only")
    refused(fit .. "--target y --ignore label --model mlp --prior-sigma 0.5", "--prior-sigma acts on --model bbb only")
    refused(fit .. "--target y --ignore label --epochs 0", "--epochs must be at least 1")
    refused(fit .. "--target label --ignore y --conformal", "--conformal is for regression; 'label' holds classes")
    refused(fit .. "--target label --ignore y --noise hetero", "--noise is for regression")
    refused(("scripts/predict.lua --model x.ckpt --data %s --id x1 --keep-columns"):format(H.q(data)),
      "--keep-columns copies every column, --id one")
  end)

  it("that cannot act at this size is said on one line and in the summary", function()
    local s_path, split = dir .. "/skip.json", dir .. "/no_val.json"
    local train, test = {}, {}
    for i = 1, 180 do train[i] = i end
    for i = 181, 200 do test[#test + 1] = i end
    H.write(split, json.encode { rows = 200, train = train, validation = json.empty_array, test = test })
    local out = H.ok(fit .. ("--target y --ignore label --epochs 3 --min-epochs 0 --split %s --conformal "
      .. "--summary %s"):format(H.q(split), H.q(s_path)), "skipped --conformal: no validation rows")
    local s = json.decode(H.read(s_path))
    assert.are.same({ "--conformal: no validation rows to calibrate on" }, s.skipped)
    assert.truthy(out)
  end)
end)

describe("columns and targets", function()
  it("every column ignored is refused, naming the target", function()
    refused(fit .. "--target y --ignore label --ignore x1 --ignore x2", "no column is left to predict 'y' from")
  end)

  it("a target of many numbers read as classes by --categorical is refused", function()
    local path = dir .. "/many.csv"
    local lines = { "x,y" }
    for i = 1, 200 do lines[#lines + 1] = ("%d,%d"):format(i % 7, i) end
    H.write(path, table.concat(lines, "\n") .. "\n")
    refused(("scripts/fit.lua --data %s --target y --categorical y --tune off"):format(H.q(path)),
      "holds 200 distinct numbers: a quantity, not classes")
  end)

  it("a text target with a value per row is refused: an identifier, not classes", function()
    local path = dir .. "/names.csv"
    local lines = { "x,name" }
    for i = 1, 60 do lines[#lines + 1] = ("%d,person%d"):format(i, i) end
    H.write(path, table.concat(lines, "\n") .. "\n")
    refused(("scripts/fit.lua --data %s --target name --tune off"):format(H.q(path)),
      "the target 'name' holds 60 distinct values in 60 rows: an identifier")
  end)

  it("tuning skipped for the table's size is said and kept in the summary", function()
    local path, s_path = dir .. "/wide.csv", dir .. "/wide.json"
    local head, lines = { "y" }, {}
    for j = 1, 140 do head[#head + 1] = "f" .. j end
    lines[1] = table.concat(head, ",")
    for i = 1, 2000 do
      local row = { ("%.3f"):format(math.sin(i)) }
      for j = 1, 140 do row[#row + 1] = ("%.2f"):format(math.sin(i * j)) end
      lines[#lines + 1] = table.concat(row, ",")
    end
    H.write(path, table.concat(lines, "\n") .. "\n")
    H.ok(("scripts/fit.lua --data %s --target y --epochs 1 --min-epochs 0 --every 0 --summary %s"):format(H.q(path),
      H.q(s_path)), "skipped --tune auto:")
    local s = json.decode(H.read(s_path))
    assert.truthy(s.skipped[1]:find("is over 200000 cells", 1, true), s.skipped[1])
  end)

  it("a --test file without the target, or with empty target cells, is refused before training", function()
    local no_y, blanks = dir .. "/no_y.csv", dir .. "/blanks.csv"
    H.write(no_y, "x1,x2,label\n0.1,0.2,hi\n0.3,0.1,lo\n")
    table_csv(blanks, 30, 0, { blank = 7 })
    refused(fit .. ("--target y --ignore label --test %s"):format(H.q(no_y)), "has no column 'y' to score")
    refused(fit .. ("--target y --ignore label --test %s"):format(H.q(blanks)), "4 rows have no value of 'y'")
  end)

  it("a column whose numbers became text is named as such, not as missing", function()
    local ckpt, text = dir .. "/reg2.ckpt", dir .. "/changed.csv"
    H.ok(fit .. ("--target y --ignore label --epochs 3 --min-epochs 0 --save %s"):format(H.q(ckpt)))
    H.write(text, "x1,x2\nabc,0.2\ndef,0.1\n")
    local status, out = H.run(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(ckpt), H.q(text),
      H.q(dir .. "/p3.csv")))
    assert.are.equal(2, status, out)
    H.has(out, "column 'x1' holds text now (abc, ...); the model was trained on its numbers")
  end)

  it("a text target in predict's file is refused for a regression model", function()
    local ckpt, text = dir .. "/reg.ckpt", dir .. "/text.csv"
    H.ok(fit .. ("--target y --ignore label --epochs 3 --min-epochs 0 --save %s"):format(H.q(ckpt)))
    H.write(text, "x1,x2,y\n0.1,0.2,high\n0.3,0.1,low\n")
    local status, out = H.run(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(ckpt), H.q(text),
      H.q(dir .. "/p.csv")))
    assert.are.equal(2, status, out)
    H.has(out, "column 'y' holds text (high, ...), and the model predicts numbers")
  end)
end)

describe("numbers at float32's edges", function()
  it("a target near 1e8 with spread 1 keeps its digits: fitted, scored and printed", function()
    local path, ckpt, s_path, pred = dir .. "/big.csv", dir .. "/big.ckpt", dir .. "/big.json", dir .. "/big_pred.csv"
    table_csv(path, 300, 1e8)
    H.ok(("scripts/fit.lua --data %s --target y --ignore label --tune off --every 0 --save %s --summary %s")
      :format(H.q(path), H.q(ckpt), H.q(s_path)), "is kept less 100000000")
    local s = json.decode(H.read(s_path))
    -- the spread of y is about 1.4: a model of float32 steps of 8 has an RMSE of about that
    assert.is_true(s.test.rmse < 0.5, tostring(s.test.rmse))
    assert.is_true(s.test.rmse > 0.01, tostring(s.test.rmse))
    H.ok(("scripts/predict.lua --model %s --data %s --out %s"):format(H.q(ckpt), H.q(path), H.q(pred)))
    local lines = {}
    for line in io.lines(pred) do lines[#lines + 1] = line end
    local mean = tonumber(lines[2]:match("^([^,]+)"))
    local observed = tonumber(lines[2]:match("([^,]+)$"))
    assert.is_true(math.abs(mean - observed) < 2, lines[2])
    assert.is_true(mean ~= math.floor(mean), "the mean lost its decimals: " .. lines[2])
  end)

  it("a number beyond float32 is refused with its row and column, not read as a category", function()
    local path = dir .. "/huge.csv"
    H.write(path, "x,y\n1,2\n1e39,3\n2,4\n")
    refused(("scripts/fit.lua --data %s --target y --tune off"):format(H.q(path)),
      "row 2, column 1 ('x'): a number beyond float32's range")
  end)
end)

describe("files", function()
  it("--split naming a FIFO is refused at once, not waited on", function()
    local fifo = dir .. "/split.fifo"
    assert(os.execute("mkfifo " .. H.q(fifo)))
    refused(fit .. ("--target y --ignore label --split %s"):format(H.q(fifo)), "is a fifo, not a file")
  end)

  it("--save-split says when it numbers the rows kept, not the file's", function()
    local path, split = dir .. "/holes.csv", dir .. "/holes_split.json"
    table_csv(path, 100, 0, { blank = 10 })
    H.ok(("scripts/fit.lua --data %s --target y --ignore label --tune off --epochs 2 --min-epochs 0 --save-split %s")
      :format(H.q(path), H.q(split)), "--save-split numbers the 90 rows kept")
    local s = json.decode(H.read(split))
    assert.are.same({ 90, 10 }, { s.rows, s.left_out })
  end)

  it("a file's fingerprint changes when it is appended to or replaced", function()
    local path = dir .. "/fp.csv"
    H.write(path, "a\n1\n")
    local sys = require("bbb.core").sys
    local first = sys.fingerprint(path)
    local f = io.open(path, "ab")
    f:write("2\n")
    f:close()
    local appended = sys.fingerprint(path)
    H.write(path .. ".new", "a\n1\n")
    os.rename(path .. ".new", path)
    local replaced = sys.fingerprint(path)
    assert.are_not.equal(first, appended)
    assert.are_not.equal(appended, replaced)
    assert.are_not.equal(first, replaced)
    assert.is_nil(sys.fingerprint(dir .. "/none"))
  end)

  it("predict.lua --id copies more than 1,000 distinct ids", function()
    local path, ckpt, pred = dir .. "/ids.csv", dir .. "/ids.ckpt", dir .. "/ids_pred.csv"
    local lines = { "id,x1,x2,y" }
    for i = 1, 1500 do lines[#lines + 1] = ("row%d,%.3f,%.3f,%.3f"):format(i, math.sin(i), math.cos(i), math.sin(i) - math.cos(i)) end
    H.write(path, table.concat(lines, "\n") .. "\n")
    H.ok(("scripts/fit.lua --data %s --target y --ignore id --tune off --epochs 2 --min-epochs 0 --save %s")
      :format(H.q(path), H.q(ckpt)))
    H.ok(("scripts/predict.lua --model %s --data %s --id id --out %s"):format(H.q(ckpt), H.q(path), H.q(pred)))
    local n, last = 0, nil
    for line in io.lines(pred) do n, last = n + 1, line end
    assert.are.equal(1501, n)
    assert.truthy(last:match("^row1500,"), last)
  end)
end)

describe("an ensemble trained in processes", function()
  it("takes a table with missing cells, to the same members as in one process", function()
    local path = dir .. "/ens_holes.csv"
    local lines = { "x1,x2,y" }
    for i = 1, 150 do
      local a = i % 9 == 0 and "" or ("%.4f"):format(math.sin(i))
      lines[#lines + 1] = ("%s,%.4f,%.4f"):format(a, math.cos(i), math.sin(i) - math.cos(i))
    end
    H.write(path, table.concat(lines, "\n") .. "\n")
    local tab = require "bbb.app.tabular"
    local got = {}
    for _, threads in ipairs { 1, 2 } do
      local ckpt = ("%s/ens_holes%d.ckpt"):format(dir, threads)
      H.ok(("scripts/fit.lua --data %s --target y --model ensemble --members 2 --noise homo --tune off --epochs 5 "
        .. "--min-epochs 0 --every 0 --threads %d --save %s"):format(H.q(path), threads, H.q(ckpt)))
      got[threads] = tab.load(ckpt)
    end
    for i = 1, 2 do
      local a, b = got[1].members[i]:state_dict(), got[2].members[i]:state_dict()
      for name, t in pairs(a) do assert.are.equal(0, (t - b[name]):abs():max():item(), name) end
    end
  end)
end)

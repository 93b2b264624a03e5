-- bbb.dist over Open MPI: collectives, data-parallel mnist.lua against one
-- process, resume, bad launches. Skipped, saying why, when this build or
-- machine has no MPI.
local bbb = require "bbb"

local build = os.getenv("BBB_BUILD") or "build"
local root = os.getenv("BBB_ROOT") or "."
local bbblua = build .. "/bbblua"

local function sh(cmd)
  local p = assert(io.popen(("cd %q && %s 2>&1; echo \"exit=$?\""):format(root, cmd)))
  local out = p:read("a")
  p:close()
  return tonumber(out:match("exit=(%d+)%s*$")), out
end

local have_mpirun = os.execute("command -v mpirun >/dev/null 2>&1")
local have_module = io.open(build .. "/bbb/dist_mpi.so") ~= nil
local root_flag = ""
do
  local p = io.popen("id -u")
  if p:read("l") == "0" then root_flag = "--allow-run-as-root " end
  p:close()
end
local MPIRUN = ("timeout 120 mpirun %s--oversubscribe -np 2 "):format(root_flag)

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

describe("bbb.dist without mpirun", function()
  it("says why it cannot run", function()
    assert.is_false(bbb.dist.available)
    local ok, err = pcall(bbb.dist.rank)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("bbb.dist.rank: ", 1, true), err)
    local status, out = sh(bbblua .. " scripts/mnist.lua --distributed --epochs 1 --limit 64")
    assert.are_not.equal(0, status)
    assert.truthy(out:find("--distributed: ", 1, true), out)
  end)
end)

if not (have_mpirun and have_module) then
  describe("bbb.dist under mpirun", function()
    pending(("skipped: %s (install libopenmpi-dev and openmpi-bin, then rebuild)"):format(
      not have_mpirun and "mpirun not found" or "this build has no MPI module"))
  end)
  return
end

-- The JSON objects a job printed, one a line (other lines left out).
local function json_lines(out)
  local list = {}
  for line in out:gmatch("[^\n]+") do
    if line:sub(1, 1) == "{" then list[#list + 1] = require("cjson").decode(line) end
  end
  return list
end

-- The records of a JSON-lines results file, decoded, and how many.
local function records(path)
  local list = {}
  for line in io.lines(path) do list[#list + 1] = require("cjson").decode(line) end
  return list, #list
end

-- The set of ranks (mpi_rank) the records say their runs were trained on.
local function ranks_of(list)
  local set = {}
  for _, r in ipairs(list) do if r.mpi_rank then set[math.tointeger(r.mpi_rank)] = true end end
  return set
end

-- a file's bytes; a missing file fails the spec here, not at a comparison
local function read(path) return assert(require("helpers").read(path), path) end

local function max_diff(a, b)
  local ta, tb = bbb.checkpoint.read(a), bbb.checkpoint.read(b)
  local m, n = 0, 0
  for k, t in pairs(ta) do
    if k:match("^model%.") then
      n = n + 1
      m = math.max(m, (t - tb[k]):abs():max():item())
    end
  end
  return m, n
end

describe("bbb.dist under mpirun -np 2", function()
  it("sums, broadcasts and gathers", function()
    local status, out = sh(MPIRUN .. bbblua .. " tests/dist/basics.lua")
    assert.are.equal(0, status, out)
    local by_rank = {}
    for _, t in ipairs(json_lines(out)) do by_rank[math.tointeger(t.rank)] = t end
    for r = 0, 1 do
      local t = assert(by_rank[r], "no line from rank " .. r .. ":\n" .. out)
      t.rank = nil
      assert.are.same({ size = 2, sum = 3, flat = { 2, 1 }, extra = 1, bcast = 7, gather = { 0, 10 },
                        string = "from rank 0", numbers = { 3, 1 } }, t)
    end
  end)

  it("data-parallel training with the weight estimator matches one process within float32 rounding", function()
    -- 8 SGD steps of a global batch of 64; the ranks see 32 each. The
    -- tolerance allows for the different order of the float32 sums.
    for _, model in ipairs { "bbb", "mlp" } do
      local a = (" scripts/mnist.lua --model %s --limit 512 --test-limit 100 --hidden 32 --epochs 1 --batch 64 "
        .. "--optim sgd --lr 0.001 --momentum 0 --test-samples 1 --threads 1"):format(model)
      local s1, o1 = sh(bbblua .. a .. " --save " .. tmp .. "/one.st")
      assert.are.equal(0, s1, o1)
      local s2, o2 = sh(MPIRUN .. bbblua .. a .. " --distributed --save " .. tmp .. "/two.st")
      assert.are.equal(0, s2, o2)
      local _, count = o2:gsub("test accuracy:", "")
      assert.are.equal(1, count, "only rank 0 prints:\n" .. o2)
      local m, n = max_diff(tmp .. "/one.st", tmp .. "/two.st")
      assert.truthy(n >= 6)
      assert.truthy(m < 1e-5, ("%s: weights differ by %g"):format(model, m))
    end
  end)

  it("the per-example estimators' gradient averaged over many steps agrees with one process", function()
    local status, out = sh(MPIRUN .. bbblua .. " tests/dist/grad_mean.lua 300")
    assert.are.equal(0, status, out)
    local lines = json_lines(out)
    assert.are.equal(1, #lines, out)   -- rank 0's
    assert.are.equal(300, lines[1].draws)
    local z = lines[1].max_z
    assert.truthy(z >= 0 and z < 4.5, out)
  end)

  it("resumes a 2-rank run bit for bit", function()
    local a = " scripts/mnist.lua --distributed --limit 512 --test-limit 100 --hidden 16 --batch 64 "
      .. "--estimator local --test-samples 2 --threads 1"
    local s1, o1 = sh(MPIRUN .. bbblua .. a .. " --epochs 3 --save " .. tmp .. "/full.st")
    assert.are.equal(0, s1, o1)
    local s2, o2 = sh(MPIRUN .. bbblua .. a .. " --epochs 1 --checkpoint " .. tmp .. "/half.ckpt")
    assert.are.equal(0, s2, o2)
    local s3, o3 = sh(MPIRUN .. bbblua .. " scripts/mnist.lua --distributed --resume " .. tmp
      .. "/half.ckpt --epochs 3 --save " .. tmp .. "/res.st")
    assert.are.equal(0, s3, o3)
    assert.are.equal(0, (max_diff(tmp .. "/full.st", tmp .. "/res.st")))
    local s4, o4 = sh(bbblua .. " scripts/mnist.lua --resume " .. tmp .. "/half.ckpt")
    assert.are_not.equal(0, s4)
    assert.truthy(o4:find("was written by a run on 2 rank(s); resume it with 2", 1, true), o4)
  end)

  it("spreads a grid over the ranks, rank 0 writing the one results file", function()
    local res = tmp .. "/grid/g.jsonl"
    local g = (" scripts/grid.lua --limit 300 --epochs 1 --val 100 --hidden 8 --lr 1e-3 --pi 0.5 "
      .. "--log-sigma1 0 --log-sigma2 6,7,8 --samples 1 --results %s -- --test-limit 100 --test-samples 1"):format(res)
    local three = MPIRUN:gsub("%-np 2", "-np 3")
    local status, out = sh(three .. bbblua .. g)
    assert.are.equal(0, status, out)
    local list, n = records(res)
    assert.are.equal(3, n)
    local keys = {}
    for _, r in ipairs(list) do
      assert.are.equal("ok", r.status, r.key)
      assert.is_nil(keys[r.key], "a configuration ran twice")
      keys[r.key] = true
    end
    assert.are.same({ [1] = true, [2] = true }, ranks_of(list))   -- both workers trained, rank 0 did not
    -- the same command again finds the 3 finished and trains none
    local before = read(res)
    status, out = sh(three .. bbblua .. g)
    assert.are.equal(0, status, out)
    assert.are.equal(before, read(res))
  end)

  it("runs successive halving over the ranks, checkpoints passed by message, as one process would", function()
    local g = (" scripts/grid.lua --limit 600 --epochs 2 --min-epochs 1 --halving 2 --val 100 --hidden 8 "
      .. "--lr 1e-3,1e-2 --pi 0.5 --log-sigma1 0 --log-sigma2 6,7 --samples 1 --results %s "
      .. "-- --test-limit 100 --test-samples 1")
    local three = MPIRUN:gsub("%-np 2", "-np 3")
    local status, out = sh(three .. bbblua .. g:format(tmp .. "/halving/mpi.jsonl"))
    assert.are.equal(0, status, out)
    local mpi = records(tmp .. "/halving/mpi.jsonl")
    assert.are.same({ [1] = true, [2] = true }, ranks_of(mpi))
    -- rung 2: the 2 configurations that went on, trained to 2 epochs, both finished well
    local rung2 = {}
    for _, r in ipairs(mpi) do if r.rung == 2 then rung2[#rung2 + 1] = r end end
    assert.are.equal(2, #rung2, out)
    for _, r in ipairs(rung2) do
      assert.are.same({ "ok", 2 }, { r.status, r.epochs_target }, r.key)
    end
    -- each worker trains in a folder of its own: the rung-2 runs resumed checkpoints sent by rank 0
    for _, r in ipairs { 1, 2 } do
      assert.truthy(io.open(("%s/halving/mpi.runs/rank%d"):format(tmp, r)), out)
    end
    status, out = sh(bbblua .. g:gsub(" %-%- ", " --jobs 2 -- ", 1):format(tmp .. "/halving/one.jsonl"))
    assert.are.equal(0, status, out)
    local function results(path)
      local t, n = {}, 0
      for line in io.lines(path) do
        local r = require("cjson").decode(line)
        t[r.key .. "@" .. r.rung] = ("%s %s %s"):format(r.status, tostring(r.val_error), tostring(r.test_acc_mc))
        n = n + 1
      end
      return t, n
    end
    local a, na = results(tmp .. "/halving/mpi.jsonl")
    local b, nb = results(tmp .. "/halving/one.jsonl")
    assert.are.equal(6, na)
    assert.are.equal(6, nb)
    assert.are.same(b, a)
    -- the same command again trains nothing
    local before = read(tmp .. "/halving/mpi.jsonl")
    status, out = sh(three .. bbblua .. g:format(tmp .. "/halving/mpi.jsonl"))
    assert.are.equal(0, status, out)
    assert.are.equal(before, read(tmp .. "/halving/mpi.jsonl"))
  end)

  it("runs table1.lua --protocol paper's rows over the ranks, the same rows as one process", function()
    local t1 = " scripts/table1.lua --protocol paper --units 8 --methods sgd,bbb-gaussian --epochs 3 --min-epochs 1 "
      .. "--limit 10300 --out %s -- --test-limit 100"
    local three = MPIRUN:gsub("%-np 2", "-np 3")
    local status, out = sh(three .. bbblua .. t1:format(tmp .. "/t1/mpi.json"))
    assert.are.equal(0, status, out)
    -- each row's search: a grid's results, trained on the worker ranks
    local all = {}
    for _, method in ipairs { "sgd", "bbb-gaussian" } do
      for _, r in ipairs((records(("%s/t1/mpi-%s-8.grid.jsonl"):format(tmp, method)))) do all[#all + 1] = r end
    end
    assert.are.same({ [1] = true, [2] = true }, ranks_of(all))
    local _, n_tables = out:gsub("Table 1 by the paper's protocol", "")
    assert.are.equal(1, n_tables, out)           -- printed by rank 0 alone
    status, out = sh(bbblua .. t1:gsub(" %-%- ", " --jobs 2 -- ", 1):format(tmp .. "/t1/one.json"))
    assert.are.equal(0, status, out)
    local function rows(path)
      local f = assert(io.open(path))
      local t = require("cjson").decode(f:read("a"))
      f:close()
      local out = {}
      for _, r in ipairs(t.rows) do
        out[#out + 1] = ("%s %s %s %s %s"):format(r.method, r.chosen, r.val_error, r.test_error, r.budget)
      end
      return out
    end
    local a, b = rows(tmp .. "/t1/mpi.json"), rows(tmp .. "/t1/one.json")
    assert.are.equal(2, #a)
    assert.are.same(b, a)
  end)

  it("stops the job when ranks disagree on the flags or a rank fails", function()
    local cmd = ("timeout 120 mpirun %s--oversubscribe -np 1 %s scripts/mnist.lua --distributed --hidden 8 "
      .. "--epochs 1 --limit 64 : -np 1 %s scripts/mnist.lua --distributed --hidden 16 --epochs 1 --limit 64")
      :format(root_flag, bbblua, bbblua)
    local status, out = sh(cmd)
    assert.are_not.equal(0, status)
    assert.truthy(out:find("rank 1: --hidden is 16 here but 8 on rank 0", 1, true), out)
    status, out = sh(MPIRUN .. bbblua .. " tests/dist/fail.lua")
    assert.are_not.equal(0, status)
    assert.are_not.equal(124, status, "the job hung")
    assert.truthy(out:find("rank 1 gives up", 1, true), out)
    assert.falsy(out:find("passed the barrier", 1, true), out)
  end)
end)

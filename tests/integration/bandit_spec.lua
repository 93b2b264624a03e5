-- bbb.bandit's experiment: its config, workers and result in-process, and
-- the scripts (bandit, bench_bandit, bandit_ablation, bandit_inspect) end to end.
local bbb = require "bbb"
local bandit = require "bbb.bandit"

local helpers = require "helpers"
local run, has = helpers.run, helpers.has
local cjson = require "cjson"

-- The rows of a CSV file under its header: {column = value}, a number
-- where the cell reads as one.
local function csv(path)
  local head, rows = nil, {}
  for line in io.lines(path) do
    local cells = {}
    for c in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = tonumber(c) or c end
    if head then
      local r = {}
      for i, k in ipairs(head) do r[k] = cells[i] end
      rows[#rows + 1] = r
    else
      head = cells
    end
  end
  return rows
end

-- The records of a JSON-lines file, decoded.
local function records(path)
  local list = {}
  for line in io.lines(path) do list[#list + 1] = cjson.decode(line) end
  return list
end

describe("bbb.app.experiments.bandit", function()
  local experiment = require "bbb.app.experiments.bandit"
  local json = require "bbb.json"
  local out = os.tmpname()
  os.remove(out)

  it("gives a worker the coordinator's config, to the type, with or without --paper-agent", function()
    for _, flags in ipairs {
      {},
      { "--paper-agent" },
      { "--paper", "--agents", "bbb" },
      { "--noise-model", "hetero", "--prior-sigma-in", "0", "--prior-mix", "0.5,1.0,0.1", "--sigma", "1.0" },
      { "--paper-agent", "--learn-sigma", "--sigma-final", "0.5", "--rho-init", "-4", "--resume", "--jobs", "3" },
    } do
      local args = experiment.parse { "--out", out, table.unpack(flags) }
      local config = experiment.config(args)
      local worker = experiment.parse(experiment.worker_args(args, config, "bbb", 1))
      assert.are.equal("bbb", worker.worker)
      assert.are.equal(1, worker.run)
      assert.are.equal(args.out, worker.out)
      assert.are.equal(args.resume, worker.resume)
      local got = experiment.config(worker)
      assert.are.equal(1, got.repeats)   -- a worker plays one run
      got.repeats = config.repeats
      assert.are.same(config, got)
      for k, v in pairs(config) do assert.are.equal(math.type(v), math.type(got[k]), k) end
    end
  end)

  it("reads a saved config again: its integers are integers, a refused value names its setting", function()
    local config = experiment.config(experiment.parse { "--out", out, "--noise-model", "hetero",
      "--prior-mix", "0.5,1,0.1", "--prior-sigma-in", "0" })
    local saved = json.decode(json.encode(config))   -- as a checkpoint gives it back
    assert.are.equal("float", math.type(saved.updates))
    local back = experiment.saved_config(saved, "c.safetensors")
    assert.are.same(config, back)
    for _, k in ipairs { "steps", "updates", "batch", "buffer", "seed", "repeats", "every", "decide_samples",
                         "refit", "sigma_steps" } do
      assert.are.equal("integer", math.type(back[k]), k)
    end
    assert.is_true(back.hetero)
    assert.is_false(back.prior_sigma_in)
    saved.kl = "t"
    helpers.errors_with(function() experiment.saved_config(saved, "c.safetensors") end,
      "c.safetensors holds an invalid --kl (expected one of size, capacity, seen, blundell, got 't')")
  end)

  it("runs the workers and returns each agent's curves over its runs", function()
    local args = experiment.parse { "--agents", "uniform,bbb", "--steps", "30", "--updates", "2", "--batch", "8",
      "--buffer", "64", "--repeats", "2", "--jobs", "2", "--checkpoint-every", "0", "--out", out,
      "--data", helpers.root .. "/data/mushroom/Mushroom.rda" }
    local result = experiment.run(args, { command = { helpers.bbblua, helpers.root .. "/scripts/bandit.lua" } })
    assert.are.same({ "bbb", "uniform" }, result.names)
    assert.are.equal(30, result.steps)
    assert.are.equal(2, result.repeats)
    assert.are.equal(out .. "/bandit_curves.csv", result.csv)
    for _, name in ipairs(result.names) do
      local finals = {}
      for r = 0, 1 do   -- each worker's own curve
        local last
        for line in io.lines(("%s/raw/%s_r%d.csv"):format(out, name, r)) do last = line end
        finals[#finals + 1] = tonumber(last:match("^30,([^,]+),"))
      end
      assert.are.same(finals, result.finals[name])
      assert.are.equal((finals[1] + finals[2]) / 2, result.expected[name][30])
      assert.are.equal(math.min(finals[1], finals[2]), result.lowest[name][30])
      assert.are.equal(math.max(finals[1], finals[2]), result.highest[name][30])
      assert.are.equal(30, #result.realised[name])
    end
    assert.are_not.equal(result.finals.uniform[1], result.finals.uniform[2])   -- two seeds
    -- bandit_runs.csv: a row per agent and seed, read off each worker's curve
    local rows = {}
    for line in io.lines(result.runs_csv) do rows[#rows + 1] = line end
    assert.are.equal("agent,seed,regret_30,realised_30,slope_24_30", rows[1])
    assert.are.equal(5, #rows)
    for i, name in ipairs(result.names) do
      for r = 0, 1 do
        local agent, seed, final, _, slope = rows[2 * i + r]:match("^(%w+),(%d+),([^,]+),([^,]+),([^,]+)$")
        assert.are.equal(name, agent)
        assert.are.equal(1 + r, tonumber(seed))   -- --seed 1: runs r play seed 1 + r
        assert.are.equal(result.finals[name][r + 1], tonumber(final))
        local e = result.runs[name][r + 1].expected
        assert.near((e[30] - e[24]) / 6, tonumber(slope), 1e-5)
      end
    end
    os.execute("rm -rf '" .. out .. "'")
  end)
end)

describe("scripts/bandit.lua", function()
  local out = os.tmpname()
  os.remove(out)

  it("answers --help, as do its benchmark and its inspector", function()
    local status, text = run("scripts/bandit.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    has(text, "--resume")
    has(text, "--paper-agent")
    status, text = run("scripts/bandit_ablation.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    status, text = run("scripts/bench_bandit.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    status, text = run("scripts/bandit_inspect.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    has(text, "poisonous mushrooms its mean eats")
  end)

  it("bench_bandit projects the paper protocol for every agent and 5 seeds, never below its GEMMs alone", function()
    local path = out .. "-bench.json"
    local status, text = run("scripts/bench_bandit.lua --updates 20 --steps 1 --late 10 --json " .. path)
    assert.are.equal(0, status, text)
    local f = assert(io.open(path))
    local b = require("bbb.json").decode(f:read("a"))
    f:close()
    os.remove(path)
    -- every update timed, each no faster than its bare GEMMs could allow in part
    for _, k in ipairs { "bayes_fused", "bayes_graph", "plain_fused", "plain_graph" } do
      assert.is_true(b.updates[k].ms > 0, k)
    end
    assert.is_true(b.gemm_ms > 0)
    -- the Bayesian update's own passes, each a positive time, on top of its GEMMs
    local p = b.bayes_passes
    assert.is_true(p.draws_ms > 0 and p.sample_ms > 0 and p.adam_ms > 0)
    assert.is_near(b.gemm_ms + p.draws_ms + p.sample_ms + p.adam_ms, p.floor_ms, 1e-9)
    -- every agent's steps, early and late; the products' share of a network agent's
    -- late step is a part of it, the agents without a network have none
    for _, name in ipairs { "bbb", "eps5", "eps1", "eps0", "linear", "uniform", "dropout", "neurallinear" } do
      assert.is_true(b.step_ms[name] >= 0 and b.late_step_ms[name] >= 0, name)
    end
    for _, name in ipairs { "bbb", "eps0", "dropout", "neurallinear" } do
      assert.is_true(b.product_share[name] > 0 and b.product_share[name] < 1, name)
    end
    assert.are.equal(0, b.product_share.uniform)
    -- the projection: never below the GEMMs alone; the floor with BBB's passes between;
    -- with every product free, below the projection
    local m = b.protocol_min
    assert.is_true(m.gemms_alone > 0 and m.projected >= m.gemms_alone)
    assert.is_true(m.with_bbb_passes >= m.gemms_alone)
    assert.is_true(m.products_free < m.projected)
    assert.is_string(b.environment.openblas)
  end)

  it("replays the recorded regrets at step 1,000 in the recorded environment (OpenBLAS pinned)", function()
    -- the recorded runs were made on OpenBLAS 0.3.21's Haswell kernels: pinned to them, the
    -- products (and so every regret) are the recorded ones
    local ok_env, why = helpers.recorded_environment()
    if not ok_env then
      pending(why)
      return
    end
    local want = {}
    for line in io.lines(helpers.root .. "/tests/fixtures/bandit_regret_1k_haswell.csv") do
      local agent, seed, recorded = line:match("^(%w+),(%d+),(%d+),")
      if seed == "1" then want[agent] = tonumber(recorded) end
    end
    local status, text = run("scripts/bandit.lua --agents bbb,eps0,neurallinear --steps 1000 --jobs 2 --out "
      .. out .. "-1k", "OPENBLAS_CORETYPE=Haswell")
    assert.are.equal(0, status, text)
    for _, agent in ipairs { "bbb", "eps0", "neurallinear" } do
      local last
      for line in io.lines(out .. "-1k/raw/" .. agent .. "_r0.csv") do
        last = line:match("^1000,(%-?%d+),") or last
      end
      assert.are.equal(want[agent], tonumber(last), agent)
    end
    os.execute("rm -rf '" .. out .. "-1k'")
  end)

  it("runs every agent on tiny settings, writes the table, the CSV and the plot, and resumes", function()
    local args = "scripts/bandit.lua --steps 120 --updates 2 --batch 8 --buffer 64 --checkpoint-every 50 --out " .. out
    local status, text = run(args)
    assert.are.equal(0, status, text)
    for _, want in ipairs { "cumulative expected regret", "Bayes by Backprop", "5% greedy", "1% greedy",
                            "greedy", "linear TS", "uniform", "ordering at the end", "realised" } do
      has(text, want)
    end
    local f = assert(io.open(out .. "/bandit_curves.csv"))
    local header = f:read("l")
    f:close()
    assert.are.equal("step,bbb_expected,bbb_realised,eps5_expected,eps5_realised,eps1_expected,eps1_realised,"
      .. "eps0_expected,eps0_realised,linear_expected,linear_realised,uniform_expected,uniform_realised,"
      .. "dropout_expected,dropout_realised,neurallinear_expected,neurallinear_realised", header)
    local rows = csv(out .. "/bandit_curves.csv")
    assert.are.equal(120, #rows)
    for step, r in ipairs(rows) do assert.are.equal(step, r.step) end
    -- every agent's cumulative expected regret at every step: a number, never falling
    for _, name in ipairs { "bbb", "eps5", "eps1", "eps0", "linear", "uniform", "dropout", "neurallinear" } do
      local key = name .. "_expected"
      assert.is_true(rows[1][key] >= 0, name)
      for i = 2, #rows do assert.is_true(rows[i][key] >= rows[i - 1][key], ("%s at step %d"):format(name, i)) end
      assert.are.equal("number", type(rows[120][name .. "_realised"]), name)
    end
    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      assert.truthy(io.open(out .. "/bandit_regret.png"), "no plot")
    end
    -- a longer run resumes from the checkpoints and ends as one run would
    local more = args:gsub("--steps 120", "--steps 150") .. " --agents bbb,uniform,dropout,neurallinear --no-plot"
    local status2, text2 = run(more .. " --resume")
    assert.are.equal(0, status2, text2)
    for _, name in ipairs { "bbb", "uniform", "dropout", "neurallinear" } do
      has(text2, "[" .. name .. " r0] resumed at step 120")
    end
    local status3, text3 = run(more .. " --out " .. out .. "/fresh")
    assert.are.equal(0, status3, text3)
    local a, b = csv(out .. "/bandit_curves.csv"), csv(out .. "/fresh/bandit_curves.csv")
    assert.are.equal(150, #a)
    assert.are.equal(150, #b)
    -- the resumed run's regrets at the end are the unbroken run's
    for _, name in ipairs { "bbb", "uniform", "dropout", "neurallinear" } do
      for _, kind in ipairs { "_expected", "_realised" } do
        assert.are.equal("number", type(b[150][name .. kind]), name .. kind)
        assert.are.equal(b[150][name .. kind], a[150][name .. kind], name .. kind)
      end
    end
    -- a setting changed on --resume is refused, naming it
    local status4, text4 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --kl size")
    assert.are_not.equal(0, status4, text4)
    has(text4, "was written with --kl seen, this run has size")
    local status5, text5 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --sigma-final 1")
    assert.are_not.equal(0, status5, text5)
    has(text5, "bbb_r0.safetensors was written with --sigma-final 3, this run has 1")
    -- weight samples per decision are BBB's alone: the other agents resume under another number
    local status6, text6 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --decide-samples 3")
    assert.are_not.equal(0, status6, text6)
    has(text6, "bbb_r0.safetensors was written with --decide-samples 1, this run has 3")
    -- the input layer's prior is BBB's alone too
    local status8, text8 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --prior-sigma-in 0.5")
    assert.are_not.equal(0, status8, text8)
    has(text8, "bbb_r0.safetensors was written with --prior-sigma-in ")
    has(text8, ", this run has 0.5")
    -- (the refused --sigma-final run above took the other agents on to step 160)
    local status7, text7 = run(more:gsub("--steps 150", "--steps 170"):gsub("bbb,", "") .. " --resume --decide-samples 3")
    assert.are.equal(0, status7, text7)
    has(text7, "[dropout r0] resumed at step 160")
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("bandit_ablation.lua prints its table, records each run at once and does not rerun a recorded one", function()
    local res = out .. "-ablation.jsonl"
    local cmd = "scripts/bandit_ablation.lua --rows paper,unb-samples2,greedy --seeds 1 --steps 60 --probes 30,60 --results " .. res
    local status, text = run(cmd)
    assert.are.equal(0, status, text)
    has(text, "regret at step 60")   -- the table
    -- one record per row, each with its command, commit, regret at the end and diagnostics at each probe
    local recs = records(res)
    assert.are.same({ "paper", "unb-samples2", "greedy" }, { recs[1].row, recs[2].row, recs[3].row })
    local prefix = "build/bbblua scripts/bandit_ablation.lua --rows"
    for _, r in ipairs(recs) do
      assert.are.equal(prefix, r.command:sub(1, #prefix), r.row)
      assert.is_true(type(r.commit) == "string" and #r.commit > 0, r.row)
      assert.are.same({ 1, 60 }, { r.seed, r.steps })
      assert.is_true(r.regret["60"] >= 0, r.row)
      for _, probe in ipairs { "30", "60" } do
        local p = r.diag[probe]
        assert.is_true(p.eat_poison >= 0 and p.eat_poison <= 1, r.row .. " P(eat|p) at " .. probe)
      end
    end
    local before = helpers.read(res)
    local status2, text2 = run(cmd)
    assert.are.equal(0, status2, text2)
    assert.are.equal(before, helpers.read(res))   -- nothing played again
    assert.are.equal(text:match("regret at step.*$"), text2:match("regret at step.*$"))
    -- a record made while the row meant other settings (a default changed since) is played again
    local first = recs[1]
    assert.are.same({ "paper", {} }, { first.row, first.settings })
    first.settings = { rho_init = -4 }
    helpers.write(res, cjson.encode(first) .. "\n")
    local status3, text3 = run(cmd:gsub("paper,unb%-samples2,greedy", "paper"))
    assert.are.equal(0, status3, text3)
    local again = records(res)
    assert.are.equal(2, #again)
    assert.are.same({ "paper", 1, 60 }, { again[2].row, again[2].seed, again[2].steps })
    assert.is_nil(next(again[2].settings))   -- played under the row's settings of today
    assert.are.equal(recs[1].regret["60"], again[2].regret["60"])
    for args, want in pairs {
      ["--rows foo"] = "--rows: expected one of paper,",
      ["--seeds 1,x"] = "--seeds: expected an integer in decimal digits, got 'x'",
      ["--probes ,"] = "--probes: expected a comma-separated list",
      ["--causes-from 0"] = "--causes-from",
    } do
      local st, tx = run("scripts/bandit_ablation.lua " .. args .. " --results " .. res)
      assert.are.equal(2, st, tx)
      has(tx, "bandit_ablation.lua: " .. want)
    end
    os.remove(res)
  end)

  it("bandit_inspect.lua reads the saved agents of a run with the learned noise, and resume keeps the noise model", function()
    local dir = out .. "-inspect"
    local args = "scripts/bandit.lua --steps 60 --updates 2 --batch 8 --buffer 64 --agents bbb,eps0,uniform "
      .. "--noise-model hetero --no-plot --out " .. dir
    local status, text = run(args)
    assert.are.equal(0, status, text)
    local ckpts = { dir .. "/ckpt/bbb_r0.safetensors", dir .. "/ckpt/eps0_r0.safetensors" }
    local st, tx = run("scripts/bandit_inspect.lua --shared " .. table.concat(ckpts, " "))
    assert.are.equal(0, st, tx)
    -- the same inspection's result, in-process: a row per checkpoint at step 60, its counts, and with
    -- --shared a list per kind of mistake that it makes, each value with three counts
    local inspect = require "bbb.app.experiments.bandit_inspect"
    local saved_print = _G.print
    _G.print = function() end
    local ok_run, result = pcall(inspect.run, inspect.parse { "--shared", ckpts[1], ckpts[2] })
    _G.print = saved_print
    assert(ok_run, result)
    assert.are.equal(2, #result.rows)
    for i, row in ipairs(result.rows) do
      local m = row.m
      local base = ckpts[i]:match("[^/]+$")
      assert.are.equal(base, row.name:sub(-#base))   -- the table names the checkpoint (its path cut to 40 characters)
      assert.are.equal(60, row.step)
      for _, k in ipairs { "poison_eaten", "edible_passed", "lucky", "mixed", "unseen" } do
        assert.are.equal("integer", math.type(m[k]), k)
        assert.is_true(m[k] >= 0, k)
      end
      assert.are.equal(m.poison_eaten, m.lucky + m.mixed + m.unseen)   -- each poisonous meal of the mean, by its meals
      for _, k in ipairs { "eat_rate", "pass_rate" } do assert.is_true(m[k] >= 0 and m[k] <= 1, k) end
      for kind, count in pairs { passed = m.edible_passed, eaten = m.poison_eaten } do
        local list = row.shared[kind]
        if count > 0 then
          assert.is_true(#list > 0, ("%s: no feature value all %d %s share"):format(row.name, count, kind))
        else
          assert.are.same({}, list)
        end
        for _, f in ipairs(list) do
          assert.are.equal("string", type(f.name))
          assert.is_true(f.total >= count and f.poisonous >= 0 and f.poisonous <= f.total and f.meals >= 0, f.name)
        end
      end
    end
    for a, want in pairs {
      [dir .. "/ckpt/uniform_r0.safetensors"] = "agent uniform: only BBB and the epsilon-greedy agents can be inspected",
      [dir .. "/nothing.safetensors"] = "nothing.safetensors",
      [""] = "checkpoints",
    } do
      local s2, t2 = run("scripts/bandit_inspect.lua " .. a)
      assert.are_not.equal(0, s2, t2)
      has(t2, want)
    end
    local s3, t3 = run(args:gsub("--steps 60", "--steps 80"):gsub("--noise%-model hetero", "") .. " --resume")
    assert.are_not.equal(0, s3, t3)
    has(t3, "was written with --noise-model hetero, this run has fixed")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("stops on bad input before the run starts", function()
    for args, want in pairs {
      ["--agents bbb,foo"] = "unknown agent 'foo' (known: bbb, eps5, eps1, eps0, linear, uniform, dropout, neurallinear)",
      ["--kl t"] = "--kl: expected one of size, capacity, seen, blundell, got 't'",
      ["--decide-samples 0"] = "--decide-samples: integer '0' is out of range",
      ["--dropout 1"] = "--dropout: number '1' is out of range: must be in [0, 1)",
      ["--refit 0"] = "--refit: integer '0' is out of range",
      ["--sigma-final 0"] = "--sigma-final: number '0' is out of range",
      ["--sigma-steps 0"] = "--sigma-steps: integer '0' is out of range",
      ["--noise-model learned"] = "--noise-model: expected one of fixed, hetero, got 'learned'",
      ["--noise-model hetero --learn-sigma"] = "--learn-sigma learns one noise for every reward",
      ["--prior-sigma-in -1"] = "--prior-sigma-in: number '-1' is out of range",
      ["--prior-sigma-in wide"] = "--prior-sigma-in: expected a number, got 'wide'",
      ["--prior-mix 0.5,1"] = "--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1",
      ["--prior-mix 1.5,1,0.1"] = "--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1",
      ["--prior-mix 0.5,0,0.1"] = "--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1",
      ["--steps 0"] = "--steps: integer '0' is out of range",
      ["--buffer 0"] = "--buffer: integer '0' is out of range",
      ["--buffer 32"] = "--buffer (32) must hold at least one minibatch (--batch 64)",
      ["--data /nonexistent/Mushroom.rda"] = "load_mushroom: /nonexistent/Mushroom.rda not found",
      ["--data scripts/bandit.lua"] = "load_mushroom: rdata: not an R data file",
    } do
      local status, text = run("scripts/bandit.lua " .. args .. " --out " .. out)
      assert.are_not.equal(0, status, text)
      has(text, want)
      assert.is_nil(text:find("r0]", 1, true), text)   -- no worker started
    end
  end)
end)

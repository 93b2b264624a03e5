--- The bandit ablation experiment: what scripts/bandit_ablation.lua runs.
-- One row per change of the Mushroom bandit's Bayes by Backprop agent, each
-- played over several seeds through bbb.app.experiments.bandit_agent (the
-- same runs as scripts/bandit.lua's workers: same mushrooms, coins and agent
-- seeds), with the posterior diagnosed at probe steps. Every finished (row,
-- seed) is appended to a JSONL file at once, so a stopped ablation resumes
-- where it stopped. run(config) raises {usage = message} for bad input.
local bbb = require "bbb"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local cli = require "bbb.app.cli"
local json = require "bbb.json"
local bandit = require "bbb.bandit"
local experiment = require "bbb.app.experiments.bandit_agent"

local M = {}

local with, ROWS = experiment.with, experiment.ABLATION_ROWS
local BY = {}
for _, r in ipairs(ROWS) do BY[r[1]] = r end
local MAKERS = { bbb = bandit.BBB, eps0 = function(o) o.epsilon = 0; return bandit.EpsilonGreedy(o) end }
local INDEX = { bbb = 1, eps0 = 4 }   -- scripts/bandit.lua's agent indices: the same agent seeds
local SCRIPT = "build/bbblua scripts/bandit_ablation.lua"

--- parser() -> bandit_ablation.lua's command line.
function M.parser()
  local names = {}
  for _, r in ipairs(ROWS) do names[#names + 1] = r[1] end
  local parser = recipe.parser("bandit_ablation.lua", "The ablation of the Mushroom bandit's BBB agent: "
    .. "cumulative expected regret, its slope over the last fifth of the run and the posterior "
    .. "diagnostics (mean sigma per layer, spread of f(eat) - f(pass) over weight samples, the chance "
    .. "of eating a poisonous mushroom) per row and seed. Rows: " .. table.concat(names, ", ") .. ".")
  flags.option(parser, "--rows", "Comma-separated rows.", "paper,unbounded"):convert(cli.list(cli.choice(names), { unique = true }))
  flags.option(parser, "--seeds", "Comma-separated seeds (the bandit's --seed with one repeat).", "1")
    :convert(cli.list(cli.positive_integer(), { unique = true }))
  flags.option(parser, "--steps", "Steps per run.", "10000"):convert(cli.positive_integer())
  flags.option(parser, "--probes", "Steps at which to diagnose the posterior.", "2000,5000,10000")
    :convert(cli.list(cli.positive_integer(), { unique = true }))
  flags.option(parser, "--results", "JSONL file of finished runs (appended; a row and seed found there with at "
    .. "least --steps steps is not rerun).",
    "out/bandit_ablation.jsonl"):convert(cli.output_path { ext = { "jsonl" } })
  flags.option(parser, "--causes-from", "Count the costly decisions after this step by cause: the mean "
    .. "prediction over weight draws would have taken them too (a wrong fit) or not (exploration).", "1000")
    :convert(cli.positive_integer())
  flags.option(parser, "--data", "The Mushroom .rda file.")
  return parser
end

--- parse([argv]) -> config: the command line, checked; config.command is
-- the command as each record keeps it.
function M.parse(argv)
  argv = argv or arg
  local config = cli.parse(M.parser(), argv)
  config.command = SCRIPT .. " " .. table.concat(argv, " ")
  return config
end

local function fail(msg, ...) error({ usage = msg:format(...) }, 0) end

-- same(a, b): the settings a and b (as recorded: numbers, strings, booleans, lists) are equal;
-- false and absent both mean a setting left off
local function same(a, b)
  if not a and not b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k, v in pairs(b) do if not same(a[k], v) then return false end end
  return true
end

-- The runs already in --results that serve this ablation, by "row/seed".
local function recorded_runs(args, rows)
  local settings_of, done = {}, {}
  for _, row in ipairs(rows) do settings_of[row[1]] = row[2] end
  local fh = io.open(args.results)
  if not fh then return done end
  for line in fh:lines() do
    local ok, r = pcall(json.decode, line)
    -- a longer run of the same row and seed serves too: its regrets are recorded every 1,000 steps;
    -- a run made while the row meant other settings (a default changed since) does not
    if ok and r.steps >= args.steps and r.regret[tostring(args.steps)] and settings_of[r.row]
        and same(r.settings, settings_of[r.row]) then
      done[r.row .. "/" .. math.tointeger(r.seed)] = r
    end
  end
  fh:close()
  return done
end

-- One (row, seed) played to --steps, its regrets, diagnostics and causes
-- recorded, and appended to --results at once.
local function play_one(args, run, row, seed)
  local cfg = with(experiment.PAPER_AGENT, row[2])
  cfg.seed = seed
  local agent = cfg.agent or "bbb"
  local rec = { row = row[1], seed = seed, steps = args.steps, agent = agent, settings = row[2],
    command = run.command, commit = run.commit, regret = {}, diag = {}, causes = { from = args.causes_from } }
  local t0 = bbb.core.clock()
  local every = math.max(1, args.steps // 10)
  experiment.play{ cfg = cfg, data = run.data, make = MAKERS[agent], index = INDEX[agent], run = 0,
    steps = args.steps, probes = args.probes, causes = rec.causes,
    on_step = function(t, e)
      if t % 1000 == 0 or t == args.steps or t == 100 or t == args.steps - args.steps // 5 then
        rec.regret[tostring(t)] = e.regret_expected   -- the last two: the slope's ends
      end
      if t % every == 0 then
        local dt = bbb.core.clock() - t0
        print(("[%s seed %d] step %d/%d regret %.0f  %.0f s  eta %.0f s"):format(row[1], seed, t,
          args.steps, e.regret_expected, dt, dt / t * (args.steps - t)))
      end
    end,
    on_probe = function(t, d) rec.diag[tostring(t)] = d end }
  rec.seconds = bbb.core.clock() - t0
  local f, err = io.open(args.results, "a")
  if not (f and f:write(json.encode(rec), "\n") and f:close()) then fail("cannot append to %s: %s", args.results, tostring(err)) end
  return rec
end

--- run(config) -> result: plays every (row, seed) that --results does not
-- hold yet, printing its progress; result holds rows (the ablation's rows
-- asked for), seeds, steps, probes and done (every run's record, by
-- "row/seed"), which report prints as the table.
function M.run(args)
  local rows = {}
  for _, w in ipairs(args.rows) do rows[#rows + 1] = BY[w] end
  local results_dir = args.results:match("^(.*)/[^/]*$")
  if results_dir and results_dir ~= "" and not bbb.core.sys.mkdir_p(results_dir) then
    fail("--results: cannot make the folder %s", results_dir)
  end
  local ok_data, data = pcall(bbb.data.load_mushroom, { path = args.data })
  if not ok_data then fail("%s", (tostring(data):gsub("^[^:]*:%d+: ", ""))) end
  local done = recorded_runs(args, rows)
  local run = { data = data, command = args.command or SCRIPT,
    commit = require("bbb.app.sys").output { "git", "rev-parse", "--short", "HEAD" } or "unknown" }
  bbb.set_num_threads(1)
  io.stdout:setvbuf("line")
  for _, row in ipairs(rows) do
    for _, seed in ipairs(args.seeds) do
      local key = row[1] .. "/" .. seed
      if not done[key] then done[key] = play_one(args, run, row, seed) end
    end
  end
  return { rows = rows, seeds = args.seeds, steps = args.steps, probes = args.probes, done = done }
end

-- One row of the table: the seeds' regrets, and their causes and
-- diagnostics averaged over the seeds.
local function table_row(result, row, S, S0, last)
  local seeds = result.seeds
  local sum, each, slope, n, d, c = 0, {}, 0, 0, { sigma = {} }, {}
  for _, seed in ipairs(seeds) do
    local r = result.done[row[1] .. "/" .. seed]
    local e, e0 = r.regret[tostring(S)], r.regret[tostring(S0)]
    sum, n = sum + e, n + 1
    each[#each + 1] = ("%.0f"):format(e)
    if e0 then slope = slope + (e - e0) / (S - S0) end
    for k, v in pairs(r.causes or {}) do if k ~= "from" then c[k] = (c[k] or 0) + v end end
    local di = r.diag[last] or {}
    for k, v in pairs(di) do
      if k == "sigma" then
        for i, s in ipairs(v) do d.sigma[i] = (d.sigma[i] or 0) + s / #seeds end
      else d[k] = (d[k] or 0) + v / #seeds end
    end
  end
  local sig = {}
  for i, v in ipairs(d.sigma) do sig[i] = ("%.3f"):format(v) end
  return ("%-22s %7.0f  %-32s %6.3f %18s %8s %8s  %d, %d / %d, %d"):format(row[1], sum / n, table.concat(each, " "),
    slope / n, table.concat(sig, "/"), d and d.spread_poison and ("%.2f"):format(d.spread_poison) or "-",
    d and d.eat_poison and ("%.4f"):format(d.eat_poison) or "-", c.eaten_by_mean or 0, c.eaten_by_draw or 0,
    c.passed_by_mean or 0, c.passed_by_draw or 0)
end

--- report(result): the table: mean regret at the end, each seed's, the
-- slope over the last fifth, diagnostics.
function M.report(result)
  local S, S0 = result.steps, result.steps - result.steps // 5
  local last = tostring(result.probes[#result.probes])
  print(("\nregret at step %d (expected), slope over steps %d-%d, diagnostics at step %s"):format(S, S0, S, last))
  print(("%-22s %7s  %-32s %6s %18s %8s %8s  %s"):format("row", "mean", "per seed", "slope", "sigma per layer",
    "spread", "P(eat|p)", "eaten/passed after --causes-from: by the mean, by a draw"))
  for _, row in ipairs(result.rows) do print(table_row(result, row, S, S0, last)) end
end

return M

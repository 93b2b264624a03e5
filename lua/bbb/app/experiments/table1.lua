--- The Table 1 experiment: what scripts/table1.lua runs. The rows of Table 1
-- of Blundell et al. (2015) that a budget allows: MNIST test error of
-- two-hidden-layer networks trained by SGD without and with dropout and by
-- Bayes by Backprop with a Gaussian or a scale-mixture prior. Under
-- --protocol recipe each row is a run of the MNIST experiment
-- (bbb.app.experiments.mnist, called as a function) with the adam-N preset;
-- under --protocol paper, a search of the paper's grid on the validation
-- split (bbb.app.experiments.table1_paper, one row each). run(config) raises
-- {signal = N} when a row's run is stopped by a signal.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local json = require "bbb.json"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local mnist = require "bbb.app.experiments.mnist"

local M = {}

-- Test error (%) in the paper's Table 1, by method and units per layer.
M.PAPER = {
  sgd = { [400] = 1.83, [800] = 1.84, [1200] = 1.88 },
  dropout = { [400] = 1.51, [800] = 1.33, [1200] = 1.36 },
  ["bbb-gaussian"] = { [400] = 1.82, [800] = 1.99, [1200] = 2.04 },
  ["bbb-mixture"] = { [400] = 1.36, [800] = 1.34, [1200] = 1.32 },
}
-- What each method adds to the preset (explicit flags after -- win).
local METHODS = {
  sgd = { flags = { "--model", "mlp" }, about = "a plain MLP, no dropout (the preset's optimizer)" },
  dropout = { flags = { "--model", "dropout" }, about = "an MLP with dropout 0.5 (the preset's optimizer)" },
  ["bbb-gaussian"] = { flags = { "--prior", "gaussian", "--sigma1", "1" },
                       about = "Bayes by Backprop, Gaussian prior sigma 1" },
  ["bbb-mixture"] = { flags = {}, about = "Bayes by Backprop, the preset's scale-mixture prior" },
}
local METHOD_NAMES = { "sgd", "dropout", "bbb-gaussian", "bbb-mixture" }

--- parser() -> table1.lua's command line.
function M.parser()
  local about = { "Methods:" }
  for _, m in ipairs(METHOD_NAMES) do about[#about + 1] = ("  %s: %s."):format(m, METHODS[m].about) end
  local parser = recipe.parser("table1.lua", "Reproduce rows of Table 1 of Blundell et al. (2015): MNIST test error "
    .. "of 2-hidden-layer networks, ours beside the paper's. --protocol recipe: every row is a scripts/mnist.lua "
    .. "run with the adam-N preset; --protocol paper: the paper's search on the validation split.", { defaults = { epochs = "30" }, outputs = { "out" } })
    :epilog(table.concat(about, "\n") .. "\nFlags after -- go to every mnist.lua run (e.g. -- --limit 1000).")
  flags.option(parser, "--units", "Units per hidden layer (400, 800, 1200 in the paper).", "400")
    :convert(cli.list(cli.positive_integer { max = 1 << 16 }, { unique = true }))
  flags.option(parser, "--methods", "Methods: " .. table.concat(METHOD_NAMES, ","), "bbb-mixture")
    :convert(cli.list(cli.choice(METHOD_NAMES), { unique = true }))
  recipe.declare(parser, { "epochs" })
  recipe.declare(parser, { "threads" })
  recipe.declare(parser, { "seed" })
  flags.option(parser, "--protocol", "recipe: one run per row with the adam-N preset; paper: the paper's protocol "
    .. "(SGD on the summed cost, 50,000/10,000 images, lr, samples and prior chosen on the validation error by "
    .. "grid.lua's successive halving; the test error of the setting chosen).", "recipe")
    :convert(cli.choice { "recipe", "paper" })
  flags.option(parser, "--halving", "paper protocol: keep the best 1/ETA at each rung.", "3"):convert(cli.integer { min = 2, max = 100 })
  flags.option(parser, "--min-epochs", "paper protocol: epochs of the first rung.", "1"):convert(cli.positive_integer())
  recipe.declare(parser, { "jobs" })
  recipe.declare(parser, { "select" })
  flags.axis(parser, "lr", "paper protocol: search only these learning rates (a comma list; each method's own grid "
    .. "otherwise), e.g. what a smaller width chose, where the whole grid costs too much.")
    :convert(cli.list(cli.positive_number(), { unique = true }))
  flags.axis(parser, "samples", "paper protocol: search only these samples per minibatch (Bayes by Backprop's rows; "
    .. "a comma list).")
    :convert(cli.list(cli.positive_integer { max = 1000 }, { unique = true }))
  recipe.declare(parser, { "limit" })
  flags.option(parser, "--out", "Write the rows as JSON here.", "out/table1.json"):convert(cli.output_path { ext = { "json" } })
  parser:argument("mnist_flags", "Flags for every scripts/mnist.lua run, after --."):args("*")
  return parser
end

--- parse([argv]) -> config: the command line, checked, with what would
-- leave the protocol nothing to run refused before any run.
function M.parse(argv)
  local parser = M.parser()
  local args = recipe.parse(parser, argv or arg)
  if args.protocol ~= "paper" and (args.lr or args.samples) then
    parser:error("--lr and --samples narrow the paper protocol's grid: they need --protocol paper")
  end
  local VAL = require("bbb.app.experiments.table1_paper").VAL
  -- the split the paper protocol holds out must leave training images
  if args.protocol == "paper" and args.limit and args.limit <= VAL then
    parser:error(("--limit %d leaves no training images beside the protocol's %d validation images")
      :format(args.limit, VAL))
  end
  return args
end

-- The rows by the paper's protocol. Under mpirun (several ranks) every rank
-- walks the same rows: rank 0 runs each row's successive halving and
-- prints, the others train its runs (and get no rows: worker is true).
local function paper_rows(args)
  local paper = require "bbb.app.experiments.table1_paper"
  local narrow = paper.narrow(args.lr, args.samples)
  local dist = bbb.dist.available and bbb.dist.size() > 1 and bbb.dist or nil
  local worker = dist and dist.rank() ~= 0
  local say = worker and function() end or print
  local rows = {}
  for _, units in ipairs(args.units) do
    for _, method in ipairs(args.methods) do
      say(("== %s, 2x%d: the paper's protocol, grid.lua --halving %d%s"):format(method, units, args.halving,
        paper.describe_narrowing(method, narrow)))
      local t0 = os.time()
      local row = paper.row(method, units, { epochs = args.epochs, min_epochs = args.min_epochs, halving = args.halving,
        jobs = args.jobs, seed = args.seed, limit = args.limit, select = args.select,
        results = args.out:gsub("%.json$", ""), axes = narrow,
        extra = args.mnist_flags })
      if row then
        row.seconds, row.paper = os.time() - t0, M.PAPER[method][units]
        rows[#rows + 1] = row
      end
    end
  end
  if dist then dist.finalize() end
  return rows, worker or nil
end

-- A row's run stopped by a signal ends the table: where its state is and
-- how to go on, as the MNIST experiment says it.
local function interrupted(r)
  local msg = ("interrupted in epoch %d after batch %d; nothing was saved."):format(r.epoch + 1, r.batch)
  if r.checkpoint then
    local argv0 = table.concat(require("bbb.app.sys").bbblua_argv(arg and arg[0] or "table1.lua"), " ")
    msg = ("interrupted in epoch %d after batch %d; the state is saved in %s.\nResume with: %s --resume %s")
      :format(r.epoch + 1, r.batch, r.checkpoint, argv0, r.checkpoint)
  end
  error({ signal = r.signal or 2, message = msg }, 0)
end

-- One row by the recipe protocol: a run of the MNIST experiment with the
-- adam-N preset; a run that fails is a failed row, said on stderr.
local function recipe_row(args, method, units)
  -- the adam-N presets exist for 400, 800 and 1200 units; other sizes take adam-400's recipe
  local known = units == 400 or units == 800 or units == 1200
  local opts = { epochs = args.epochs, threads = args.threads, seed = args.seed, limit = args.limit,
                 preset = known and ("adam-" .. units) or "adam-400", hidden = not known and units or nil }
  local argv = recipe.argv_of(opts)
  table.move(METHODS[method].flags, 1, #METHODS[method].flags, #argv + 1, argv)
  table.move(args.mnist_flags, 1, #args.mnist_flags, #argv + 1, argv)
  print(("== %s, 2x%d: mnist %s"):format(method, units, table.concat(argv, " ")))
  io.stdout:flush()
  local t0 = os.time()
  local ok, r = pcall(function()
    local res = mnist.run(mnist.parse(argv))
    mnist.report(res)
    return res
  end)
  if ok and r.status == "interrupted" then interrupted(r) end
  local row = { method = method, units = units, epochs = args.epochs, seconds = os.time() - t0,
                paper = M.PAPER[method][units] }
  if ok then
    row.test_error_mean = 100 * (1 - r.test_acc_mean)
    row.test_error_mc = 100 * (1 - r.test_acc_mc)
    row.train_images = r.images.train
    -- deterministic nets: the plain forward pass; Bayesian: the MC ensemble
    row.test_error = method:find("^bbb") and row.test_error_mc or row.test_error_mean
  else
    io.stderr:write(("table1.lua: %s, 2x%d failed: %s\n"):format(method, units,
      type(r) == "table" and tostring(r.usage) or tostring(r)))
    row.failed = true
  end
  return row
end

--- run(config) -> result: every method x units row by config.protocol,
-- written to config.out as JSON; result holds protocol, epochs, rows, out,
-- failed (a recipe row's run failed) and worker (a worker rank under
-- mpirun: no rows, nothing written), which report prints.
function M.run(args)
  local result = { protocol = args.protocol, epochs = args.epochs, rows = {} }
  if args.protocol == "paper" then
    result.rows, result.worker = paper_rows(args)
    if result.worker then return result end
  else
    for _, units in ipairs(args.units) do
      for _, method in ipairs(args.methods) do
        local row = recipe_row(args, method, units)
        result.failed = result.failed or row.failed
        result.rows[#result.rows + 1] = row
      end
    end
  end
  local doc = { epochs = args.epochs, protocol = args.protocol == "paper" and "paper" or nil, rows = result.rows,
    environment = bbb.core.environment() }
  local ok, err = pcall(cli.write_file, args.out, json.encode(doc))
  -- the rows of hours of training are shown even when the file cannot be written
  if not ok then M.report(result); error(err, 0) end
  result.out = args.out
  return result
end

-- The recipe protocol's table: ours beside the paper's.
local function print_recipe_rows(rows, epochs)
  print(("\nTable 1 (MNIST test error, %d epochs each; ours: MC ensemble for Bayes by Backprop, "
    .. "the plain forward pass otherwise)"):format(epochs))
  print(("%-14s %6s %9s %9s %9s %8s"):format("method", "units", "ours", "means", "paper", "wall"))
  for _, r in ipairs(rows) do
    local function pct(v) return v and ("%.2f%%"):format(v) or "failed" end
    print(("%-14s %6d %9s %9s %9s %7ds"):format(r.method, r.units, pct(r.test_error), r.failed and "-" or pct(r.test_error_mean),
      r.paper and ("%.2f%%"):format(r.paper) or "-", r.seconds))
  end
end

--- report(result): the table of the rows, ours beside the paper's, and
-- where they were written (nothing on a worker rank).
function M.report(result)
  if result.worker then return end
  if result.protocol == "paper" then
    require("bbb.app.experiments.table1_paper").print_rows(result.rows, result.epochs)
  else
    print_recipe_rows(result.rows, result.epochs)
  end
  if result.out then print("rows written to " .. result.out) end
end

return M

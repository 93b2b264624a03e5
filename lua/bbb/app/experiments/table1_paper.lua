--- bbb.app.experiments.table1_paper: one row of Table 1 of Blundell et al.
-- (2015) by the paper's protocol: 50,000 training and 10,000 validation
-- images, pixels / 126, minibatch 128, plain SGD on the summed minibatch
-- cost; the learning rate, samples per minibatch and (for Bayes by
-- Backprop) the prior chosen on the validation error; then the test error
-- of the setting chosen. The search is scripts/grid.lua's successive
-- halving, so a grid of 324 settings fits a small machine, and it resumes
-- where it stopped.
local bbb = require "bbb"
local grid = require "bbb.app.experiments.grid"

local paper = {}

-- The validation images held out of the 60,000 training images.
paper.VAL = 10000

-- The grid of each method (comma lists, as grid.lua's axes take them).
paper.AXES = {
  ["bbb-mixture"] = { lr = "1e-3,1e-4,1e-5", samples = "1,2,5,10", pi = "0.25,0.5,0.75",
                      log_sigma1 = "0,1,2", log_sigma2 = "6,7,8" },
  -- the Gaussian prior's sigma is grid.lua's sigma1 axis
  ["bbb-gaussian"] = { lr = "1e-3,1e-4,1e-5", samples = "1,2,5,10", pi = "0.5", log_sigma1 = "0,1,2",
                       log_sigma2 = "6" },
  sgd = { lr = "1e-1,1e-2,1e-3,1e-4,1e-5", samples = "1", pi = "0.5", log_sigma1 = "0", log_sigma2 = "6" },
  dropout = { lr = "1e-1,1e-2,1e-3,1e-4,1e-5", samples = "1", pi = "0.5", log_sigma1 = "0", log_sigma2 = "6" },
}
local MODEL = { sgd = { "--model", "mlp" }, dropout = { "--model", "dropout" },
                ["bbb-gaussian"] = { "--prior", "gaussian" }, ["bbb-mixture"] = { "--prior", "mixture" } }
-- What the paper fixes for every run (flags of mnist.lua).
paper.FIXED = { "--momentum", "0", "--reduction", "sum", "--lr-decay", "1",
                "--pixel-scale", "126", "--batch", "128", "--activation", "relu", "--layers", "2" }

--- paper.parse_key(key) -> config: a grid key ("lr=0.001 pi=0.5 ...") as a
-- table of its numbers (strings where a value is not one).
function paper.parse_key(key)
  local c = {}
  for k, v in key:gmatch("([%w_]+)=(%S+)") do c[k] = tonumber(v) or v end
  return c
end

--- paper.setting_flags(method, config) -> {mnist flags}: the model of a
-- Table 1 method with one grid setting (lr, samples, pi, log_sigma1,
-- log_sigma2; the Gaussian prior's sigma is log_sigma1's).
function paper.setting_flags(method, c)
  local flags = { "--lr", ("%.17g"):format(c.lr), "--samples", tostring(math.tointeger(c.samples or 1)) }
  for _, w in ipairs(MODEL[method]) do flags[#flags + 1] = w end
  if method:find("^bbb") then
    -- in a fixed order, so the printed and saved flags read the same each run
    for _, kv in ipairs { { "pi", c.pi }, { "sigma1", c.log_sigma1 and math.exp(-c.log_sigma1) },
                          { "sigma2", c.log_sigma2 and math.exp(-c.log_sigma2) } } do
      if kv[2] and (method == "bbb-mixture" or kv[1] == "sigma1") then
        flags[#flags + 1], flags[#flags + 2] = "--" .. kv[1], ("%.17g"):format(kv[2])
      end
    end
  end
  return flags
end

--- paper.narrow(lrs, samples) -> {lr =, samples =}: the lists that narrow
-- the grids (nil for an axis left whole), as grid.lua's comma lists.
function paper.narrow(lrs, samples)
  local n = {}
  if lrs then
    local l = {}
    for i, v in ipairs(lrs) do l[i] = ("%.17g"):format(v) end
    n.lr = table.concat(l, ",")
  end
  if samples then n.samples = table.concat(samples, ",") end
  return n
end

-- The axes a method searches: its grid with narrow's lists in (samples per
-- minibatch is a Bayes by Backprop axis: the plain nets draw none).
local function axes_of(method, narrow)
  local axes = setmetatable({}, { __index = paper.AXES[method] })
  for k, v in pairs(narrow or {}) do
    if k ~= "samples" or method:find("^bbb") then axes[k] = v end
  end
  return axes
end

--- paper.describe_narrowing(method, narrow) -> ", the grid narrowed to ..."
-- or "" when the method's grid is whole.
function paper.describe_narrowing(method, narrow)
  local axes, said = axes_of(method, narrow), {}
  for _, k in ipairs { "lr", "samples" } do
    if rawget(axes, k) then said[#said + 1] = k .. " " .. axes[k] end
  end
  return #said > 0 and (", the grid narrowed to " .. table.concat(said, ", ")) or ""
end

--- paper.print_rows(rows, epochs): the table of the rows, ours beside the paper's.
function paper.print_rows(rows, epochs)
  print(("\nTable 1 by the paper's protocol (%d epochs at most; chosen on the validation error; ours: the MC "
    .. "ensemble for Bayes by Backprop, the plain forward pass otherwise; means: posterior means)"):format(epochs))
  print(("%-14s %6s %9s %9s %9s %9s %9s %8s  %s"):format("method", "units", "ours", "means", "val", "paper",
    "budget", "wall", "chosen"))
  local function pct(v) return v and ("%.2f%%"):format(v) or "failed" end
  for _, r in ipairs(rows) do
    print(("%-14s %6d %9s %9s %9s %9s %9d %7ds  %s%s%s"):format(r.method, r.units, pct(r.test_error),
      pct(r.test_error_mean), pct(r.val_error),
      r.paper and ("%.2f%%"):format(r.paper) or "-", r.budget, r.seconds, r.chosen or "-",
      r.best_epoch and ("  test error %.2f%% at epoch %d (best validation)"):format(r.test_error_at_best, r.best_epoch)
        or "",
      r.sigma_mean and ("  mean sigma per layer " .. ("%.4f / "):rep(#r.sigma_mean):sub(1, -4)
        :format(table.unpack(r.sigma_mean))) or ""))
  end
end

--- paper.row(method, units, o) -> row: searches the method's grid for a
-- 2 x units network (o: epochs, min_epochs, halving, jobs, seed, limit,
-- results (a file prefix), axes = {lr =, samples = comma lists narrowing the
-- method's grid}, extra = {mnist flags}), and returns the chosen
-- setting, its validation and test errors, each layer's mean sigma, and the
-- budget (configuration-epochs) the search took; nil on a worker rank under
-- mpirun (the ranks train the grid's runs, rank 0 has the row).
function paper.row(method, units, o)
  local axes = axes_of(method, o.axes)
  local argv = { "--epochs", tostring(o.epochs), "--min-epochs", tostring(o.min_epochs),
    "--halving", tostring(o.halving), "--val", tostring(paper.VAL), "--hidden", tostring(units), "--seed", tostring(o.seed),
    "--results", ("%s-%s-%d.grid.jsonl"):format(o.results, method, units), "--optim", "sgd",
    "--select", o.select or "val-error" }
  if o.jobs then argv[#argv + 1] = "--jobs"; argv[#argv + 1] = tostring(o.jobs) end
  if o.limit then argv[#argv + 1] = "--limit"; argv[#argv + 1] = tostring(o.limit) end
  for _, k in ipairs { "lr", "samples", "pi", "log_sigma1", "log_sigma2" } do
    argv[#argv + 1] = "--" .. k:gsub("_", "-")
    argv[#argv + 1] = axes[k]
  end
  argv[#argv + 1] = "--"
  for _, w in ipairs(paper.FIXED) do argv[#argv + 1] = w end
  for _, w in ipairs(MODEL[method]) do argv[#argv + 1] = w end
  for _, w in ipairs(o.extra or {}) do argv[#argv + 1] = w end
  local g = grid.report(grid.run(grid.parse(argv), { keep_dist = true }))
  if g.worker then return nil end   -- a worker rank under mpirun: rank 0 has the row
  local best = g.ranked[1]
  local row = { method = method, units = units, protocol = "paper", budget = g.budget, grid = g.grid,
                settings = #g.results, axes = {} }
  for _, k in ipairs { "lr", "samples", "pi", "log_sigma1", "log_sigma2" } do row.axes[k] = axes[k] end
  if not best then
    row.failed = true
    return row
  end
  row.chosen, row.config, row.val_error = best.key, best.config, best.val_error
  row.test_error_mean = 100 * (1 - best.test_acc_mean)
  row.test_error_mc = 100 * (1 - best.test_acc_mc)
  row.test_error = method:find("^bbb") and row.test_error_mc or row.test_error_mean
  row.sigma_mean = best.sigma_mean
  -- the chosen run's checkpoint: its epochs, from which figure2.lua --from goes on
  local ck = g.checkpoint and g.checkpoint(best.key)
  if ck and require("bbb.app.sys").kind(ck) then row.checkpoint = ck else ck = nil end
  if best.best_epoch then   -- --select val-error-min: the test error where validation was best
    row.best_epoch, row.test_error_at_best = best.best_epoch, 100 * (1 - best.test_acc_at_best)
  elseif ck then
    -- the chosen run's epochs, from its checkpoint: the test error (posterior
    -- means) at its lowest validation error, what early stopping would report
    local ok, _, info = pcall(bbb.load, ck)
    local h = ok and info.meta and info.meta.state and info.meta.state.history
    if type(h) == "table" then
      local at = grid.best_val_epoch(h)
      if at and at.test_acc then
        row.best_epoch, row.test_error_at_best = math.tointeger(at.epoch), 100 * (1 - at.test_acc)
      end
    end
  end
  return row
end

return paper

--- bbb.app.experiments.figure2: Figure 2 of Blundell et al. (2015), MNIST test
-- error against training epochs for Bayes by Backprop, plain SGD and
-- dropout networks of 2 x N units under the paper's protocol (plain SGD on
-- the summed minibatch cost, pixels / 126, 50,000 training and 10,000
-- validation images, minibatch 128). The three nets train in turn, in
-- rounds of --round epochs, each from its own checkpoint, so the figure
-- grows evenly and a stopped run resumes where it stopped.
-- scripts/figure2.lua is its command line.
local bbb = require "bbb"
local cli = require "bbb.app.cli"
local json = require "bbb.json"
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local mnist = require "bbb.app.experiments.mnist"
local paper = require "bbb.app.experiments.table1_paper"

local figure2 = {}

figure2.METHODS = { "bbb", "sgd", "dropout" }
-- Each method's row of Table 1 (table1.lua --protocol paper), whose chosen
-- setting --from reads.
local ROW_OF = { bbb = "bbb-mixture", sgd = "sgd", dropout = "dropout" }
local TITLE = { bbb = "Bayes by Backprop (scale mixture)", sgd = "SGD, no dropout", dropout = "SGD, dropout" }
local COLOR = { bbb = "#d62728", sgd = "#1f77b4", dropout = "#2ca02c" }
-- Settings used when --from gives none: the grid's learning rate that the
-- summed cost trains at (1e-3, i.e. 0.128 on the mean of 128), one sample,
-- the scale mixture pi 1/2, sigma1 1, sigma2 e^-6.
figure2.DEFAULT = {
  bbb = { lr = 1e-3, samples = 1, pi = 0.5, log_sigma1 = 0, log_sigma2 = 6 },
  sgd = { lr = 1e-3 },
  dropout = { lr = 1e-3 },
}

-- A comma list of file names, none of them empty; returned as given.
local function file_list(s)
  if type(s) ~= "string" or not s:find("[^,%s]") then
    return nil, ("--from: expected a file name (or a comma list of them), got '%s'"):format(tostring(s))
  end
  for item in (s .. ","):gmatch("([^,]*),") do
    if not item:find("%S") then return nil, ("--from: '%s' holds an empty file name"):format(s) end
    if item:find("%c") then
      return nil, ("--from: file name '%s' holds a control character"):format((item:gsub("%c", "?")))
    end
  end
  return s
end

--- figure2.parser() -> the command line.
function figure2.parser()
  local parser = recipe.parser("figure2.lua", "Figure 2 of Blundell et al. (2015): MNIST test error against "
    .. "epochs for Bayes by Backprop, SGD and dropout nets of 2 x UNITS, trained by the paper's protocol "
    .. "(plain SGD on the summed cost, pixels / 126, 50,000 / 10,000 images, minibatch 128). The nets train "
    .. "in turn, --round epochs at a time, each from its checkpoint in --dir: run the same command again to "
    .. "resume, or with a larger --epochs to go on.", { defaults = { epochs = "600", val = "10000" } })
  flags.option(parser, "--units", "Units per hidden layer.", "1200"):convert(cli.positive_integer { max = 1 << 16 })
  flags.option(parser, "--methods", "Nets to train: " .. table.concat(figure2.METHODS, ","), "bbb,sgd,dropout")
    :convert(cli.list(cli.choice(figure2.METHODS), { unique = true }))
  recipe.declare(parser, { "epochs" })
  flags.option(parser, "--round", "Epochs each net trains before the next one's turn.", "25")
    :convert(cli.positive_integer { max = 100000 })
  flags.option(parser, "--from", "The rows of table1.lua --protocol paper (its --out JSON; a comma list for "
    .. "several): each net takes the "
    .. "setting the protocol chose for its row at these units (default: lr 1e-3; BBB: 1 sample, pi 1/2, "
    .. "sigma1 1, sigma2 e^-6), and a net not started yet goes on from the chosen run's checkpoint "
    .. "(the same epochs it would train itself).")
    :convert(file_list)
  recipe.declare(parser, { "val" })
  recipe.declare(parser, { "seed", "threads", "limit", "test_limit" })
  flags.option(parser, "--dir", "Checkpoints, logs, the figure and its CSV go here.", "out/figure2")
    :convert(cli.output_dir())
  parser:argument("mnist_flags", "Flags for every scripts/mnist.lua run, after -- (not the ones figure2.lua sets "
    .. "for each net: --epochs, --hidden, --lr, ...)."):args("*")
  return parser
end

-- The mnist.lua flags figure2.lua sets for each net itself, and where the
-- value comes from instead: given after -- they would win over it.
local OWN_FLAGS = {
  epochs = "--epochs and --round", hidden = "--units", val = "--val", seed = "--seed", threads = "--threads",
  limit = "--limit", test_limit = "--test-limit", optim = "the paper's protocol (sgd)",
  checkpoint = "--dir", log = "--dir", resume = "--dir", save = "--dir", summary = "--dir", curves = "--dir",
  model = "--methods", lr = "--from", samples = "--from", pi = "--from", sigma1 = "--from", sigma2 = "--from",
}

function figure2.parse(argv)
  local parser = figure2.parser()
  local args = recipe.parse(parser, argv)
  -- checked here, not by the first mnist.lua run after the others started
  if args.limit and args.val >= args.limit then
    parser:error(("--val %d must be smaller than --limit %d"):format(args.val, args.limit))
  end
  for _, w in ipairs(args.mnist_flags) do
    local name = w:match("^%-%-([%w-]+)")
    local from = name and OWN_FLAGS[name:gsub("-", "_")]
    if from then
      parser:error(("--%s after --: figure2.lua sets it for each net itself, from %s"):format(name, from))
    end
  end
  return args
end

local function fail(msg) error({ usage = msg }, 0) end

-- What each value of a chosen setting must be (lr is required).
local SETTING = {
  { "lr", function(v) return v > 0 end, "a positive finite number" },
  { "samples", function(v) return math.tointeger(v) and v >= 1 and v <= 1000 end, "an integer from 1 to 1000" },
  { "pi", function(v) return v > 0 and v < 1 end, "a number in (0, 1)" },
  { "log_sigma1", function(v) return math.abs(v) <= 80 end, "a finite number (-log sigma1)" },
  { "log_sigma2", function(v) return math.abs(v) <= 80 end, "a finite number (-log sigma2)" },
}

-- The setting a row chose (a grid key, "lr=0.001 samples=1 ..."), each
-- value checked as the flag it becomes would be.
local function checked_setting(path, row, units, key)
  local c = paper.parse_key(key)
  for _, f in ipairs(SETTING) do
    local v = c[f[1]]
    local ok = type(v) == "number" and v == v and math.abs(v) ~= math.huge and f[2](v)
    if (v ~= nil or f[1] == "lr") and not ok then
      fail(("--from: %s: the %s row of 2x%d chose %s, whose %s is %s: it must be %s"):format(path, row, units,
        key, f[1], v == nil and "missing" or tostring(v), f[3]))
    end
  end
  return c
end

-- The setting chosen for each method at these units in the protocol files
-- (a comma list), and the chosen run's checkpoint where the row names one.
-- A row given by two files is refused: which one the figure shows would
-- otherwise depend on the order.
local function chosen_settings(paths, units)
  local out, cks, where = {}, {}, {}
  for path in paths:gmatch("[^,]+") do
    local kind = bbb.core.sys.kind(path, true)
    if kind and kind ~= "file" then fail(("--from: %s is a %s, not a file"):format(path, kind)) end
    local f, err = io.open(path, "r")
    if not f then fail("--from: " .. tostring(err)) end
    local ok, t = pcall(json.decode, f:read("a"))
    f:close()
    if not ok or type(t) ~= "table" or type(t.rows) ~= "table" then
      fail(("--from: %s is not the JSON that table1.lua --protocol paper writes"):format(path))
    end
    for _, r in ipairs(t.rows) do
      if type(r) == "table" and r.units == units and type(r.chosen) == "string" then
        for m, row in pairs(ROW_OF) do
          if r.method == row then
            if where[m] then
              fail(("--from: the %s row of 2x%d is in both %s and %s"):format(row, units, where[m], path))
            end
            out[m], where[m] = checked_setting(path, row, units, r.chosen), path
            cks[m] = type(r.checkpoint) == "string" and r.checkpoint or nil
          end
        end
      end
    end
  end
  return out, cks
end

-- Each epoch's record of a log, the last one written for an epoch winning
-- (a resumed run writes again the epochs after its checkpoint).
local function read_log(path)
  local by_epoch, n = {}, 0
  local f = io.open(path, "r")
  if not f then return by_epoch, n end
  for line in f:lines() do
    local ok, r = pcall(json.decode, line)
    if ok and type(r) == "table" and type(r.epoch) == "number" then
      local e = math.tointeger(r.epoch)
      if e then
        by_epoch[e] = r
        n = math.max(n, e)
      end
    end
  end
  f:close()
  return by_epoch, n
end

-- The epochs a checkpoint has finished (0 when there is none).
local function epochs_done(path)
  if not require("bbb.app.sys").kind(path) then return 0 end
  local ok, model_or_err, info = pcall(bbb.load, path)
  if not ok then fail(("%s: %s (remove it to start that net again)"):format(path, tostring(model_or_err))) end
  local st = info.meta and info.meta.state
  return math.tointeger(st and st.epoch) or 0
end

-- Where net m's checkpoint, log (ext "ckpt", "jsonl") go.
local function path(args, m, ext) return ("%s/%s-%d.%s"):format(args.dir, m, args.units, ext) end

-- The mnist.lua flags of net m trained to `epochs` (resuming its checkpoint
-- when resume): the run's own settings through the serializer, then the
-- protocol's fixed flags, the method's setting and the flags after --.
local function mnist_argv(args, settings, m, epochs, resume)
  local argv = recipe.argv_of{ epochs = epochs, hidden = args.units, val = args.val, seed = args.seed,
    threads = args.threads, optim = "sgd", checkpoint = path(args, m, "ckpt"), log = path(args, m, "jsonl"),
    limit = args.limit, test_limit = args.test_limit, resume = resume and path(args, m, "ckpt") or nil }
  for _, w in ipairs(paper.FIXED) do argv[#argv + 1] = w end
  for _, w in ipairs(paper.setting_flags(ROW_OF[m], settings[m])) do argv[#argv + 1] = w end
  table.move(args.mnist_flags, 1, #args.mnist_flags, #argv + 1, argv)
  return argv
end

-- Copies the chosen run's checkpoint in as net m's, and its epochs'
-- records into m's log; true when done. A checkpoint that is gone or
-- unreadable is said, and the net trains from its first epoch.
local function adopt(args, m, ck)
  local ok, model_or_err, info = pcall(bbb.load, ck)
  local st = ok and info.meta and info.meta.state
  if not (st and type(st.history) == "table" and math.tointeger(st.epoch)) then
    print(("%-8s the protocol's run %s cannot be read (%s): trained from epoch 1"):format(m, ck,
      ok and "no epochs in it" or tostring(model_or_err)))
    return false
  end
  local src = assert(io.open(ck, "rb"))
  local bytes = src:read("a")
  src:close()
  cli.write_file(path(args, m, "ckpt"), bytes)
  local lines = {}
  for _, r in ipairs(st.history) do lines[#lines + 1] = json.encode(r) end
  cli.write_file(path(args, m, "jsonl"), table.concat(lines, "\n") .. "\n")
  print(("%-8s goes on from the protocol's chosen run, %s (%d epochs)"):format(m, ck, st.epoch))
  return true
end

-- From the nets' logs: the series of test errors, the CSV's lines and each
-- net's summary (final error, the epoch of the best validation error).
local function collect(args, settings)
  local logs, last = {}, 0
  for _, m in ipairs(args.methods) do
    local by_epoch, n = read_log(path(args, m, "jsonl"))
    logs[m], last = by_epoch, math.max(last, n)
  end
  local csv = { "epoch," .. table.concat(args.methods, ",") }
  local series, summary = {}, {}
  for _, m in ipairs(args.methods) do
    local xs, ys, best = {}, {}, nil
    for e = 1, last do
      local r = logs[m][e]
      if r and r.test_acc then
        xs[#xs + 1], ys[#ys + 1] = e, 100 * (1 - r.test_acc)
        if r.val_acc and (not best or r.val_acc > best.val_acc) then best = r end
      end
    end
    if #xs > 0 then
      series[#series + 1] = { x = xs, y = ys, title = TITLE[m], color = COLOR[m] }
      summary[m] = { epochs = xs[#xs], final_test_error = ys[#ys], flags = mnist_argv(args, settings, m, args.epochs),
        best_val_epoch = best and math.tointeger(best.epoch),
        val_error_at_best = best and 100 * (1 - best.val_acc),
        test_error_at_best_val = best and 100 * (1 - best.test_acc),
        sigma_mean = logs[m][xs[#xs]].sigma_mean }
    end
  end
  for e = 1, last do
    local row = { tostring(e) }
    for _, m in ipairs(args.methods) do
      local r = logs[m][e]
      row[#row + 1] = (r and r.test_acc) and ("%.2f"):format(100 * (1 - r.test_acc)) or ""
    end
    csv[#csv + 1] = table.concat(row, ",")
  end
  return series, csv, summary
end

-- The figure: the y axis from a little under the lowest error to 4 times
-- it, as the paper's figure shows the long tail rather than the first epochs.
local function draw(args, series)
  local lo = math.huge
  for _, sr in ipairs(series) do for _, y in ipairs(sr.y) do lo = math.min(lo, y) end end
  lo = math.max(lo, 0.01)
  local tics = {}
  for _, base in ipairs { 0.01, 0.1, 1, 10 } do
    for _, m in ipairs { 1, 1.2, 1.5, 2, 3, 5, 7 } do
      local v = base * m
      if v >= 0.8 * lo and v <= 4 * lo then tics[#tics + 1] = v end
    end
  end
  return require("bbb.app.plot").lines{ file = ("%s/figure2-%d.png"):format(args.dir, args.units), logy = true,
    yrange = { 0.8 * lo, 4 * lo }, ytics = #tics > 0 and tics or nil,
    title = ("MNIST test error, 784-%d-%d-10, the paper's protocol (SGD on the summed cost)")
      :format(args.units, args.units),
    xlabel = "epochs", ylabel = "test error (%)", size = { 900, 560 }, key = "inside", series = series }
end

-- The CSV, the JSON and the figure as they stand; returns their paths and
-- the nets' summaries.
local function write_outputs(args, settings)
  local series, csv, summary = collect(args, settings)
  local files = { csv = ("%s/figure2-%d.csv"):format(args.dir, args.units),
                  json = ("%s/figure2-%d.json"):format(args.dir, args.units) }
  cli.write_file(files.csv, table.concat(csv, "\n") .. "\n")
  cli.write_file(files.json, json.encode{ units = args.units, epochs_asked = args.epochs, methods = summary,
    environment = bbb.core.environment() })
  if #series > 0 then files.png = draw(args, series) end
  return files, summary
end

-- Each net's setting (the protocol's choice with --from, else the default),
-- printed; and the chosen runs' checkpoints.
local function choose_settings(args)
  local settings, from, from_ck = {}, {}, {}
  if args.from then from, from_ck = chosen_settings(args.from, args.units) end
  for _, m in ipairs(args.methods) do settings[m] = from[m] or figure2.DEFAULT[m] end
  for _, m in ipairs(args.methods) do
    print(("%-8s %s (%s)"):format(m, table.concat(paper.setting_flags(ROW_OF[m], settings[m]), " "),
      from[m] and ("chosen by the protocol in " .. args.from) or "the default setting: no --from row for it"))
  end
  return settings, from_ck
end

-- The epochs each net has done: its checkpoint's, or, for a net not started
-- yet, the protocol's chosen run's (the same flags and seed, so the same
-- epochs an unbroken run would train).
local function epochs_so_far(args, from_ck)
  local done, parts = {}, {}
  for _, m in ipairs(args.methods) do
    done[m] = epochs_done(path(args, m, "ckpt"))
    if done[m] == 0 and from_ck[m] and adopt(args, m, from_ck[m]) then done[m] = epochs_done(path(args, m, "ckpt")) end
    parts[#parts + 1] = ("%s %d done"):format(m, done[m])
  end
  print(("Figure 2, 784-%d-%d-10, %d epochs, %d per round: %s"):format(args.units, args.units, args.epochs,
    args.round, table.concat(parts, ", ")))
  io.stdout:flush()
  return done
end

-- Net m's next round, to epoch target; an interrupted run writes what is
-- there and exits as its signal says.
local function train_round(args, settings, m, done, target)
  print(("== %s: epochs %d-%d of %d"):format(m, done[m] + 1, target, args.epochs))
  io.stdout:flush()
  local r = mnist.run(mnist.parse(mnist_argv(args, settings, m, target, done[m] > 0)))
  mnist.report(r)
  if r.status == "interrupted" then
    write_outputs(args, settings)
    error({ signal = r.signal or 2, message = ("%s interrupted in epoch %d; %s. Run the same command again to "
      .. "resume."):format(m, r.epoch + 1, r.checkpoint and ("its state is saved in " .. r.checkpoint)
      or "nothing was saved") }, 0)
  end
  done[m] = target
  local files = write_outputs(args, settings)
  print(("wrote %s and %s"):format(files.png or "(no figure yet)", files.csv))
end

--- figure2.run(args) -> {methods, epochs = {method = n}, csv, png, json,
-- summary, units}: trains the nets in rounds until each has --epochs.
function figure2.run(args)
  local settings, from_ck = choose_settings(args)
  -- each net's flags checked as mnist.lua checks them, before any net
  -- trains: a flag after -- that one of them cannot take stops the figure now
  for _, m in ipairs(args.methods) do mnist.parse(mnist_argv(args, settings, m, args.epochs, false)) end
  local done = epochs_so_far(args, from_ck)
  repeat
    local any = false
    for _, m in ipairs(args.methods) do
      if done[m] < args.epochs then
        any = true
        train_round(args, settings, m, done, math.min(args.epochs, done[m] + args.round))
      end
    end
  until not any
  local files, summary = write_outputs(args, settings)
  return { methods = args.methods, epochs = done, csv = files.csv, png = files.png, json = files.json,
           summary = summary, units = args.units }
end

--- figure2.report(result): the nets' final and best-validation test errors,
-- and the files written.
function figure2.report(r)
  print(("\nFigure 2, 784-%d-%d-10: test error (%%), posterior means for Bayes by Backprop"):format(r.units, r.units))
  print(("%-8s %7s %10s %12s %12s"):format("net", "epochs", "final", "best val at", "test there"))
  for _, m in ipairs(r.methods) do
    local s = r.summary[m]
    if s then
      print(("%-8s %7d %9.2f%% %12s %11s"):format(m, s.epochs, s.final_test_error,
        s.best_val_epoch and tostring(s.best_val_epoch) or "-",
        s.test_error_at_best_val and ("%.2f%%"):format(s.test_error_at_best_val) or "-"))
    end
  end
  print(("wrote %s, %s and %s"):format(r.png or "-", r.csv, r.json))
end

return figure2

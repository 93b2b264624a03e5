--- bbb.app.recipe: what every experiment shares, declared once.
-- The flags (one declaration, one check and one help text each), presets,
-- resuming a run, the run's output files, and building its prior, model,
-- ELBO and optimizer from the flags. An experiment script keeps only what is
-- its own: its data, its model choice and its report.
--
--   local recipe = require "bbb.app.recipe"
--   local parser = recipe.parser("mnist.lua", "Train ...", {
--     flags = { "seed", "threads", "hidden", "prior", "lr", "log", "checkpoint", "resume" },
--     defaults = { lr = "0.01" } })
--   local args = recipe.parse(parser)
--   local prior = recipe.prior(args)
local cli = require "bbb.app.cli"
local argparse = require "argparse"
local flags = require "bbb.app.flags"

local recipe = {}

local FLAGS = flags.SHARED
recipe.FLAGS = FLAGS

-- Every flag written as it would be on a command line, for the converters.
local function as_text(v)
  if math.type(v) == "float" then return ("%.17g"):format(v) end
  return tostring(v)
end

--- recipe.parser(script, about, spec) -> an argparse parser with the shared
-- flags spec.flags (names as in recipe.FLAGS, in that order) declared, with
-- spec.defaults[name] replacing a default (false: no default),
-- spec.aliases[name] a second spelling ("--steps" for epochs), and
-- spec.presets ({name = {about =, flags = {...}}}) offered as --preset.
function recipe.parser(script, about, spec)
  local parser = argparse(script, about)
  spec = spec or {}
  parser._bbb_spec = spec
  parser._bbb_script = script
  -- bad input reads "script.lua: what was wrong" and exits 2, as the
  -- experiments' own errors do (recipe.main), with a pointer to --help
  -- instead of the whole usage text
  parser.error = function(_, msg)
    io.stderr:write(("%s: %s\nTry '%s --help' for the options.\n"):format(script, msg, script))
    os.exit(2)
  end
  if spec.presets then
    local names, help = {}, { "Presets (explicit flags override them):" }
    for k in pairs(spec.presets) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do help[#help + 1] = ("  %s: %s."):format(k, spec.presets[k].about) end
    parser:epilog(table.concat(help, "\n"))
    parser:option("--preset", "A named setup (see below)."):convert(cli.choice(names))
  end
  recipe.declare(parser, spec.flags or {})
  return parser
end

--- recipe.declare(parser, names): declares more shared flags on a parser made
-- by recipe.parser (so a script can interleave its own flags with them).
function recipe.declare(parser, names)
  local spec = parser._bbb_spec or {}
  for _, name in ipairs(names) do
    if not FLAGS[name] then error(("recipe.declare: no shared flag %s"):format(tostring(name)), 2) end
    local default = spec.defaults and spec.defaults[name]
    flags.build(parser, name, default, spec.aliases and spec.aliases[name])
  end
end

--- recipe.argv_of{key = value, ...} -> the command line that says the same
-- ({"--key", "value", ...}, flags for true), in a fixed order.
function recipe.argv_of(t)
  local keys, argv = {}, {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v, flag = t[k], "--" .. tostring(k):gsub("_", "-")
    if v == true then argv[#argv + 1] = flag
    elseif v ~= false and v ~= nil then argv[#argv + 1] = flag .. "=" .. as_text(v) end
  end
  return argv
end

--- recipe.main(script, fn, ...) runs fn(...) and turns its errors into what a
-- person reads: "script: message" on stderr and exit status 2 for bad input
-- (an error raised as {usage = message}, or a bad flag), 1 for any other
-- failure, 128 + N when run raised {signal = N, message =} (stopped by signal
-- N); the Lua traceback only with --debug or BBB_DEBUG=1 set.
function recipe.main(script, fn, ...)
  local debug_on = os.getenv("BBB_DEBUG") == "1"
  for _, a in ipairs(arg or {}) do if a == "--debug" then debug_on = true end end
  local ok, err = xpcall(fn, function(e)
    if type(e) == "table" and (e.usage or e.signal) then return e end
    if debug_on then return debug.traceback(tostring(e), 2) end
    return tostring(e)
  end, ...)
  if ok then return err end
  -- bbblua turns Ctrl-C outside a trapped loop into the error "interrupted!"
  -- (at the next Lua step, so a read in C ends first), and a C op that saw
  -- it ends with "op: interrupted": an interrupt, not a failure, however a
  -- pcall on the way reworded it
  local text = type(err) == "table" and tostring(err.usage or "") or tostring(err)
  if text:match(": interrupted$") or text:match("interrupted!$") then err = { signal = 2, message = "interrupted" } end
  if type(err) == "table" and err.signal then   -- stopped by a signal: exit as the shell expects, 128 + N
    io.stderr:write("\n", script, ": ", tostring(err.message or "interrupted"), "\n")
    os.exit(128 + err.signal)
  end
  if type(err) == "table" then
    io.stderr:write(script, ": ", tostring(err.usage), "\n")
    os.exit(2)
  end
  if not debug_on then   -- every "file.lua:N: " in front (an error passed on by error(e, level) gains one)
    local n
    repeat err, n = err:gsub("^[^\n]-%.lua:%d+: ", "") until n == 0
  end
  io.stderr:write(script, ": ", err, "\n")
  os.exit(1)
end

-- Prints "script: message" and exits 2: a bad flag is the user's input, not a
-- crash, so no traceback.
local function usage_error(parser, msg)
  parser:error(msg)
end

-- The saved flags of a checkpoint, each checked again by its converter: an
-- edited checkpoint (a dataset or activation that does not exist) is refused.
local function checked_saved_args(parser, saved, path)
  local by_key = {}
  for _, o in ipairs(parser._options or {}) do
    local long
    for _, a in ipairs(o._aliases) do if a:sub(1, 2) == "--" then long = a break end end
    if long then by_key[long:sub(3):gsub("-", "_")] = o end
  end
  local out = {}
  for k, v in pairs(saved) do
    local o = by_key[k]
    if k == "prior_hash" then
      out[k] = v
    elseif not o then
      if not k:find("^_") then
        usage_error(parser, ("--resume: %s holds a flag this script does not have (%s = %s): it was "
          .. "written by another script or edited"):format(path, k, as_text(v)))
      end
      out[k] = v
    elseif type(v) == "boolean" then
      out[k] = v
    else
      local conv = o._convert
      local val, err = v, nil
      if type(conv) == "function" then val, err = conv(as_text(v)) end
      if val == nil then
        usage_error(parser, ("--resume: %s holds an invalid --%s (%s)"):format(path, k:gsub("_", "-"), err))
      end
      out[k] = val
    end
  end
  return out
end

-- Flags passed on to mnist.lua (a script's mnist_flags, after --): a first
-- word that is no flag is a stray argument, refused as bad input rather
-- than handed on.
local function check_passed_flags(parser, words)
  if words[1] and not words[1]:find("^%-") then
    parser:error(("unexpected argument '%s' (flags for mnist.lua go after --)"):format(words[1]))
  end
end

local function is_lua_prior(v) return type(v) == "string" and v:find("%.lua$") ~= nil end

-- The prior a Lua file on the command line returns (a usage error if not).
local function resume_prior(parser, path)
  if not is_lua_prior(path) then return nil end
  local ok, p = pcall(require("bbb.prior").from_file, path)
  if not ok then usage_error(parser, "--prior: " .. tostring(p):gsub("^[^\n]-:%d+: ", "")) end
  return p
end

--- recipe.parse(parser [, argv]) -> args, given
-- Parses the command line; applies the --preset's flags that were not given;
-- for --resume, loads the checkpoint (args._resume = what bbb.load returned)
-- and takes every flag not given from it, after checking it again. Flags in
-- spec.run_flags that were given must equal the saved ones; output paths
-- (--log, --checkpoint, --save, --summary, ...) never come from the
-- checkpoint: a resumed run writes where its command line says, and its
-- checkpoint by default over the file it resumed from. Two outputs on one
-- path are refused, and every output's folder is made before any work.
function recipe.parse(parser, argv)
  local spec = parser._bbb_spec or {}
  argv = argv or arg
  local renamed = flags.check_renamed(argv)
  if renamed then usage_error(parser, renamed) end
  local args = cli.parse(parser, argv)
  local given = cli.given(parser, argv)
  if type(args.resume) == "string" then   -- the shared --resume FILE (a script's own --resume flag is its own)
    -- a prior written in Lua runs only from the path given on this command line
    local given_prior = given.prior and resume_prior(parser, args.prior) or nil
    local ok, model_or_err, info = pcall(require("bbb").load, args.resume, { prior = given_prior })
    if not ok then usage_error(parser, "--resume: " .. tostring(model_or_err):gsub("^[^\n]-:%d+: ", "")) end
    local saved = info.meta and info.meta.args
    if type(saved) ~= "table" then usage_error(parser, ("--resume: %s holds no run arguments"):format(args.resume)) end
    saved = checked_saved_args(parser, saved, args.resume)
    if is_lua_prior(saved.prior) and not given.prior then
      usage_error(parser, ("--resume: %s was trained with the prior written in Lua %s, and opening a "
        .. "checkpoint never runs code it names: give it again with --prior FILE")
        :format(args.resume, as_text(saved.prior)))
    end
    if given_prior then
      local want = type(saved.prior_hash) == "string" and saved.prior_hash or nil
      if want and want ~= given_prior.file_hash then
        usage_error(parser, ("--prior: %s (hash %s) is not the file %s was trained with (hash %s)")
          :format(args.prior, given_prior.file_hash, args.resume, want))
      end
      args._prior = given_prior
    end
    if given.preset and saved.preset ~= args.preset then
      usage_error(parser, ("--preset %s differs from the resumed run's (%s): a resumed run keeps its setup")
        :format(args.preset, tostring(saved.preset or "none")))
    end
    for _, k in ipairs(spec.run_flags or {}) do
      if given[k] and args[k] ~= saved[k] then
        usage_error(parser, ("--%s is %s but %s was trained with %s: a resumed run keeps its flags")
          :format(k:gsub("_", "-"), as_text(args[k]), args.resume, as_text(saved[k])))
      end
    end
    for k, v in pairs(saved) do
      local f = FLAGS[k]
      if not given[k] and not (f and (f.output or f.flag)) and k ~= "resume" then args[k] = v end
    end
    args._resume = info
  elseif args.preset then
    for k, v in pairs(spec.presets[args.preset].flags) do
      if not given[k] then args[k] = v end
    end
  end
  if type(args.prior) == "table" then args._prior = args.prior end   -- declare_model_prior's
  if is_lua_prior(args.prior) and not args._prior then
    local p = resume_prior(parser, args.prior)
    args._prior, args.prior_hash = p, p.file_hash
  elseif args._prior then
    args.prior_hash = args._prior.file_hash
  end
  local ok, err = recipe.prepare_outputs(args, spec.outputs)
  if not ok then usage_error(parser, err) end
  args._given = given
  if type(args.mnist_flags) == "table" then check_passed_flags(parser, args.mnist_flags) end
  return args, given
end

--- recipe.declare_model_prior(parser): --prior FILE for a script that opens
-- a saved model. A model trained with a prior written in Lua needs its file
-- named on the command line, since opening a model never runs code the model
-- names; the option's value is the loaded prior (recipe.parse also puts it
-- in args._prior).
function recipe.declare_model_prior(parser)
  parser:option("--prior", "The prior written in Lua that the saved model was trained with "
    .. "(needed only for such a model).", nil, function(v)
      if not is_lua_prior(v) then return nil, ("'%s' is not a .lua file"):format(v) end
      local ok, p = pcall(require("bbb.prior").from_file, v)
      if not ok then return nil, tostring(p):gsub("^[^\n]-:%d+: ", "") end
      return p
    end)
end

-- The flags that name files a run reads: no output may be one of them.
local INPUTS = { "data", "model", "test", "split", "from", "resume", "from_bbb", "from_mlp", "from_dropout" }

-- A key that is the same for two paths of one file: its device and inode
-- when it exists, else its folder's and its name (so "x.ckpt" and
-- "./x.ckpt" meet), else the path itself.
local function file_key(path)
  local sys = require("bbb.core").sys
  local id = sys.identity(path)
  if id then return id end
  local dir, base = path:match("^(.*)/([^/]*)$")
  if not dir then dir, base = ".", path elseif dir == "" then dir = "/" end
  local did = sys.identity(dir)
  return did and (did .. "/" .. base) or path
end

--- recipe.prepare_outputs(args [, extra]) -> true | nil, message: refuses two
-- outputs on one file, and an output on a file the run reads (compared as
-- files, not strings: "x" and "./x" are one), and makes every output's
-- missing folder now, before any training, so a path error never throws
-- away a trained model. extra lists script-specific output keys besides
-- the shared ones.
function recipe.prepare_outputs(args, extra)
  local keys, listed = {}, {}
  for name, f in pairs(FLAGS) do if f.output then keys[#keys + 1], listed[name] = name, true end end
  for _, k in ipairs(extra or {}) do
    if not listed[k] then keys[#keys + 1], listed[k] = k, true end
  end
  table.sort(keys)
  local seen = {}
  for _, k in ipairs(INPUTS) do
    if type(args[k]) == "string" and k ~= "resume" then seen[file_key(args[k])] = { k, "input" } end
  end
  for _, k in ipairs(keys) do
    local path = args[k]
    if k == "checkpoint" and path == nil and type(args.resume) == "string" then path = args.resume end
    if type(path) == "string" then
      local key, other = file_key(path), nil
      other = seen[key]
      if other and other[2] == "input" then
        return nil, ("--%s and --%s name the same file %s: an output must not replace what the run reads")
          :format(k:gsub("_", "-"), other[1]:gsub("_", "-"), path)
      elseif other then
        return nil, ("--%s and --%s name the same file %s"):format(other[1]:gsub("_", "-"), k:gsub("_", "-"), path)
      end
      seen[key] = { k, "output" }
      local ok, err = require("bbb.app.sys").mkdir_for(path)
      if not ok then return nil, ("--%s: %s"):format(k:gsub("_", "-"), err) end
    end
  end
  return true
end

-- The checkout bbb runs from (this file is <root>/lua/bbb/app/recipe.lua);
-- nil for an installed bbb.
local CHECKOUT = (debug.getinfo(1, "S").source:match("^@(.*)/lua/bbb/app/recipe%.lua$"))

-- The image data sets: their name, their folder under data/, and where a
-- system package puts them.
local IMAGE_SETS = {
  mnist = { name = "MNIST", dir = "mnist" },
  fashion = { name = "Fashion-MNIST", dir = "fashion-mnist", system = "/usr/share/datasets/fashion-mnist" },
}
local IMAGE_FILES = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
  "t10k-labels-idx1-ubyte" }

--- recipe.image_folder(dataset) -> folder, name | nil, message: the one
-- folder the images of dataset ("mnist" or "fashion") are read from, and
-- the set's name. It is the checkout's data/mnist or data/fashion-mnist
-- (data/... under the working folder for an installed bbb), or, for
-- Fashion-MNIST when that folder does not exist, where Debian's package
-- puts it. All four IDX files (each plain or gzipped) must be there: the
-- training and test sets never come from two folders.
function recipe.image_folder(dataset)
  local set = IMAGE_SETS[dataset]
  if not set then return nil, ("no image data set %s"):format(tostring(dataset)) end
  local kind = require("bbb.core").sys.kind
  local folder = (CHECKOUT and (CHECKOUT .. "/") or "") .. "data/" .. set.dir
  if not kind(folder, true) and set.system and kind(set.system, true) then folder = set.system end
  if kind(folder, true) ~= "folder" then
    return nil, ("%s data: %s is not a folder (scripts/bootstrap fetches the data)"):format(set.name, folder)
  end
  for _, f in ipairs(IMAGE_FILES) do
    local path = folder .. "/" .. f
    if not (kind(path, true) or kind(path .. ".gz", true)) then
      return nil, ("%s data: %s holds no %s (nor %s.gz): the four files of a data set are read from one "
        .. "folder (scripts/bootstrap fetches them)"):format(set.name, folder, f, f)
    end
  end
  return folder, set.name
end

--- recipe.load_images(dataset, opts) -> the data set: bbb.data's loader of
-- dataset ("mnist" or "fashion") with opts, reading recipe.image_folder's
-- folder only (an error naming it when it is not whole).
function recipe.load_images(dataset, opts)
  local folder, name = recipe.image_folder(dataset)
  if not folder then error(name, 0) end
  local o = { root = folder }
  for k, v in pairs(opts) do o[k] = v end
  local load = dataset == "fashion" and require("bbb").data.load_fashion_mnist or require("bbb").data.load_mnist
  return load(o)
end

-- A value of a checkpoint's state as a message shows it.
local function shown(v)
  if type(v) == "string" then return ("the string '%s'"):format(v:sub(1, 40):gsub("%c", "?")) end
  if type(v) == "table" then return next(v) == 1 and "a list" or "an object" end
  if math.type(v) == "float" then
    if math.tointeger(v) then return tostring(math.tointeger(v)) end
    local short = ("%.15g"):format(v)
    return tonumber(short) == v and short or as_text(v)
  end
  return tostring(v)
end

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end
-- A whole number from a checkpoint's JSON (which gives floats), or nil.
local function whole(v) return type(v) == "number" and math.tointeger(v) or nil end

-- Where the run stands: state.epoch, state.batch (and the epoch's order
-- and sums inside an epoch), the schedule's epoch, the ELBO's steps.
local function check_position(meta, tensors, o, bad)
  local st = meta.state
  local epoch = whole(st.epoch)
  if not epoch or epoch < 0 or epoch > o.epochs then
    return bad("state.epoch", st.epoch, ("an integer from 0 to the run's --epochs (%d)"):format(o.epochs))
  end
  local batch = whole(st.batch)
  if not batch or batch < 0 then return bad("state.batch", st.batch, "a non-negative integer") end
  if batch > 0 then
    local order = tensors.extra and tensors.extra.order
    if not order or order:dim() ~= 1 then
      return bad("state.batch", st.batch, "0, since the checkpoint holds no data order for a later batch")
    end
    local batches = (order:numel() + o.batch - 1) // o.batch
    if batch > batches then
      return bad("state.batch", st.batch, ("at most the %d batches of an epoch"):format(batches))
    end
    if type(st.sums) ~= "table" then return bad("state.sums", st.sums, "the sums of the epoch so far") end
    for _, k in ipairs { "loss", "nll", "complexity", "correct", "n", "seconds" } do
      if not finite(st.sums[k]) then return bad("state.sums." .. k, st.sums[k], "a finite number") end
    end
  end
  if (o.schedule or meta.schedule ~= nil) and type(meta.schedule) ~= "table" then
    return bad("schedule", meta.schedule, "the learning rate schedule's position")
  end
  if meta.schedule ~= nil and whole(meta.schedule.epoch) ~= epoch then
    return bad("schedule.epoch", meta.schedule.epoch, ("the state's epoch (%d)"):format(epoch))
  end
  if type(meta.elbo) ~= "table" then return bad("elbo", meta.elbo, "the ELBO's state") end
  local steps = whole(meta.elbo.steps)
  if not steps or steps < 0 then return bad("elbo.steps", meta.elbo.steps, "a non-negative integer") end
  if st.history ~= nil and (type(st.history) ~= "table" or (next(st.history) ~= nil and #st.history == 0)) then
    return bad("state.history", st.history, "the list of the epochs' records")
  end
  for i, rec in ipairs(st.history or {}) do
    if type(rec) ~= "table" then return bad(("state.history[%d]"):format(i), rec, "an epoch's record") end
  end
  if st.wall ~= nil and not (finite(st.wall) and st.wall >= 0) then
    return bad("state.wall", st.wall, "a finite number of seconds >= 0")
  end
  if st.ranks ~= nil and not ((whole(st.ranks) or 0) >= 1) then
    return bad("state.ranks", st.ranks, "a positive integer")
  end
  return true
end

-- The optimizer's hyperparameters and the range each must be in.
local OPTIMIZER_FIELDS = {
  { "weight_decay", 0 }, { "clip_norm", nil, 0 }, { "momentum", 0, nil, 1 }, { "beta1", 0, nil, 1 },
  { "beta2", 0, nil, 1 }, { "eps", nil, 0 }, { "alpha", 0, nil, 1 },
}

-- The optimizer: its kind, its step count, its learning rate and other
-- hyperparameters, and each moment buffer the shape of its parameter.
local function check_optimizer(meta, tensors, o, bad)
  local opt = meta.optimizer
  if type(opt) ~= "table" or next(opt) == 1 then return bad("optimizer", opt, "the optimizer's state") end
  if o.optimizer and opt.kind ~= o.optimizer then
    return bad("optimizer.kind", opt.kind, ("%s, this run's optimizer"):format(o.optimizer))
  end
  local t = whole(opt.t)
  if not t or t < 0 then return bad("optimizer.t", opt.t, "a non-negative integer (the steps taken)") end
  if not (finite(opt.lr) and opt.lr > 0) then return bad("optimizer.lr", opt.lr, "a positive finite number") end
  for _, f in ipairs(OPTIMIZER_FIELDS) do
    local v, min, above, below = opt[f[1]], f[2], f[3], f[4]
    if v ~= nil and not (finite(v) and (min == nil or v >= min) and (above == nil or v > above)
        and (below == nil or v < below)) then
      return bad("optimizer." .. f[1], v, ("a finite number %s"):format(min and (below and ("in [%g, %g)")
        :format(min, below) or (">= " .. min)) or ("> " .. above)))
    end
  end
  if opt.nesterov ~= nil and type(opt.nesterov) ~= "boolean" then
    return bad("optimizer.nesterov", opt.nesterov, "true or false")
  end
  local model = tensors.model or {}
  for name, buf in pairs(tensors.optimizer or {}) do
    local param, kind = name:match("^(.+)%.(%a+)$")
    local p = param and model[param]
    if not p or not (kind == "m" or kind == "v" or kind == "buf" or kind == "sq") then
      return nil, ("--resume: %s holds the optimizer tensor %s, which belongs to none of the model's parameters: "
        .. "it was edited"):format(o.path, name)
    end
    if table.concat(buf:size(), "x") ~= table.concat(p:size(), "x") then
      return nil, ("--resume: %s holds the optimizer tensor %s of shape %s, but its parameter %s has shape %s: "
        .. "it was edited"):format(o.path, name, table.concat(buf:size(), "x"), param, table.concat(p:size(), "x"))
    end
  end
  return true
end

-- The generators the run restores: each a seed and a counter in decimal.
local function check_generators(meta, o, bad)
  for _, name in ipairs(o.generators or {}) do
    local g = type(meta.generators) == "table" and meta.generators[name]
    if type(g) ~= "table" then return bad("generators." .. name, g or nil, "a generator's seed and counter") end
    for _, k in ipairs { "seed", "counter" } do
      local v = type(g[k]) == "string" and g[k]:find("^%-?%d+$") and math.tointeger(tonumber(g[k]))
      if not v or (k == "counter" and v < 0) then
        return bad(("generators.%s.%s"):format(name, k), g[k],
          k == "seed" and "an integer in decimal digits" or "a non-negative integer in decimal digits")
      end
    end
  end
  return true
end

--- recipe.check_train_state(info, path, o) -> true | nil, message: the
-- training state of a checkpoint (the info bbb.load returns) checked as
-- the user's input is, before a run resumes it. o: epochs (the run's
-- --epochs: the saved epoch may not be past it), batch (its --batch),
-- optimizer (its kind: "Adam", "SGD" or "RMSprop"), schedule (true when
-- the run has a learning rate schedule), generators (the names the run
-- restores). The message names the checkpoint and the field.
function recipe.check_train_state(info, path, o)
  o = setmetatable({ path = path }, { __index = o })
  local function bad(field, v, need)
    local what = v == nil and ("no " .. field) or ("%s = %s"):format(field, shown(v))
    return nil, ("--resume: %s holds %s, which must be %s: it was not written by a training run, or "
      .. "was edited"):format(path, what, need)
  end
  local meta = type(info) == "table" and type(info.meta) == "table" and info.meta or {}
  local st = meta.state
  if type(st) ~= "table" or next(st) == 1 then return bad("state", st, "the training state (an object)") end
  if st.kind ~= "train" then return bad("state.kind", st.kind, "'train'") end
  local tensors = type(info) == "table" and info.tensors or {}
  local ok, err = check_position(meta, tensors, o, bad)
  if ok then ok, err = check_optimizer(meta, tensors, o, bad) end
  if ok then ok, err = check_generators(meta, o, bad) end
  return ok, err
end

--- recipe.saved_args(args) -> the flags to store in a checkpoint: everything
-- but where the run was resumed from and how it was launched.
function recipe.saved_args(args)
  local out = {}
  for k, v in pairs(args) do
    local f = FLAGS[k]
    if k ~= "resume" and k:sub(1, 1) ~= "_" and not (f and f.flag) then out[k] = v end
  end
  return out
end

--- recipe.prior(args) -> the prior the flags describe: --prior mixture
-- (--pi, --sigma1, --sigma2), gaussian (--sigma1, or --prior-sigma where the
-- script has it), laplace (--sigma1 as b), or a Lua file returning a prior
-- (its name and a hash of its text are kept in the checkpoint).
function recipe.prior(args)
  local prior = require("bbb.prior")
  local kind = args.prior or "gaussian"
  if args._prior then return args._prior end
  if kind:find("%.lua$") then return prior.from_file(kind, args.prior_hash) end
  if kind == "mixture" then
    return prior.ScaleMixture{ pi = args.pi, sigma1 = args.sigma1, sigma2 = args.sigma2 }
  elseif kind == "gaussian" then
    return prior.Gaussian{ sigma = args.prior_sigma or args.sigma1 }
  elseif kind == "laplace" then
    return prior.Laplace{ b = args.sigma1 }
  end
  -- another C prior of the registry: each parameter from the flag of its name
  return prior.from_config(setmetatable({ kind = kind }, { __index = args }))
end

--- recipe.activation(args) -> the activation module class of --activation.
function recipe.activation(args)
  local nn = require("bbb.nn")
  return ({ relu = nn.ReLU, sigmoid = nn.Sigmoid, tanh = nn.Tanh })[args.activation or "relu"]
end

--- recipe.mlp(args, sizes, gen [, prior]) -> a Bayesian MLP (model "bbb"),
-- or a plain or dropout MLP (model "mlp" / "dropout").
function recipe.mlp(args, sizes, gen, prior)
  local nn = require("bbb.nn")
  if (args.model or "bbb") == "bbb" then
    return nn.bayes_mlp(sizes, { prior = prior or recipe.prior(args), estimator = args.estimator,
      activation = recipe.activation(args), rho_init = args.rho_init, mu_scale = args.mu_init, generator = gen })
  end
  return nn.mlp(sizes, { activation = recipe.activation(args), generator = gen,
    dropout = args.model == "dropout" and args.dropout or nil })
end

--- recipe.optimizer(args, net) -> optimizer, schedule (exponential decay by
-- --lr-decay per epoch; nil when the script has no --lr-decay).
function recipe.optimizer(args, net)
  local optim = require("bbb.optim")
  local scale = args.rho_lr_scale and args.rho_lr_scale ~= 1 and { rho = args.rho_lr_scale } or nil
  local opt
  if args.optim == "sgd" then
    opt = optim.SGD(net, { lr = args.lr, momentum = args.momentum or 0, lr_scale = scale })
  elseif args.optim == "rmsprop" then
    opt = optim.RMSprop(net, { lr = args.lr, lr_scale = scale })
  else
    opt = optim.Adam(net, { lr = args.lr, lr_scale = scale })
  end
  return opt, args.lr_decay and optim.schedule.exponential(opt, args.lr_decay) or nil
end

--- recipe.interrupted(script, result [, suffix, prefix]) raises the
-- interrupt for recipe.main, which prints where the state was saved and
-- how to resume (the command as it was invoked, with prefix before it and
-- suffix after it), and exits 128 + the signal (130 for Ctrl-C, 143 for
-- SIGTERM, 129 for SIGHUP).
function recipe.interrupted(script, result, extra, prefix)
  local argv0 = (prefix or "") .. table.concat(require("bbb.app.sys").bbblua_argv(arg and arg[0] or script), " ")
  local message
  if result.checkpoint then
    message = ("interrupted in epoch %d after batch %d; the state is saved in %s.\n"
      .. "Resume with: %s --resume %s%s"):format(result.epoch + 1, result.batch, result.checkpoint,
      argv0, result.checkpoint, extra or "")
  else
    message = ("interrupted in epoch %d after batch %d; nothing was saved."):format(result.epoch + 1, result.batch)
  end
  error({ signal = result.signal or 2, message = message }, 0)
end

--- recipe.interrupt_path(stem) -> a file name for the state of an
-- interrupted run that has no --checkpoint: stem.ckpt, or stem-2.ckpt,
-- stem-3.ckpt, ... when an earlier interrupted run's file is there.
function recipe.interrupt_path(stem)
  local path, k = stem .. ".ckpt", 1
  while require("bbb.app.sys").kind(path) do
    k = k + 1
    path = ("%s-%d.ckpt"):format(stem, k)
  end
  return path
end

return recipe

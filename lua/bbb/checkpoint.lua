--- bbb.checkpoint: models and training state in safetensors files.
--
-- A file is an 8-byte little-endian header length, a JSON header mapping
-- each tensor's name to {dtype = "F32", shape, data_offsets}, plus
-- "__metadata__" (string values only: "format" = "bbb", "bbb" = the JSON
-- of bbb's own description, and "openblas" and "openblas_core": the
-- OpenBLAS build and kernels the file was written under, which a replay of
-- its run pins), then the raw little-endian float32 data. Any
-- safetensors reader opens it. Writes are atomic (temporary file, fsync,
-- rename); the reader trusts nothing in the file.
--
--   bbb.save("net.safetensors", net)                -- a model
--   bbb.save("run.ckpt", {model = net, optimizer = opt, generators = {...}, state = {...}})
--   local net, info = bbb.load("net.safetensors")   -- ready for net:predict
local core = require "bbb.core"
local json = require "bbb.json"

local checkpoint = {}

checkpoint.FORMAT = "bbb"
checkpoint.VERSION = 1

local MAX_TENSORS = 100000

local function fail(msg, ...) error(msg:format(...), 0) end
local check_config_fits

-- Calls a core function; its error loses the position inside this file,
-- which the public wrapper replaces with the user's.
local function ccall(fn, ...)
  local res = table.pack(pcall(fn, ...))
  if not res[1] then error((tostring(res[2]):gsub("^[^\n]-:%d+: ", "")), 0) end
  return table.unpack(res, 2, res.n)
end

-- Wraps fn so its errors point at the caller of the public function (the
-- raw functions raise without a position and call each other directly).
local function public(fn)
  return function(...)
    local res = table.pack(pcall(fn, ...))
    if not res[1] then error(res[2], 2) end
    return table.unpack(res, 2, res.n)
  end
end

-- The first entry of a tensor that is NaN or inf: the module contract's.
local function first_nonfinite(t) return require("bbb.nn.module").first_nonfinite(t) end

-- A file of NaN weights would load without a word and predict NaN: the
-- run that made them has diverged, and saving hides it.
local function sorted_names(tensors, what)
  local names = {}
  for name, t in pairs(tensors) do
    if type(name) ~= "string" or name == "" or name == "__metadata__" then
      fail("checkpoint.write: tensor names must be non-empty strings other than __metadata__, got %s",
        tostring(name))
    end
    if not core.is_tensor(t) then
      fail("checkpoint.write: %s is a %s, not a tensor", name, type(t))
    end
    local at, v = first_nonfinite(t)
    if at then
      fail("%s: %s holds %s at element %d: only finite values are saved", what, name,
        v ~= v and "NaN" or tostring(v), at)
    end
    names[#names + 1] = name
  end
  table.sort(names)
  return names
end

--- write(path, {name = tensor}, meta): meta is any JSON-able table, stored
-- as the string __metadata__.bbb; integers and floats read back exactly.
-- Tensors must be finite: NaN or inf (a diverged run) is refused, naming
-- the tensor, and nothing is written.
-- @raise checkpoint.write: NAME holds NaN at element ...: only finite values are saved
-- @usage
--   local path = os.tmpname()
--   bbb.checkpoint.write(path, { w = bbb.ones(2, 2) }, { note = "any JSON-able table" })
--   local tensors, meta = bbb.checkpoint.read(path)
--   os.remove(path)
--   assert(tensors.w:sum():item() == 4 and meta.note)
local function write_raw(path, tensors, meta, what)
  if type(path) ~= "string" then fail("checkpoint.write: path must be a string, got %s", type(path)) end
  if type(tensors) ~= "table" then
    fail("checkpoint.write: tensors must be a table of name = tensor, got %s", type(tensors))
  end
  local names = sorted_names(tensors, what or "checkpoint.write")
  local header, list, offset = {}, {}, 0
  for i, name in ipairs(names) do
    local t = tensors[name]
    local bytes = 4 * t:numel()
    local shape = t:dim() > 0 and t:size() or json.empty_array
    header[name] = { dtype = "F32", shape = shape, data_offsets = { offset, offset + bytes } }
    list[i] = t
    offset = offset + bytes
  end
  -- what the run's last bits depend on besides bbb: a replay pins these
  local env = core.environment()
  header.__metadata__ = { format = checkpoint.FORMAT, bbb = json.encode(meta or {}),
    openblas = env.openblas, openblas_core = env.core }
  local text = json.encode(header)
  -- padded with spaces so the data starts 8-byte aligned, as safetensors does
  text = text .. (" "):rep((8 - #text % 8) % 8)
  ccall(core.st_save, path, text, list)
end

local function check_int(v, what)
  local i = type(v) == "number" and math.tointeger(v)
  if not i or i < 0 then fail("%s must be a non-negative integer, got %s", what, tostring(v)) end
  return i
end

-- Checks one header entry; returns its shape and byte range.
local function check_entry(path, name, e, data_len)
  local where = ("load: '%s': tensor %s"):format(path, name)
  if type(e) ~= "table" then fail("%s: entry is a %s, not an object", where, type(e)) end
  if e.dtype ~= "F32" then
    fail("%s: dtype %s is not supported (bbb reads F32)", where, tostring(e.dtype))
  end
  local shape = e.shape
  if type(shape) ~= "table" or #shape > 6 or next(shape, #shape > 0 and #shape or nil) ~= nil then
    fail("%s: shape must be a list of at most 6 sizes", where)
  end
  local numel = 1
  for k = 1, #shape do
    shape[k] = check_int(shape[k], ("%s: shape[%d]"):format(where, k))
    numel = numel * shape[k]
    if numel > data_len then fail("%s: shape %s needs more data than the file holds", where,
      table.concat(shape, "x")) end
  end
  local off = e.data_offsets
  if type(off) ~= "table" or #off ~= 2 then
    fail("%s: data_offsets must be a list of two integers", where)
  end
  local b, en = check_int(off[1], where .. ": data_offsets[1]"), check_int(off[2], where .. ": data_offsets[2]")
  if b > en or en > data_len then
    fail("%s: data_offsets [%d, %d] lie outside the %d data bytes", where, b, en, data_len)
  end
  if en - b ~= 4 * numel then
    fail("%s: shape %s needs %d bytes but data_offsets give %d", where,
      #shape > 0 and table.concat(shape, "x") or "()", 4 * numel, en - b)
  end
  return shape, b, en
end

--- read(path) -> {name = tensor}, meta (the table given to write; {} for a
-- file written by another tool). Every offset, size and type is checked
-- before anything is allocated.
local function read_raw(path)
  if type(path) ~= "string" then fail("checkpoint.read: path must be a string, got %s", type(path)) end
  -- one descriptor for the whole read: a file renamed over path meanwhile
  -- cannot mix its tensors with this one's
  local reader <close> = ccall(core.st_open, path)
  local text, data_start, data_len = ccall(core.st_header, reader)
  local ok, header = pcall(json.decode, text, ("load: '%s': header"):format(path))
  if not ok then fail("%s", header) end
  if type(header) ~= "table" then fail("load: '%s': the header is not a JSON object", path) end
  local entries, count = {}, 0
  for name, e in pairs(header) do
    if name ~= "__metadata__" then
      count = count + 1
      if count > MAX_TENSORS then fail("load: '%s': more than %d tensors", path, MAX_TENSORS) end
      local shape, b, en = check_entry(path, name, e, data_len)
      entries[#entries + 1] = { name = name, shape = shape, b = b, e = en }
    end
  end
  table.sort(entries, function(x, y) return x.b < y.b or (x.b == y.b and x.e < y.e) end)
  for i = 2, #entries do
    if entries[i].b < entries[i - 1].e then
      fail("load: '%s': tensors %s and %s overlap", path, entries[i - 1].name, entries[i].name)
    end
  end
  local meta = {}
  local md = header.__metadata__
  if md ~= nil then
    if type(md) ~= "table" then fail("load: '%s': __metadata__ is not an object", path) end
    for k, v in pairs(md) do
      if type(v) ~= "string" then fail("load: '%s': __metadata__.%s is not a string", path, tostring(k)) end
    end
    if md.bbb then
      local ok2, m = pcall(json.decode, md.bbb, ("load: '%s': metadata"):format(path))
      if not ok2 then fail("%s", m) end
      if type(m) ~= "table" then fail("load: '%s': metadata is not an object", path) end
      meta = m
    end
  end
  local tensors = {}
  for _, e in ipairs(entries) do
    tensors[e.name] = ccall(core.st_tensor, reader, e.name, data_start, e.b, e.e, e.shape)
  end
  return tensors, meta
end

-- Parameters, optimizer state and generators as flat name -> tensor maps.
local function prefixed(dst, prefix, src)
  for k, v in pairs(src) do dst[prefix .. k] = v end
end

local function generator_state(g)
  local seed, counter = g:state()
  return { seed = ("%d"):format(seed), counter = ("%d"):format(counter) }
end

--- save(path, obj): obj is a module, or a table {model = net, optimizer =
-- opt, schedule = s, elbo = e, generators = {name = g}, state = {...},
-- args = {...}}. state and args are any JSON-able tables (the training
-- loop keeps its position there).
-- @usage
--   local net = bbb.nn.bayes_mlp({ 3, 4, 2 })
--   local opt = bbb.optim.Adam(net, { lr = 1e-3 })
--   local path = os.tmpname()
--   bbb.checkpoint.save(path, { model = net, optimizer = opt, state = { epoch = 3 } })
--   local again, info = bbb.checkpoint.load(path)
--   bbb.checkpoint.restore(info, { optimizer = bbb.optim.Adam(again, { lr = 1e-3 }) })
--   os.remove(path)
--   assert(info.meta.state.epoch == 3)
local function save_raw(path, obj)
  if type(obj) ~= "table" then fail("save: expects a module or a table, got %s", type(obj)) end
  if obj.forward then obj = { model = obj } end
  local tensors, meta = {}, { format_version = checkpoint.VERSION }
  if obj.model then
    local ok, cfg = pcall(obj.model.config, obj.model)
    if not ok then fail("save: %s", cfg) end
    meta.model = cfg
    prefixed(tensors, "model.", obj.model:state_dict())
  end
  if obj.optimizer then
    local st, ts = obj.optimizer:state_dict()
    meta.optimizer = st
    prefixed(tensors, "optimizer.", ts)
  end
  if obj.schedule then meta.schedule = { epoch = obj.schedule.epoch } end
  if obj.elbo then
    meta.elbo = { steps = obj.elbo.steps }
    prefixed(tensors, "elbo.", obj.elbo:state_dict())
  end
  if obj.generators then
    meta.generators = {}
    for name, g in pairs(obj.generators) do meta.generators[name] = generator_state(g) end
  end
  meta.state, meta.args = obj.state, obj.args
  for name, t in pairs(obj.tensors or {}) do tensors["extra." .. name] = t end
  write_raw(path, tensors, meta, "save")
end

local function split_prefix(tensors, prefix)
  local out, n = {}, #prefix
  for k, v in pairs(tensors) do
    if k:sub(1, n) == prefix then out[k:sub(n + 1)] = v end
  end
  return out
end

-- The weights a layer configuration asks for must be in the file: summed
-- over the Linear and BayesLinear layers, n_in * n_out is bounded by the
-- model tensors' elements before anything is built, so a hostile config
-- cannot allocate more than the file holds.
check_config_fits = function(path, config, model_tensors)
  local have = 0
  for _, t in pairs(model_tensors) do have = have + t:numel() end
  local need, seen = 0, 0
  local function walk(c, depth)
    if type(c) ~= "table" or depth > 64 then return end
    seen = seen + 1
    if seen > MAX_TENSORS then fail("load: '%s': the model configuration has more than %d layers", path, MAX_TENSORS) end
    local n_in = type(c.n_in) == "number" and math.tointeger(c.n_in)
    local n_out = type(c.n_out) == "number" and math.tointeger(c.n_out)
    if (c.type == "Linear" or c.type == "BayesLinear") and n_in and n_out and n_in > 0 and n_out > 0 then
      need = need + n_in * n_out
      if need > have or need < 0 then
        fail("load: '%s': the model configuration asks for more weights than the file's %d model values",
          path, have)
      end
    end
    if type(c.children) == "table" then
      for _, cc in ipairs(c.children) do walk(cc, depth + 1) end
    end
  end
  walk(config, 0)
end

--- load(path [, {generator = g, prior = p}]) -> model, info. The model is
-- rebuilt from its saved configuration with the saved parameters, in
-- evaluation mode; info = {meta, tensors = {group = {name = tensor}}} for
-- restore(). generator: what the model samples with (default: the
-- module's); prior: for a model saved with a prior written in Lua.
local function load_raw(path, opts)
  local tensors, meta = read_raw(path)
  if meta.format_version ~= nil and math.tointeger(meta.format_version) ~= checkpoint.VERSION then
    fail("load: '%s' is a checkpoint of format %s; this bbb reads format %d", path,
      tostring(meta.format_version), checkpoint.VERSION)
  end
  local info = { meta = meta, tensors = {
    model = split_prefix(tensors, "model."), optimizer = split_prefix(tensors, "optimizer."),
    elbo = split_prefix(tensors, "elbo."), extra = split_prefix(tensors, "extra."),
  } }
  local model
  if meta.model ~= nil then
    check_config_fits(path, meta.model, info.tensors.model)
    local ok, m = pcall(require("bbb.nn").build, meta.model, opts)
    if not ok then fail("load: '%s' does not describe a model bbb can build: %s", path, m) end
    local ok2, err = pcall(m.load_state_dict, m, info.tensors.model)
    if not ok2 then fail("load: '%s': %s", path, err) end
    model = m:evaluate()
  end
  return model, info
end

--- restore(info, {optimizer =, schedule =, elbo =, generators = {name = g}})
-- puts the saved training state back into live objects; every piece named
-- must be in the checkpoint.
local function restore_raw(info, into)
  local meta = info.meta
  if into.optimizer then
    if not meta.optimizer then fail("restore: the checkpoint holds no optimizer state") end
    into.optimizer:load_state_dict(meta.optimizer, info.tensors.optimizer)
  end
  if into.schedule then
    local e = meta.schedule and math.tointeger(meta.schedule.epoch)
    if not e then fail("restore: the checkpoint holds no schedule position") end
    into.schedule:set_epoch(e)
  end
  if into.elbo then
    local s = meta.elbo and math.tointeger(meta.elbo.steps)
    if not s then fail("restore: the checkpoint holds no ELBO state") end
    into.elbo.steps = s
    into.elbo:load_state_dict(info.tensors.elbo)
  end
  for name, g in pairs(into.generators or {}) do
    local st = meta.generators and meta.generators[name]
    local seed, counter = st and math.tointeger(tonumber(st.seed)), st and math.tointeger(tonumber(st.counter))
    if not (seed and counter) then fail("restore: the checkpoint holds no state for generator %s", name) end
    g:set_state(seed, counter)
  end
end

checkpoint.write = public(function(path, tensors, meta) write_raw(path, tensors, meta) end)
checkpoint.read = public(read_raw)
checkpoint.save = public(save_raw)
checkpoint.load = public(load_raw)
checkpoint.restore = public(restore_raw)

return checkpoint

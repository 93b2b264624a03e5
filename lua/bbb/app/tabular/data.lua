--- bbb.app.tabular.data: a user's table, read and made ready for a net.
-- Reading a CSV file or an R data set (and a file again as a saved model
-- reads it), splitting the rows, and the preprocessing whose statistics a
-- model keeps: scaling, imputation of missing numbers, a target kept as its
-- difference from an offset. It knows nothing of nets, so a model's part
-- (bbb.app.tabular.model) builds on it and never the other way round; what
-- takes a model here (read_for, in_model_order) reads only its prep.
local bbb = require "bbb"
local core = require "bbb.core"

local M = {}

local function exists(path)
  return core.sys.kind(path, true) ~= nil   -- without opening it: a FIFO would block
end

-- A table file to read must be a regular file: a FIFO blocks, a device
-- (/dev/zero) never ends.
local function check_regular(path)
  local kind = core.sys.kind(path, true)
  if kind and kind ~= "file" then error(("%s is a %s, not a file"):format(path, kind == "fifo" and "FIFO" or kind), 0) end
end

-- A reader's error without its position: the scripts show it to the person
-- who gave the file, for whom "tabular.lua:314:" means nothing.
local function quiet(fn, ...)
  local r = table.pack(pcall(fn, ...))
  if not r[1] then error((tostring(r[2]):gsub("^[^\n]-:%d+: ", "")), 0) end
  return table.unpack(r, 2, r.n)
end

--- read(spec, {target, task, ignore, drop_missing, delimiter, levels,
-- categorical}) -> data set. spec: a CSV file, or FOLDER:NAME for data set
-- NAME of an R package folder (data/r/MASS:Boston). task = "classification"
-- reads a numeric target as classes; categorical lists CSV columns read as
-- categories, numbers or not.
function M.read(spec, o)
  o = o or {}
  local folder, name = spec:match("^(.+):([%w%._]+)$")
  local cat = o.categorical and table.move(o.categorical, 1, #o.categorical, 1, {}) or nil
  if o.task == "classification" and o.target then
    cat = cat or {}
    cat[#cat + 1] = o.target
  end
  if folder and not exists(spec) then
    if o.categorical then
      error(("%s: an R data set says itself which columns are factors: name categorical columns of CSV "
        .. "files only"):format(spec), 0)
    end
    if cat and not (o.levels and o.levels[o.target]) then
      local probe = quiet(bbb.data.load_r, folder, name, { target = o.target, ignore = o.ignore, drop_missing = o.drop_missing, keep_missing = o.keep_missing })
      if not probe.target.categorical then error(("%s: the target '%s' is numeric; use it for regression"):format(spec, o.target), 0) end
      return probe
    end
    return quiet(bbb.data.load_r, folder, name, { target = o.target, ignore = o.ignore, drop_missing = o.drop_missing, keep_missing = o.keep_missing, levels = o.levels,
      unseen = o.unseen })
  end
  check_regular(spec)
  return quiet(bbb.data.read_csv, spec, { target = o.target, ignore = o.ignore, drop_missing = o.drop_missing,
    keep_missing = o.keep_missing, unseen = o.unseen,
    delimiter = o.delimiter, levels = o.levels, categorical = cat })
end

--- header(spec [, delimiter]) -> the column names of a CSV file or an R data set.
function M.header(spec, delimiter)
  local folder, name = spec:match("^(.+):([%w%._]+)$")
  local ds
  if folder and not exists(spec) then ds = quiet(bbb.data.load_r, folder, name, { drop_missing = true })
  else
    check_regular(spec)
    local f = io.open(spec, "rb")
    if not f then error(("cannot open %s"):format(spec), 0) end
    local line = f:read("L")
    f:close()
    -- the header line read as its own data row: its names, whatever the
    -- first row of data holds (an incomplete one is no reason to fail here)
    ds = quiet(bbb.data.read_csv, (line or "") .. (line and not line:find("\n$") and "\n" or "") .. (line or ""),
      { text = true, delimiter = delimiter })
  end
  local names = {}
  for j, c in ipairs(ds.columns) do names[j] = c.name end
  return names
end

--- read_for(model, spec, opts) -> the rows of a file as the model reads them:
-- its columns (a missing one is an error naming it), its levels (an unseen
-- category is an error naming it). The target is read when present.
function M.read_for(m, spec, o)
  local levels = {}
  for _, c in ipairs(m.prep.columns) do if c.categorical then levels[c.name] = c.levels end end
  local tname = m.prep.target.name
  if m.prep.target.categorical then levels[tname] = m.prep.classes end
  local header = M.header(spec, o.delimiter)
  local have, want, ignore = {}, {}, {}
  for _, h in ipairs(header) do have[h] = true end
  for _, c in ipairs(m.prep.columns) do
    want[c.name] = true
    if not have[c.name] then error(("column '%s' (used by the model) is not in %s"):format(c.name, spec), 0) end
  end
  for _, h in ipairs(header) do if not want[h] and h ~= tname then ignore[#ignore + 1] = h end end
  if not have[tname] then levels[tname] = nil end
  local ds = M.read(spec, { target = have[tname] and tname or nil, ignore = ignore, levels = levels,
    delimiter = o.delimiter, drop_missing = o.drop_missing, keep_missing = o.keep_missing, unseen = o.unseen,
    task = m.task })
  if m.task == "regression" and ds.y then M.centre_target(ds, m.prep.y_offset or 0) end
  if m.task == "regression" and ds.target and ds.target.categorical then
    error(("column '%s' holds text (%s, ...), and the model predicts numbers"):format(tname,
      tostring(ds.target.levels and ds.target.levels[1] or ds.classes and ds.classes[1])), 0)
  end
  ds.ignored = ignore
  return M.in_model_order(m, ds)
end

--- in_model_order(model, ds) -> ds with its feature columns in the order
-- the model was trained on, matched by name (a file may hold the columns in
-- any order); an error names a feature the model needs that ds lacks.
function M.in_model_order(m, ds)
  local at, idx, same = {}, {}, true
  for j, name in ipairs(ds.feature_names) do at[name] = j end
  local kind = {}
  for _, c in ipairs(ds.columns) do kind[c.name] = c end
  for j, name in ipairs(m.prep.feature_names) do
    if not at[name] then
      local col = name:match("^(.-)=") or name
      local c = kind[col]
      if c and c.categorical and not name:find("=", 1, true) then
        error(("column '%s' holds text now (%s, ...); the model was trained on its numbers"):format(col,
          tostring(c.levels and c.levels[1])), 0)
      elseif c and not c.categorical and name:find("=", 1, true) then
        error(("column '%s' holds numbers now; the model was trained on its categories"):format(col), 0)
      end
      error(("feature '%s' (used by the model) is not in the rows"):format(name), 0)
    end
    idx[j] = at[name]
    same = same and idx[j] == j
  end
  if same and #idx == #ds.feature_names then return ds end
  ds.x = ds.x:t():index_select(core.tensor(idx)):t():clone()
  ds.feature_names = m.prep.feature_names
  return ds
end

--- kept_columns(spec, names, delimiter) -> {{name =, values = {text per row}}}:
-- columns of the file as written (numbers too), a missing cell as "", to
-- copy beside the predictions so each row can be joined back.
function M.kept_columns(spec, names, delimiter)
  local header, wanted = M.header(spec, delimiter), {}
  for _, n in ipairs(names) do wanted[n] = true end
  local ignore, have = {}, {}
  for _, h in ipairs(header) do
    have[h] = true
    if not wanted[h] then ignore[#ignore + 1] = h end
  end
  for _, n in ipairs(names) do
    if not have[n] then error(("column '%s' is not in %s"):format(n, spec), 0) end
  end
  local folder, name = spec:match("^(.+):([%w%._]+)$")
  local ds
  if folder and not exists(spec) then
    ds = quiet(bbb.data.load_r, folder, name, { ignore = ignore, keep_missing = true })
  else
    -- ids are as many as the rows: no cap on their distinct values
    ds = quiet(bbb.data.read_csv, spec, { ignore = ignore, categorical = names, keep_missing = true, delimiter = delimiter,
      max_levels = 1000000 })
  end
  local x, out = ds.x:totable(), {}
  for _, c in ipairs(ds.columns) do
    local values = {}
    for i = 1, ds.n do
      if c.categorical then
        local v = ""
        for k = 1, c.width do if x[i][c.first + k - 1] == 1 then v = c.levels[k] end end
        values[i] = v
      else
        local v = x[i][c.first]
        values[i] = v == v and v or ""
      end
    end
    out[#out + 1] = { name = c.name, values = values }
  end
  return out
end

--- split(n, {test = 0.1, val = 0.1}, generator) -> train, val, test index tensors
-- (val or test nil when its fraction is 0), from one random permutation.
function M.split(n, fr, gen)
  local perm = bbb.data.permutation(n, gen)
  local n_test = math.floor((fr.test or 0) * n + 0.5)
  local n_val = math.floor((fr.val or 0) * (n - n_test) + 0.5)
  if n - n_test - n_val < 2 then error(("only %d rows: too few to split off validation and test rows"):format(n), 0) end
  local function part(a, len) return len > 0 and perm:narrow(1, a, len) or nil end
  return part(n_test + n_val + 1, n - n_test - n_val), part(n_test + 1, n_val), part(1, n_test)
end

--- subset(ds, idx) -> the rows idx (a tensor of 1-based indices) of ds.
function M.subset(ds, idx)
  return { x = ds.x:index_select(idx), y = ds.y and ds.y:index_select(idx), n = idx:numel() }
end

--- write_split(path, parts, n [, left_out]) / read_split(path, n) -> train, val, test:
-- the row numbers (1-based, of the table as read) of each part, as JSON
-- {"rows": n, "train": [...], "validation": [...], "test": [...]}, so another
-- tool can be scored on the same rows. When left_out rows of the file were
-- not read (missing cells or target), the numbers count the rows kept, in
-- file order, and the file says so ("left_out").
function M.write_split(path, parts, n, left_out)
  local out = { rows = n, left_out = left_out and left_out > 0 and left_out or nil }
  for _, k in ipairs { "train", "validation", "test" } do
    local rows = parts[k] and parts[k]:totable() or {}
    for i, v in ipairs(rows) do rows[i] = math.tointeger(v) end
    out[k] = #rows > 0 and rows or require("bbb.json").empty_array
  end
  require("bbb.app.cli").write_file(path, require("bbb.json").encode(out) .. "\n")
end

function M.read_split(path, n)
  local f, err = io.open(path, "rb")
  if not f then error(("cannot read %s: %s"):format(path, err), 0) end
  local ok, s = pcall(require("bbb.json").decode, f:read("a"), path)
  f:close()
  if not ok or type(s) ~= "table" then error(("%s is not a split written by --save-split"):format(path), 0) end
  if s.rows ~= n then error(("%s splits %s rows, the table has %d"):format(path, tostring(s.rows), n), 0) end
  local seen, parts = {}, {}
  for _, k in ipairs { "train", "validation", "test" } do
    if type(s[k]) ~= "table" then error(("%s: no list of %s rows"):format(path, k), 0) end
    for j, v in ipairs(s[k]) do
      local i = math.tointeger(v)
      s[k][j] = i
      if not i or i < 1 or i > n or seen[i] then
        error(("%s: %s row %s is not a row of the table, or is in two parts"):format(path, k, tostring(v)), 0)
      end
      seen[i] = true
    end
    parts[k] = #s[k] > 0 and core.tensor(s[k]) or nil
  end
  if not parts.train then error(("%s: no training rows"):format(path), 0) end
  return parts.train, parts.validation, parts.test
end

--- scaler(x) -> mean, std: per-column lists (a constant column gets std 1).
function M.scaler(x)
  if x:dim() == 1 then x = x:reshape(-1, 1) end
  local mean = x:mean(1, true)
  local std = ((x - mean):square():mean(1, true)):sqrt():totable()[1]
  for j, s in ipairs(std) do if not (s > 1e-12) then std[j] = 1 end end
  return mean:totable()[1], std
end

local function row(list) return core.tensor(list):reshape(1, #list) end

--- scale(x, mean, std) -> (x - mean) / std, column by column.
function M.scale(x, mean, std) return (x - row(mean)) / row(std) end

--- impute_stats(x) -> {median, indicators}, what impute takes from the
-- training rows: each column's median fills its missing numbers, and a
-- column that had any gets an indicator feature (1: was missing).
function M.impute_stats(x)
  local rows, d = x:totable(), x:size(2)
  local median, indicators = {}, {}
  for j = 1, d do
    local vals, holes = {}, false
    for i = 1, #rows do
      local v = rows[i][j]
      if v ~= v then holes = true else vals[#vals + 1] = v end
    end
    table.sort(vals)
    median[j] = #vals > 0 and vals[(#vals + 1) // 2] or 0
    if holes then indicators[#indicators + 1] = j end
  end
  return { median = median, indicators = indicators }
end

--- impute(prep, x) -> x with each missing number (NaN) replaced by its
-- column's training median, and one indicator column appended per column
-- that had missing values in the training rows.
function M.impute(prep, x)
  local imp = prep.impute
  if not imp or x:size(1) == 0 then return x end
  local total = x:sum():item()
  if #imp.indicators == 0 and total == total then return x end
  local rows = x:totable()
  for _, r in ipairs(rows) do
    for _, j in ipairs(imp.indicators) do r[#r + 1] = r[j] ~= r[j] and 1 or 0 end
    for j = 1, #imp.median do if r[j] ~= r[j] then r[j] = imp.median[j] end end
  end
  return core.tensor(rows)
end

--- identifier_column(ds, declared) -> name, levels | nil: the first
-- categorical feature whose values are (nearly) all distinct, as a sample
-- name or a row number read as text is: as one-hot features it only lets a
-- net memorise rows. Columns in the list `declared` (--categorical) are
-- the user's choice and pass.
function M.identifier_column(ds, declared)
  local ok = {}
  for _, name in ipairs(declared or {}) do ok[name] = true end
  if ds.n < 20 then return nil end
  for _, c in ipairs(ds.columns) do
    if c.categorical and not ok[c.name] and c.levels and #c.levels >= 0.5 * ds.n then
      return c.name, #c.levels
    end
  end
  return nil
end

--- missing_cells(ds) -> numbers, categories, columns: the numeric cells
-- of ds.x read as missing (NaN, to be imputed), the categorical cells read
-- as no level (an all-zero one-hot block), and the columns holding either.
function M.missing_cells(ds)
  local rows, nums, cats, cols = ds.x:totable(), 0, 0, {}
  for _, c in ipairs(ds.columns) do
    for i = 1, #rows do
      local r, hole = rows[i], false
      if c.categorical then
        hole = true
        for j = c.first, c.first + c.width - 1 do if r[j] ~= 0 then hole = false end end
        if hole then cats = cats + 1 end
      elseif r[c.first] ~= r[c.first] then
        hole, nums = true, nums + 1
      end
      if hole then cols[c.name] = true end
    end
  end
  local n = 0
  for _ in pairs(cols) do n = n + 1 end
  return nums, cats, n
end

-- Float32 holds a number of this size in steps of this many units.
local function float_step(magnitude)
  return magnitude > 0 and 2.0 ^ (math.floor(math.log(magnitude, 2)) - 23) or 0
end

--- centre_target(ds [, offset]) -> ds with its numeric target less offset:
-- a float keeps 7 digits, so a target far from zero next to its spread
-- (1e8 +- 3: steps of 8) is kept as its difference from an offset, taken
-- in double from the values as read (ds.y_exact). With no offset given,
-- one is chosen (the rounded mean) only when float32's step at the
-- target's size is over 1% of its spread; ds.y_offset records it.
function M.centre_target(ds, offset)
  local y = ds.y_exact
  if not y or #y == 0 then return ds end
  if offset == nil then
    local n, sum, sq, big = 0, 0, 0, 0
    for _, v in ipairs(y) do
      if v == v then n, sum, big = n + 1, sum + v, math.max(big, math.abs(v)) end
    end
    if n < 2 then return ds end
    local mean = sum / n
    for _, v in ipairs(y) do if v == v then sq = sq + (v - mean) ^ 2 end end
    if float_step(big) <= 0.01 * math.sqrt(sq / (n - 1)) then return ds end
    offset = math.floor(mean + 0.5)
  end
  if offset == 0 then return ds end
  local c = {}
  for i, v in ipairs(y) do c[i] = v - offset end
  ds.y, ds.y_offset = core.tensor(c), offset
  return ds
end

--- unscorable_target(ds) -> nil, or what keeps ds's target from being
-- scored: rows without a value, or values no float holds.
function M.unscorable_target(ds)
  local missing, first, huge = 0, nil, nil
  for i, v in ipairs(ds.y:reshape(-1):totable()) do
    if v ~= v then missing, first = missing + 1, first or i
    elseif (v == math.huge or v == -math.huge) and not huge then huge = i end
  end
  if missing > 0 then
    return ("%d rows have no value of '%s' (the first is data row %d): fill them, or leave those rows out")
      :format(missing, ds.target.name, first)
  end
  if huge then
    return ("data row %d: the value of '%s' is beyond float32's range (about 3.4e38)"):format(huge, ds.target.name)
  end
end

--- drop_missing_target(ds) -> ds without the rows whose target is missing, and their count.
function M.drop_missing_target(ds)
  if not ds.y then return ds, 0 end
  local keep = {}
  for i, v in ipairs(ds.y:reshape(-1):totable()) do if v == v then keep[#keep + 1] = i end end
  if #keep == ds.n then return ds, 0 end
  if #keep == 0 then error(("every row's target '%s' is missing"):format(ds.target.name), 0) end
  local idx = core.tensor(keep)
  local out = {}
  for k, v in pairs(ds) do out[k] = v end
  out.x, out.y, out.n = ds.x:index_select(idx), ds.y:index_select(idx), #keep
  if ds.y_exact then
    out.y_exact = {}
    for i, k in ipairs(keep) do out.y_exact[i] = ds.y_exact[k] end
  end
  return out, ds.n - #keep
end

return M

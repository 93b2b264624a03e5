--- bbb.data.load_r: data sets of Debian's R packages (r-cran-*), read
-- without R by the bounds-checked reader of src/io/rdata.c: an .rda file
-- of the data set's name, or an installed package's lazy-load database
-- (data/Rdata.rdx + data/Rdata.rdb). The result has the shape of read_csv's.
local core = require "bbb.core"
local csv = require "bbb.data.csv"

local M = {}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The frame of data set `name` under folder (a package, its data/ folder,
-- or a folder of .rda files), and where it came from.
local function read_frame(folder, name)
  for _, dir in ipairs { folder, folder .. "/data" } do
    for _, ext in ipairs { ".rda", ".RData", ".rdata" } do
      local p = dir .. "/" .. name .. ext
      if exists(p) then return core.rdata_frame(p), p end
    end
    if exists(dir .. "/Rdata.rdx") and exists(dir .. "/Rdata.rdb") then
      return core.rdata_lazy(dir .. "/Rdata.rdx", dir .. "/Rdata.rdb", name), dir .. "/Rdata.rdb"
    end
  end
  error(("no %s.rda nor lazy-load database (Rdata.rdx, Rdata.rdb) in %s or %s/data (run scripts/bootstrap)")
    :format(name, folder, folder), 0)
end

local function set_of(list, what, frame)
  local s, known = {}, {}
  for _, c in ipairs(frame.columns) do known[c.name] = true end
  if type(list) == "string" then list = { list } end
  for _, v in ipairs(list or {}) do
    if not known[v] then error(("%s column '%s' is not in the data set"):format(what, tostring(v)), 0) end
    s[v] = true
  end
  return s
end

local FLOAT_MAX = 3.4028234663852886e38

--- load_r(folder, name, {target = column, ignore = {columns}, drop_missing = false,
--         keep_missing = false, levels = {column = {levels}}, unseen = "error"})
-- -> {x, y, n, columns, feature_names, target, classes, n_dropped, source}
-- as read_csv: numeric and integer columns as they are, factors and strings
-- one-hot (their levels kept), a factor target as labels 1..L. A missing
-- value (NA) is an error naming its row and column unless drop_missing or
-- keep_missing (as read_csv's).
--   bbb.data.load_r("data/r/modeldata", "concrete")
--   bbb.data.load_r("data/r/MASS", "Boston", {target = "medv"})
function M.load_r(folder, name, opts)
  opts = opts or {}
  if type(folder) ~= "string" then
    error(("bbb.data.load_r: argument 1 (folder): expected a string, got %s"):format(type(folder)), 2)
  end
  if type(name) ~= "string" or name == "" then
    error(("bbb.data.load_r: argument 2 (name): expected a data set name, got %s"):format(tostring(name)), 2)
  end
  if type(opts) ~= "table" then
    error(("bbb.data.load_r: argument 3 (opts): expected a table, got %s"):format(type(opts)), 2)
  end
  local ok, res = pcall(function()
    local frame, source = read_frame(folder, name)
    local ignore = set_of(opts.ignore, "ignored", frame)
    local tset = set_of(opts.target, "target", frame)
    local rows = frame.codes:totable()
    local keep, cols = {}, {}
    local target
    for j, c in ipairs(frame.columns) do
      local col = { name = c.name, categorical = not c.numeric, levels = c.levels, j = j }
      if tset[c.name] then target = col elseif not ignore[c.name] then keep[#keep + 1] = j; cols[#cols + 1] = col end
    end
    local flat, y, n, dropped = {}, {}, 0, 0
    local check = { table.unpack(keep) }
    if target then check[#check + 1] = target.j end
    for i, row in ipairs(rows) do
      local missing
      for _, j in ipairs(check) do
        local v = row[j]
        if v ~= v or (not frame.columns[j].numeric and v == 0) then missing = j; break end
      end
      if opts.keep_missing then missing = nil end
      if missing and not opts.drop_missing then
        error(("row %d, column %d ('%s'): missing value (NA); set drop_missing to drop such rows")
          :format(i, missing, frame.columns[missing].name), 0)
      end
      for _, j in ipairs(check) do   -- a double no float holds would turn into inf
        local v = row[j]
        if frame.columns[j].numeric and v == v and math.abs(v) > FLOAT_MAX then
          error(("row %d, column %d ('%s'): %s is beyond float32's range (about 3.4e38)")
            :format(i, j, frame.columns[j].name, tostring(v)), 0)
        end
      end
      if missing then
        dropped = dropped + 1
      else
        n = n + 1
        for _, j in ipairs(keep) do flat[#flat + 1] = row[j] end
        if target then y[n] = row[target.j] end
      end
    end
    if n == 0 then error(("every row has a missing value (%d dropped)"):format(dropped), 0) end
    local t = { x = core.tensor(flat):reshape(n, #keep), columns = cols, n_rows = n, n_dropped = dropped }
    if target then t.y, t.target, t.y_exact = core.tensor(y), target, target.categorical == false and y or nil end
    local ds = csv.build(t, opts.levels or {}, "bbb.data.load_r", opts.unseen)
    ds.source, ds.name = source, name
    return ds
  end)
  if not ok then error("bbb.data.load_r: " .. tostring(res):gsub("^rdata: ", ""), 2) end
  return res
end

return M

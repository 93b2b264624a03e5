--- bbb.data.read_csv: a table of your own from a CSV file.
-- The text is parsed in C by Debian's libcsv (RFC 4180 quoting); numeric
-- columns stay as they are, categorical ones become one-hot blocks with their
-- levels kept, so a model trained on them can read new rows the same way.
local core = require "bbb.core"

local M = {}

local KEYS = {
  delimiter = true, quote = true, header = true, drop_missing = true, keep_missing = true, max_levels = true, unseen = true,
  na = true, categorical = true, ignore = true, target = true, levels = true, text = true,
}

-- (L + 1, L): row k is the one-hot vector of level k, row L + 1 all zeros
-- (a missing value, or with unseen = "ignore" a level never seen).
local function identity(L)
  local flat = {}
  for i = 1, (L + 1) * L do flat[i] = 0 end
  for k = 1, L do flat[(k - 1) * L + k] = 1 end
  return core.tensor(flat):reshape(L + 1, L)
end

-- A missing category: NaN from read_csv's keep_missing, 0 from R's NA.
local function is_missing(v) return v ~= v or v == 0 end

-- The first row (1-based) where codes equal code.
local function first_row(codes, code)
  for i, v in ipairs(codes) do
    if v == code then return i end
  end
end

-- Codes of a column read now, mapped onto the levels a model was trained
-- with; a missing value becomes #want + 1. A level never seen then is an
-- error naming it, its row and column, or with unseen = "ignore" becomes
-- #want + 1 too, counted in unseen_count[name].
local function remap(codes, got, want, name, what, unseen, unseen_count)
  local index = {}
  for k, l in ipairs(want) do index[l] = k end
  local map, identical = {}, #got == #want
  for k, l in ipairs(got) do
    map[k] = index[l]
    if map[k] ~= k then identical = false end
  end
  if identical and codes:numel() > 0 then
    -- nothing to map unless a value is missing (NaN or 0)
    local sum, low = codes:sum():item(), -(-codes):max():item()
    if sum == sum and low >= 1 then return codes end
  end
  local list = codes:totable()
  for i, v in ipairs(list) do
    local m = map[v]
    if is_missing(v) then
      m = #want + 1
    elseif not m and unseen == "ignore" then
      m = #want + 1
      unseen_count[name] = (unseen_count[name] or 0) + 1
    end
    if not m then
      error(("%s: column '%s': category '%s' (row %d) was never seen in training (known: %s)")
        :format(what, name, got[v], first_row(list, v), table.concat(want, ", ")), 0)
    end
    list[i] = m
  end
  return core.tensor(list)
end

-- A categorical target's labels, a missing one as NaN (a row to drop).
local function target_labels(y, got, want, name, what)
  local codes = remap(y, got, want, name, what):totable()
  for i, v in ipairs(codes) do if v == #want + 1 then codes[i] = 0 / 0 end end
  return core.tensor(codes)
end

--- build(t, levels, what [, unseen]) -> a data set from a raw table t = {x = (n, k)
-- values and category codes, columns = {{name =, categorical =, levels =}}, n_rows =,
-- n_dropped =, y =, target =}: the shape read_csv and load_r share. A missing
-- category is a row of zeros in its one-hot block; unseen = "ignore" reads a
-- level outside `levels` so too (counted in ds.unseen).
function M.build(t, levels, what, unseen)
  local unseen_count = {}
  local n = t.n_rows
  local pieces, columns, names, all_numeric = {}, {}, {}, true
  for _, c in ipairs(t.columns) do
    if c.categorical or levels[c.name] then all_numeric = false end
  end
  local width = 0
  for j, c in ipairs(t.columns) do
    local col = { name = c.name, categorical = c.categorical, levels = c.levels, first = width + 1 }
    if levels[c.name] and not c.categorical then col.categorical = true end
    if col.categorical then
      local want = levels[c.name] or c.levels
      local codes = t.x:narrow(2, j, 1):reshape(n)
      codes = remap(codes, c.levels, want, c.name, what, unseen, unseen_count)
      col.levels = want
      col.width = #want
      pieces[#pieces + 1] = identity(#want):index_select(codes)
      for _, l in ipairs(want) do names[#names + 1] = c.name .. "=" .. l end
    else
      col.levels = nil
      col.width = 1
      if not all_numeric then pieces[#pieces + 1] = t.x:narrow(2, j, 1) end   -- a copy
      names[#names + 1] = c.name
    end
    width = width + col.width
    columns[j] = col
  end
  local x
  if all_numeric or #pieces == 0 then x = t.x
  elseif #pieces == 1 then x = pieces[1]
  else x = core.cat(pieces, 2) end
  local ds = { x = x, n = n, n_dropped = t.n_dropped, columns = columns, feature_names = names, unseen = unseen_count }
  if t.target then
    local tg = t.target
    ds.target = { name = tg.name, categorical = tg.categorical }
    if tg.categorical then
      local want = levels[tg.name] or tg.levels
      ds.y = target_labels(t.y, tg.levels, want, tg.name, what)
      ds.target.levels, ds.classes = want, want
    else
      ds.y, ds.y_exact = t.y, t.y_exact
    end
  end
  return ds
end

--- read_csv(path, {delimiter = ",", quote = '"', header = true, target = "y",
--              categorical = {names}, ignore = {names}, na = {"", "NA", "N/A", "?"},
--              drop_missing = false, keep_missing = false, max_levels = 1000,
--              levels = {column = {levels}}, unseen = "error", text = false})
-- -> {x = (n, width) features, y = (n) target or nil, n = rows, n_dropped =,
--     y_exact = a numeric target as a Lua array of the doubles read,
--     columns = {{name =, categorical =, levels =, first = column of x, width =}},
--     feature_names = {"age", "colour=red", ...}, target = {name =, categorical =, levels =},
--     classes = the target's levels when it is categorical}
-- A categorical target gives labels 1..L. `levels` imposes the levels of a
-- trained model (an unseen one is an error); `text = true` reads path as the
-- CSV text itself. A missing value is an error naming its row and column
-- unless drop_missing (the row is left out) or keep_missing (a number reads
-- as NaN, a category as zeros in its block, a categorical target as NaN).
-- unseen = "ignore" reads a level outside `levels` as zeros too, counted per
-- column in ds.unseen.
-- @usage
--   local ds = bbb.data.read_csv("x,colour,y\n1,red,0.5\n2,blue,1.5\n", { target = "y", text = true })
--   assert(ds.n == 2 and ds.x:size(2) == 3)   -- x and colour one-hot (red, blue)
function M.read_csv(path, opts)
  opts = opts or {}
  if type(path) ~= "string" then
    error(("bbb.data.read_csv: argument 1 (path): expected a string, got %s"):format(type(path)), 2)
  end
  if type(opts) ~= "table" then
    error(("bbb.data.read_csv: argument 2 (opts): expected a table, got %s"):format(type(opts)), 2)
  end
  for k in pairs(opts) do
    if not KEYS[k] then error(("bbb.data.read_csv: argument 2 (opts): unknown option '%s'"):format(tostring(k)), 2) end
  end
  local levels = opts.levels or {}
  if type(levels) ~= "table" then
    error("bbb.data.read_csv: argument 2 (opts): levels must be a table {column = {levels}}", 2)
  end
  local copt = {}
  for k, v in pairs(opts) do
    if k ~= "levels" and k ~= "text" and k ~= "unseen" then copt[k] = v end
  end
  -- columns a model knows as categorical are read as such whatever they hold
  local cat = {}
  for _, c in ipairs(type(opts.categorical) == "table" and opts.categorical or { opts.categorical }) do cat[#cat + 1] = c end
  for name in pairs(levels) do cat[#cat + 1] = name end
  copt.categorical = cat
  copt.max_levels = opts.max_levels or 1000
  local ok, t = pcall(opts.text and core.read_csv_string or core.read_csv, path, copt)
  if not ok then error("bbb.data.read_csv: " .. tostring(t):gsub("^bbb%.read_csv[_a-z]*: ", ""):gsub("^read_csv: ", ""), 2) end
  local ok2, res = pcall(M.build, t, levels, "bbb.data.read_csv", opts.unseen)
  if not ok2 then error(res, 2) end
  return res
end

return M

--- The UCI Mushroom table (8,124 mushrooms, 22 categorical attributes and
-- the class edible / poisonous), read from the R data set `Mushroom` of the
-- Debian package r-cran-cba (scripts/bootstrap puts it in data/mushroom/).
-- The features are one-hot, one column per level of each attribute, and a
-- missing value (NA: stalk-root in 2,480 rows) is a level of its own.
local core = require "bbb.core"

local M = {}

local DEFAULT = "data/mushroom/Mushroom.rda"
-- The repository root (this file lives in <root>/lua/bbb/data/), so scripts run
-- from elsewhere still find data/.
local REPO_ROOT = (debug.getinfo(1, "S").source:match("^@(.*)/lua/bbb/data/mushroom%.lua$"))

-- stat, not open: opening a FIFO to see that it exists would block (the
-- reader then refuses anything but a regular file with its own message)
local function exists(path)
  return core.path_kind(path) ~= nil
end

local function find(opts)
  if opts.path ~= nil then
    if type(opts.path) ~= "string" then
      error(("load_mushroom: path must be a string, got %s"):format(type(opts.path)), 4)
    end
    if not exists(opts.path) then
      error(("load_mushroom: %s not found (run scripts/bootstrap)"):format(opts.path), 4)
    end
    return opts.path
  end
  for _, p in ipairs { DEFAULT, REPO_ROOT and (REPO_ROOT .. "/" .. DEFAULT) } do
    if exists(p) then return p end
  end
  error(("load_mushroom: %s not found (run scripts/bootstrap)"):format(DEFAULT), 4)
end

--- load_mushroom{path = "data/mushroom/Mushroom.rda"} ->
-- {x = (8124, 117) one-hot tensor, y = (8124) labels (1 edible, 2 poisonous),
--  edible = {true/false per row}, n = 8124, classes = {"edible", "poisonous"},
--  attributes = {22 names}, levels = {per attribute: its levels, plus "NA" when
--  it has missing values}, feature_names = {"cap-shape=bell", ...}}
function M.load(opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error(("load_mushroom: options must be a table, got %s"):format(type(opts)), 2)
  end
  local path = find(opts)
  local ok, f = pcall(core.rdata_frame, path)
  if not ok then error("load_mushroom: " .. tostring(f), 2) end
  local class_col
  for j, c in ipairs(f.columns) do
    if c.name == "class" then class_col = j end
  end
  if not class_col then error(("load_mushroom: %s has no column 'class'"):format(path), 2) end
  local cl = f.columns[class_col].levels
  if #cl ~= 2 or cl[1] ~= "edible" or cl[2] ~= "poisonous" then
    error(("load_mushroom: %s: class levels are {%s}, expected {edible, poisonous}")
      :format(path, table.concat(cl, ", ")), 2)
  end
  local codes = f.codes:totable()
  local n = f.n_rows
  -- columns of the one-hot block: offset of each attribute, NA level if needed
  local attrs, levels, names, offset, width = {}, {}, {}, {}, 0
  for j, c in ipairs(f.columns) do
    if j ~= class_col then
      local has_na = false
      for i = 1, n do
        if codes[i][j] == 0 then has_na = true; break end
      end
      local lv = table.move(c.levels, 1, #c.levels, 1, {})
      if has_na then lv[#lv + 1] = "NA" end
      attrs[#attrs + 1], levels[#levels + 1] = c.name, lv
      offset[j] = width
      for _, l in ipairs(lv) do names[#names + 1] = c.name .. "=" .. l end
      width = width + #lv
    end
  end
  local flat, y, edible = {}, {}, {}
  for i = 1, n * width do flat[i] = 0 end
  for i = 1, n do
    local row = codes[i]
    for j, c in ipairs(f.columns) do
      if j ~= class_col then
        local k = row[j] == 0 and #c.levels + 1 or row[j]
        flat[(i - 1) * width + offset[j] + k] = 1
      end
    end
    y[i] = row[class_col]
    if y[i] == 0 then error(("load_mushroom: %s: row %d has no class"):format(path, i), 2) end
    edible[i] = y[i] == 1
  end
  return {
    x = core.tensor(flat):reshape(n, width), y = core.tensor(y), edible = edible, n = n,
    classes = { "edible", "poisonous" }, attributes = attrs, levels = levels, feature_names = names,
  }
end

return M

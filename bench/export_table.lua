--- Writes a table as bbb reads it (categories one-hot, target as a number or
-- a class 1..C) to a CSV of numbers, for the scikit-learn reference in
-- bench/tabular_compare.py: both sides then see the same features.
--   build/bbblua bench/export_table.lua SPEC TARGET OUT.csv [IGNORED_COLUMN ...]
local tab = require "bbb.app.tabular"
local spec, target, out = arg[1], arg[2], arg[3]
assert(spec and target and out, "usage: export_table.lua SPEC TARGET OUT.csv [IGNORED_COLUMN ...]")
local ignore = { table.unpack(arg, 4) }
-- as fit.lua reads it: missing cells kept (a number as NaN, a category as
-- no level), rows without the target left out, so the row numbers of a
-- saved split name the same rows here
local ds = tab.drop_missing_target(tab.read(spec, { target = target, ignore = ignore, keep_missing = true }))
local x, y = ds.x:totable(), ds.y:reshape(-1):totable()
local lines = { {} }
for j = 1, #x[1] do lines[1][j] = "f" .. j end
lines[1][#x[1] + 1] = "y"
for i = 1, ds.n do
  local row = {}
  for j, v in ipairs(x[i]) do row[j] = v ~= v and "nan" or ("%.17g"):format(v) end
  row[#row + 1] = ("%.17g"):format(y[i])
  lines[i + 1] = row
end
for i, r in ipairs(lines) do lines[i] = table.concat(r, ",") end
require("bbb.app.cli").write_file(out, table.concat(lines, "\n") .. "\n")
print(("%s: %d rows x %d features, %s"):format(out, ds.n, #x[1], ds.target.categorical and (#ds.classes .. " classes") or "regression"))

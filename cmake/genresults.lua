--- genresults: doc/results.md, one row per result, from doc/results/*.json
-- and doc/results/index.json (what to show of each file: a label, the
-- figures by their path in the file (or in its part `within`; of a CSV,
-- the mean of a column over the rows that match, or the paired interval of
-- a column between two kinds of row), the
-- reference, the experiment and set of doc/results/protocol.json, and the
-- command, commit or date when the file lacks them). Run by bbblua:
--   build/bbblua cmake/genresults.lua doc/results.md [--check]
-- Loaded by dofile (the specs), it runs nothing and returns generate.
local json = require "bbb.json"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- The value at path in t: keys, list positions, or {field = value} to pick
-- the first row of a list whose fields match.
local function at(t, path, where)
  for _, step in ipairs(path) do
    if type(step) == "table" then
      local found
      for _, row in ipairs(t) do
        local ok = true
        for k, v in pairs(step) do if row[k] ~= v then ok = false end end
        if ok then found = row; break end
      end
      t = found
    else
      t = type(t) == "table" and t[step] or nil
    end
    if t == nil then error(("genresults: %s has nothing at %s"):format(where, json.encode(path)), 0) end
  end
  return t
end

-- A CSV result (comment lines "# ...", a header, rows of numbers and
-- words) as {rows = {{column = value}}}.
local function read_csv(text)
  local rows, header = {}, nil
  for line in text:gmatch("[^\n]+") do
    if not line:match("^#") then
      local cells = {}
      for c in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = tonumber(c) or c end
      if not header then header = cells
      else
        local row = {}
        for i, name in ipairs(header) do row[name] = cells[i] end
        rows[#rows + 1] = row
      end
    end
  end
  return { rows = rows }
end

-- Whether a CSV row matches every field of where.
local function matches(row, where)
  for k, v in pairs(where) do if row[k] ~= v then return false end end
  return true
end

-- The mean of column over the rows that match every field of where.
local function mean_of(r, where, column, file)
  local sum, n = 0, 0
  for _, row in ipairs(r.rows or {}) do
    if matches(row, where) and type(row[column]) == "number" then sum, n = sum + row[column], n + 1 end
  end
  if n == 0 then error(("genresults: %s has no rows %s with a number in %s"):format(file, json.encode(where), column), 0) end
  return sum / n
end

-- The first line of a shell command's output, or nil.
local function sh1(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  local s = p:read("l")
  p:close()
  return s ~= "" and s or nil
end

-- The date of a result: its own, its commit's, or its file's last commit's.
local function date_of(root, e, r, file)
  local d = e.date or (type(r.date) == "string" and r.date)
  if d then return d:sub(1, 10) end
  local c = r.commit
  if type(c) == "string" and c:match("^%x+$") then
    d = sh1(("git -C %q show -s --format=%%cs %s"):format(root, c))
  end
  return d or sh1(("git -C %q log -1 --format=%%cs -- %q"):format(root, "doc/results/" .. file)) or "—"
end

-- A cell: no line breaks, no bars.
local function cell(s) return (tostring(s):gsub("\n", " "):gsub("|", "\\|")) end

-- The set a result was computed on: the file's own word, else the index's;
-- it must be a set the protocol declares for the experiment.
local function set_of(protocol, e, r)
  local set = type(r.set) == "string" and r.set or e.set
  local exp = protocol.experiments[e.experiment or ""]
  if not exp then
    error(("genresults: %s names experiment %s, which doc/results/protocol.json does not declare")
      :format(e.file, tostring(e.experiment)), 0)
  end
  if not (set and exp[set]) then
    error(("genresults: %s names set %s, which protocol.json does not declare for %s")
      :format(e.file, tostring(set), e.experiment), 0)
  end
  if e.set and r.set and e.set ~= r.set then
    error(("genresults: index.json says %s was computed on the %s set, the file says %s"):format(e.file, e.set, r.set), 0)
  end
  return set
end

-- The paired interval of o.metric between methods a and b over the runs
-- of one table of a compare file: bbb.stats' corrected resampled t, since
-- the splits are repeated random splits of one table.
local function paired_cell(r, o, file)
  local stats = require "bbb.stats"
  local t = at(r, { "tables", o.table }, file)
  local a, b, n_train, n_test = {}, {}, 0, 0
  for i, run in ipairs(t.runs) do
    a[i] = at(run, { o.a, o.metric }, file) * (o.scale or 1)
    b[i] = at(run, { o.b, o.metric }, file) * (o.scale or 1)
    n_train = n_train + run._rows.train + run._rows.validation
    n_test = n_test + run._rows.test
  end
  local d = stats.paired(a, b, { method = "corrected", n_train = n_train // #a, n_test = n_test // #a })
  return stats.format(d, o.digits or 3)
end

-- A method's metric averaged over the shifted steps (every amount but 0)
-- of one seed of a shift.lua result: the seed's headline.
local function seed_headline(seed, kind, method, metric, file)
  local total, n = 0, 0
  for amount, m in pairs(at(seed, { kind, method }, file)) do
    if amount ~= "0" then total, n = total + m[metric], n + 1 end
  end
  return total / n
end

-- The paired interval over the seeds of a shift.lua result of o.metric
-- between methods a and b (o.kind: rotate or translate): bbb.stats' t, the
-- seeds being independent repeats.
local function paired_seeds_cell(r, o, file)
  local stats = require "bbb.stats"
  local a, b = {}, {}
  for i, s in ipairs(at(r, { "seeds" }, file)) do
    local seed = at(r, { "per_seed", tostring(math.tointeger(s) or s) }, file)
    a[i] = seed_headline(seed, o.kind, o.a, o.metric, file)
    b[i] = seed_headline(seed, o.kind, o.b, o.metric, file)
  end
  return stats.format(stats.paired(a, b, { method = "t" }), o.digits or 3)
end

-- The rows of a CSV result that match every field of where, by their
-- column key (a key twice is an error: the pairing would be ambiguous).
local function rows_by(r, where, key, file)
  local out = {}
  for _, row in ipairs(r.rows or {}) do
    if matches(row, where) then
      if out[row[key]] then error(("genresults: %s has two rows %s with %s %s"):format(file, json.encode(where),
        key, tostring(row[key])), 0) end
      out[row[key]] = row
    end
  end
  return out
end

-- The paired interval of o.column of a CSV result between the rows that
-- match o.a and those that match o.b, paired on the column o.by (a seed):
-- bbb.stats' t, the seeds being independent repeats. Every key of a needs
-- its b.
local function paired_rows_cell(r, o, file)
  local stats = require "bbb.stats"
  local ra, rb = rows_by(r, o.a, o.by, file), rows_by(r, o.b, o.by, file)
  local keys = {}
  for k in pairs(ra) do keys[#keys + 1] = k end
  table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
  local a, b = {}, {}
  for i, k in ipairs(keys) do
    if not rb[k] then error(("genresults: %s has no row %s for %s %s"):format(file, json.encode(o.b), o.by,
      tostring(k)), 0) end
    a[i], b[i] = ra[k][o.column], rb[k][o.column]
  end
  if #a < 2 then error(("genresults: %s pairs %d row(s) of %s: at least 2 are needed"):format(file, #a,
    json.encode(o.a)), 0) end
  return stats.format(stats.paired(a, b, { method = "t" }), o.digits or 3)
end

-- The paired interval of two equal-length lists of numbers at the paths
-- o.a and o.b of a JSON result (one figure per test row, say).
local function paired_lists_cell(r, o, file)
  local a, b = at(r, o.a, file), at(r, o.b, file)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b or #a < 2 then
    error(("genresults: %s: %s and %s must be lists of one length, at least 2"):format(file, json.encode(o.a),
      json.encode(o.b)), 0)
  end
  local stats = require "bbb.stats"
  return stats.format(stats.paired(a, b, { method = "t" }), o.digits or 3)
end

local function row(root, e, protocol)
  local text = read(root .. "/doc/results/" .. e.file)
  local r = e.file:match("%.csv$") and read_csv(text) or json.decode(text, e.file)
  if e.within then r = at(r, e.within, e.file) end   -- a run recorded inside the file
  local set = set_of(protocol, e, r)
  local ours = {}
  for _, o in ipairs(e.ours) do
    local v = o.paired and paired_cell(r, o.paired, e.file)
      or o.paired_seeds and paired_seeds_cell(r, o.paired_seeds, e.file)
      or o.paired_rows and paired_rows_cell(r, o.paired_rows, e.file)
      or o.paired_lists and paired_lists_cell(r, o.paired_lists, e.file)
      or o.mean_of and mean_of(r, o.mean_of, o.column, e.file) or at(r, o.path, e.file)
    if type(v) == "number" then v = (o.fmt or "%g"):format(v * (o.scale or 1)) end
    ours[#ours + 1] = tostring(v)
  end
  local command = e.command or r.command or "—"
  local commit = e.commit or r.commit or "—"
  return ("| %s | %s | %s | %s | `%s` | %s | %s | [%s](results/%s) |"):format(cell(e.label), table.concat(ours, " / "),
    cell(e.reference), set, cell(command), cell(commit), date_of(root, e, r, e.file), e.file, e.file)
end

--- generate(root) -> the text of doc/results.md for the repository at root.
local function generate(root)
  local index = json.decode(read(root .. "/doc/results/index.json"), "doc/results/index.json")
  local protocol = json.decode(read(root .. "/doc/results/protocol.json"), "doc/results/protocol.json")
  local out = { "# Results", "",
    "<!-- generated by cmake/genresults.lua from doc/results/: do not edit -->", "",
    "What the runs reach here, each figure read from its result file in",
    "[results/](results/), beside the reference it is measured against (the",
    "paper, Blundell et al. 2015; a seed document: one of the five write-ups",
    "the project started from; or a peer method run the same way). How each",
    "was reached is in the research logs, [notebook/](notebook/).",
    "The set column says what the numbers were computed on, as",
    "[results/protocol.json](results/protocol.json) declares it: `tuning`, data",
    "some default or recipe was chosen or developed on (read such a row as a",
    "development figure, not as evidence), or `report`, data no choice has",
    "touched. A comparison cell `m [lo, hi]` is the mean paired difference",
    "with its 95% interval (bbb.stats, the corrected resampled t over splits).",
    "Regenerate after adding a result (and its line in `doc/results/index.json`):", "",
    "```sh", "build/bbblua cmake/genresults.lua doc/results.md", "```", "",
    "| result | ours | the reference | set | command | commit | date | file |",
    "|---|---|---|---|---|---|---|---|" }
  for _, e in ipairs(index.results) do out[#out + 1] = row(root, e, protocol) end
  return table.concat(out, "\n") .. "\n"
end

local M = { generate = generate }
if not (arg and arg[0] and arg[0]:match("genresults%.lua$")) then return M end

local out_path = assert(arg[1], "usage: bbblua cmake/genresults.lua doc/results.md [--check]")
local root = (arg[0]:match("^(.*)/cmake/genresults%.lua$")) or "."
local ok, text = pcall(generate, root)
if not ok then io.stderr:write(tostring(text), "\n"); os.exit(1) end
if arg[2] == "--check" then
  local f = io.open(out_path, "rb")
  local old = f and f:read("a")
  if f then f:close() end
  if old ~= text then io.stderr:write("genresults.lua: ", out_path, " differs: regenerate\n"); os.exit(1) end
  print("genresults.lua: " .. out_path .. " matches")
else
  assert(require("bbb.core").sys.write_file(out_path, text))
  print("genresults.lua: wrote " .. out_path)
end

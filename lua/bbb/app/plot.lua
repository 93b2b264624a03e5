--- bbb.app.plot: line plots, uncertainty bands and histograms through gnuplot.
-- Writes .png (pngcairo) and .svg files, or renders with the `dumb` terminal
-- to a string for the REPL. Data goes through a temporary file, never the
-- command line, so size is not an issue.
local core = require "bbb.core"
local sys = require "bbb.app.sys"

local plot = {}

local PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf" }

-- gnuplot's single-quoted strings have no escapes besides '' for a quote,
-- and no backquote or macro substitution. A control character (a newline
-- above all) would end the string and the command, so each becomes a space:
-- no text, whatever it holds, can start a new gnuplot command.
local function gp_quote(s)
  s = tostring(s):gsub("%c", " ")
  return "'" .. s:gsub("'", "''") .. "'"
end

-- Raised without a position; the public entry points add the caller's.
local function fail(what, msg, ...)
  error(("plot.%s: " .. msg):format(what, ...), 0)
end

local function entry_point(fn)
  return function(opts)
    local ok, res = pcall(fn, opts)
    if not ok then error(res, 2) end
    return res
  end
end

local function to_list(v, what, field)
  if core.is_tensor(v) then return v:reshape(-1):totable() end
  if type(v) ~= "table" then
    fail(what, "%s must be a tensor or a Lua array, got %s", field, type(v))
  end
  for i = 1, #v do
    if type(v[i]) ~= "number" then
      fail(what, "%s[%d] is %s, not a number", field, i, type(v[i]))
    end
  end
  return v
end

local function is_finite(v)
  return v == v and v ~= math.huge and v ~= -math.huge
end

local function number_str(v)
  if not is_finite(v) then return "NaN" end   -- gnuplot leaves NaN points out
  return ("%.9g"):format(v)
end

-- One block per data set; gnuplot addresses them as `index k` (0-based).
-- Writes the data (or script) text through cli.write_file, which checks
-- every write and the close: a full disk must not plot half the data.
local function write_text(path, parts)
  local ok, err = pcall(require("bbb.app.cli").write_file, path, parts)
  if not ok then
    os.remove(path)
    error(("plot: cannot write a temporary file: %s"):format(tostring(err):gsub("^cli%.write_file: ", "")), 0)
  end
end

local function write_blocks(path, blocks)
  local parts = {}
  for k, cols in ipairs(blocks) do
    if k > 1 then parts[#parts + 1] = "\n\n" end
    for i = 1, #cols[1] do
      local row = {}
      for c = 1, #cols do row[c] = number_str(cols[c][i]) end
      parts[#parts + 1] = table.concat(row, " ") .. "\n"
    end
  end
  write_text(path, parts)
end

local function read_all(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

local function gnuplot_available()
  return sys.find_program("gnuplot") ~= nil
end

local function require_gnuplot(what)
  if not gnuplot_available() then fail(what, "gnuplot not found (install gnuplot-nox)") end
end

local function run_gnuplot(what, script, data_path)
  local script_path, err_path = os.tmpname(), os.tmpname()
  write_text(script_path, script)
  local ok = sys.run({ "gnuplot", script_path }, { stdin = "/dev/null", stderr = err_path })
  local err = read_all(err_path)
  os.remove(script_path); os.remove(err_path); os.remove(data_path)
  if not ok then fail(what, "gnuplot failed: %s", (err:gsub("^%s+", ""):gsub("%s+$", ""))) end
end

local function terminal_for(what, file, size)
  local ext = file:match("%.(%w+)$")
  ext = ext and ext:lower()
  local w, h = size[1], size[2]
  if ext == "png" then return ("pngcairo size %d,%d noenhanced"):format(w, h) end
  if ext == "svg" then return ("svg size %d,%d noenhanced"):format(w, h) end
  fail(what, "cannot tell the format of '%s' (use .png or .svg)", file)
end

-- gnuplot reads `set output '|cmd'` as a pipe to a shell command, so a name
-- starting with '|' (or holding a control character, which cannot be passed
-- through its script) is refused before anything is created. Relative names
-- are passed as ./name so gnuplot only ever sees a plain path.
local function check_file_name(what, file)
  if file == "" then fail(what, "file must be a path ending in .png or .svg, got ''") end
  if file:find("%c") then
    fail(what, "file %q holds a control character", file)
  end
  if file:find("^%s*|") then
    fail(what, "file '%s' starts with '|', which gnuplot runs as a command", file)
  end
  if file:sub(1, 1) ~= "/" then return "./" .. file end
  return file
end

local function make_parent_dir(what, file)
  local dir = file:match("^(.*)/[^/]*$")
  if dir and dir ~= "" and not sys.mkdir_p(dir) then
    fail(what, "cannot create directory '%s'", dir)
  end
end

local function check_size(what, size, default)
  size = size or default
  if type(size) ~= "table" or math.type(size[1]) ~= "integer" or math.type(size[2]) ~= "integer"
      or size[1] < 1 or size[2] < 1 then
    fail(what, "size must be {width, height} in positive integers")
  end
  return size
end

-- A title: a string, or a list of strings drawn one under the other. Each
-- line is quoted on its own and joined with gnuplot's string concatenation
-- and a literal "\n", so no line can end the command.
local function gp_text(what, t, field)
  if type(t) ~= "table" then return gp_quote(t) end
  if #t == 0 then fail(what, "%s must be a string or a non-empty list of strings", field) end
  local parts = {}
  for i, line in ipairs(t) do
    if type(line) ~= "string" and type(line) ~= "number" then
      fail(what, "%s[%d] is %s, not a string", field, i, type(line))
    end
    parts[i] = gp_quote(line)
  end
  return table.concat(parts, [[."\n".]])
end

local KEYS = {
  right = "set key outside right top vertical",
  below = "set key outside below center horizontal",
  inside = "set key inside right top vertical opaque box",   -- the whole width for the axes
  off = "unset key",
}

local function check_number(what, v, field)
  if type(v) ~= "number" or not is_finite(v) then
    fail(what, "%s must be a finite number, got %s", field, tostring(v))
  end
  return v
end

-- The axes settings of one plot (or one panel of plot.panels).
local function axes_lines(what, opts)
  local s = { "set grid" }
  local key = KEYS[opts.key or "right"]
  if not key then fail(what, "key must be right, below, inside or off, got %s", tostring(opts.key)) end
  s[#s + 1] = key
  if opts.title then s[#s + 1] = "set title " .. gp_text(what, opts.title, "title") end
  if opts.xlabel then s[#s + 1] = "set xlabel " .. gp_quote(opts.xlabel) end
  if opts.ylabel then s[#s + 1] = "set ylabel " .. gp_quote(opts.ylabel) end
  if opts.logx then s[#s + 1] = "set logscale x" end
  if opts.logy then s[#s + 1] = "set logscale y" end
  for _, axis in ipairs { "x", "y" } do
    local r = opts[axis .. "range"]
    if r ~= nil and (type(r) ~= "table" or type(r[1]) ~= "number" or type(r[2]) ~= "number") then
      fail(what, "%srange must be {lo, hi} in numbers", axis)
    end
    if r then
      s[#s + 1] = ("set %srange [%s:%s]"):format(axis, number_str(r[1]), number_str(r[2]))
    end
  end
  -- ytics = {v, ...}: labelled ticks at these values (a log axis spanning
  -- less than a decade gets none from gnuplot by itself)
  if opts.ytics ~= nil then
    if type(opts.ytics) ~= "table" or #opts.ytics == 0 then fail(what, "ytics must be a list of numbers") end
    local t = {}
    for i, v in ipairs(opts.ytics) do t[i] = number_str(check_number(what, v, "ytics[" .. i .. "]")) end
    s[#s + 1] = ("set ytics (%s)"):format(table.concat(t, ", "))
  end
  -- A caption: lines of text under the plot, one label each, in a bottom
  -- margin made tall enough for them.
  local caption = opts.caption
  if caption ~= nil then
    if type(caption) ~= "table" then caption = { caption } end
    for i, line in ipairs(caption) do
      if type(line) ~= "string" and type(line) ~= "number" then
        fail(what, "caption[%d] is %s, not a string", i, type(line))
      end
      s[#s + 1] = ("set label %d %s at screen 0.01, character %s left front"):format(i,
        gp_quote(line), number_str(#caption - i + 1.2))
    end
    s[#s + 1] = ("set bmargin %d"):format(#caption + 4)
  end
  return s
end

-- The settings every kind of plot shares.
local function header(what, opts, terminal, output)
  local s = { "set terminal " .. terminal, "set output " .. gp_quote(output) }
  for _, line in ipairs(axes_lines(what, opts)) do s[#s + 1] = line end
  return s
end

local function color_of(item, k)
  return item.color or PALETTE[(k - 1) % #PALETTE + 1]
end

local function title_clause(item)
  return item.title and ("title " .. gp_quote(item.title)) or "notitle"
end

local function check_list(what, list, field)
  if list == nil then return {} end
  if type(list) ~= "table" then fail(what, "%s must be a list of tables", field) end
  for k, item in ipairs(list) do
    if type(item) ~= "table" then fail(what, "%s[%d] must be a table", field, k) end
  end
  return list
end

local function xy_columns(what, item, field, keys)
  local cols = {}
  for c, key in ipairs(keys) do
    if item[key] == nil then fail(what, "%s has no %s", field, key) end
    cols[c] = to_list(item[key], what, field .. "." .. key)
    if #cols[c] ~= #cols[1] then
      fail(what, "%s: %s has %d values but %s has %d", field, key, #cols[c], keys[1], #cols[1])
    end
  end
  if #cols[1] == 0 then fail(what, "%s is empty", field) end
  return cols
end

local function series_columns(what, s, k)
  if s.y == nil then fail(what, "series[%d] has no y", k) end
  local y = to_list(s.y, what, ("series[%d].y"):format(k))
  local x = s.x and to_list(s.x, what, ("series[%d].x"):format(k))
  if not x then
    x = {}
    for i = 1, #y do x[i] = i end
  end
  if #x ~= #y then fail(what, "series[%d]: x has %d values but y has %d", k, #x, #y) end
  if #y == 0 then fail(what, "series[%d] is empty", k) end
  return { x, y }
end

local STYLES = { lines = true, points = true, linespoints = true, errorbars = true }

local function opacity_of(what, item, field, default)
  local a = item.opacity
  if a == nil then return default end
  if type(a) ~= "number" or not (a >= 0 and a <= 1) then
    fail(what, "%s.opacity must be a number in [0, 1], got %s", field, tostring(a))
  end
  return a
end

-- Line width, point size and dash of a series, checked.
local function series_look(what, s, k)
  local parts = {}
  local lw = s.width and check_number(what, s.width, ("series[%d].width"):format(k)) or 2
  parts[#parts + 1] = "lw " .. number_str(lw)
  if s.pointsize then
    parts[#parts + 1] = "ps " .. number_str(check_number(what, s.pointsize, ("series[%d].pointsize"):format(k)))
  end
  if s.pointtype then
    if math.type(s.pointtype) ~= "integer" or s.pointtype < 0 or s.pointtype > 15 then
      fail(what, "series[%d].pointtype must be an integer in 0..15", k)
    end
    parts[#parts + 1] = ("pt %d"):format(s.pointtype)
  end
  if s.dash then
    if math.type(s.dash) ~= "integer" or s.dash < 1 or s.dash > 5 then
      fail(what, "series[%d].dash must be an integer in 1..5 (gnuplot's dash types)", k)
    end
    parts[#parts + 1] = ("dt %d"):format(s.dash)
  end
  return table.concat(parts, " ")
end

-- Shaded spans of x (a training range, say): rectangles behind everything,
-- with an entry in the key when they have a title.
local function shade_lines(what, opts, clauses)
  local shade = check_list(what, opts.shade, "shade")
  local s = {}
  for k, r in ipairs(shade) do
    local field = ("shade[%d]"):format(k)
    local lo, hi = check_number(what, r.lo, field .. ".lo"), check_number(what, r.hi, field .. ".hi")
    local color = gp_quote(r.color or "#eeeeee")
    local fill = ("fs solid %s"):format(number_str(opacity_of(what, r, field, 1)))
    s[#s + 1] = ("set object %d rect from first %s, graph 0 to first %s, graph 1 behind fc rgb %s %s noborder")
      :format(k, number_str(lo), number_str(hi), color, fill)
    if r.title then
      clauses[#clauses + 1] = ("keyentry with boxes fc rgb %s %s noborder %s"):format(color, fill, title_clause(r))
    end
  end
  return s
end

-- The plot command of one set of axes; its data go into `blocks` (shared
-- by every panel of a multiplot, so `index` counts from the first panel).
-- Bands first, so the lines are drawn over them; series in their order, so
-- the last (the data points, usually) are on top.
local function lines_body(what, opts, data_path, blocks)
  local series = check_list(what, opts.series, "series")
  local bands = check_list(what, opts.bands, "bands")
  if #series + #bands == 0 then fail(what, "nothing to plot: give series or bands") end
  local clauses = {}
  local pre = shade_lines(what, opts, clauses)
  for k, b in ipairs(bands) do
    local field = ("bands[%d]"):format(k)
    blocks[#blocks + 1] = xy_columns(what, b, field, { "x", "lo", "hi" })
    local color = gp_quote(color_of(b, k))
    clauses[#clauses + 1] = ("%s index %d using 1:2:3 with filledcurves fc rgb %s "
      .. "fs transparent solid %s noborder %s"):format(gp_quote(data_path), #blocks - 1,
      color, number_str(opacity_of(what, b, field, 0.25)), title_clause(b))
    if b.edges then   -- the band's edges as thin lines, so it reads at any opacity
      local edge = gp_quote(b.edge_color or color_of(b, k))
      for c = 2, 3 do
        clauses[#clauses + 1] = ("%s index %d using 1:%d with lines lw 1 lc rgb %s notitle"):format(
          gp_quote(data_path), #blocks - 1, c, edge)
      end
    end
  end
  for k, s in ipairs(series) do
    local style = s.style or "lines"
    if not STYLES[style] then
      fail(what, "series[%d].style must be lines, points, linespoints or errorbars", k)
    end
    if style == "errorbars" then   -- points at (x, y) with vertical bars from lo to hi
      blocks[#blocks + 1] = xy_columns(what, s, ("series[%d]"):format(k), { "x", "y", "lo", "hi" })
      clauses[#clauses + 1] = ("%s index %d using 1:2:3:4 with yerrorbars %s lc rgb %s %s"):format(
        gp_quote(data_path), #blocks - 1, series_look(what, s, k), gp_quote(color_of(s, k)), title_clause(s))
    else
      blocks[#blocks + 1] = series_columns(what, s, k)
      clauses[#clauses + 1] = ("%s index %d using 1:2 with %s %s lc rgb %s %s"):format(
        gp_quote(data_path), #blocks - 1, style, series_look(what, s, k), gp_quote(color_of(s, k)), title_clause(s))
    end
  end
  pre[#pre + 1] = "plot " .. table.concat(clauses, ", \\\n     ")
  return table.concat(pre, "\n")
end

local function lines_script(what, opts, data_path)
  local blocks = {}
  local cmd = lines_body(what, opts, data_path, blocks)
  write_blocks(data_path, blocks)
  return cmd
end

-- Several sets of axes on one page: each panel is a table of lines{}
-- options (no file); the page may have its own title.
local function panels_script(what, opts, data_path)
  local panels = check_list(what, opts.panels, "panels")
  if #panels == 0 then fail(what, "nothing to plot: give panels") end
  local layout = opts.layout or { 1, #panels }
  if type(layout) ~= "table" or math.type(layout[1]) ~= "integer" or math.type(layout[2]) ~= "integer"
      or layout[1] < 1 or layout[2] < 1 or layout[1] * layout[2] < #panels then
    fail(what, "layout must be {rows, columns} in positive integers with room for %d panels", #panels)
  end
  local blocks = {}
  local s = { ("set multiplot layout %d,%d%s"):format(layout[1], layout[2],
    opts.page_title and (" title " .. gp_text(what, opts.page_title, "page_title")) or "") }
  for k, p in ipairs(panels) do
    local field = ("panels[%d]"):format(k)
    local ok, err = pcall(function()
      if p.caption ~= nil then fail(what, "a panel has no caption: put its numbers in its title") end
      s[#s + 1] = "reset"
      for _, line in ipairs(axes_lines(what, p)) do s[#s + 1] = line end
      s[#s + 1] = lines_body(what, p, data_path, blocks)
    end)
    if not ok then error((tostring(err):gsub("^(plot%.%w+: )", "%1" .. field .. ": ")), 0) end
  end
  s[#s + 1] = "unset multiplot"
  write_blocks(data_path, blocks)
  return table.concat(s, "\n")
end

local function value_range(all)
  local lo, hi = math.huge, -math.huge
  for _, values in ipairs(all) do
    for _, v in ipairs(values) do
      if is_finite(v) then lo, hi = math.min(lo, v), math.max(hi, v) end
    end
  end
  if lo == math.huge then return nil end
  if hi == lo then lo, hi = lo - 0.5, hi + 0.5 end   -- one value still gets a visible bin
  return lo, hi
end

-- Counts per equal-width bin over the range of all series, so bars line up.
local function bin_counts(values, lo, width, bins, density)
  local counts = {}
  for b = 1, bins do counts[b] = 0 end
  local n = 0
  for _, v in ipairs(values) do
    if is_finite(v) then
      local b = math.min(bins, math.floor((v - lo) / width) + 1)
      counts[b] = counts[b] + 1
      n = n + 1
    end
  end
  if density and n > 0 then
    for b = 1, bins do counts[b] = counts[b] / (n * width) end
  end
  return counts
end

local function histogram_script(what, opts, data_path)
  local series = check_list(what, opts.series, "series")
  if #series == 0 then fail(what, "nothing to plot: give series") end
  local bins = opts.bins or 30
  if math.type(bins) ~= "integer" or bins < 1 then fail(what, "bins must be a positive integer") end
  local all = {}
  for k, s in ipairs(series) do
    if s.values == nil then fail(what, "series[%d] has no values", k) end
    all[k] = to_list(s.values, what, ("series[%d].values"):format(k))
  end
  local lo, hi = value_range(all)
  if not lo then fail(what, "no finite values to bin") end
  local width = (hi - lo) / bins
  local centers = {}
  for b = 1, bins do centers[b] = lo + (b - 0.5) * width end
  local blocks, clauses = {}, {}
  for k, s in ipairs(series) do
    blocks[k] = { centers, bin_counts(all[k], lo, width, bins, opts.density) }
    clauses[k] = ("%s index %d using 1:2 with boxes lc rgb %s %s"):format(
      gp_quote(data_path), k - 1, gp_quote(color_of(s, k)), title_clause(s))
  end
  write_blocks(data_path, blocks)
  return ("set boxwidth %s absolute\nset style fill transparent solid 0.5 border\n"):format(
    number_str(width)) .. "plot " .. table.concat(clauses, ", \\\n     ")
end

-- One chart of grouped bars: category i at x = i, its series side by side.
local function bars_panel(what, panel, field, categories, data_path, blocks)
  local series = check_list(what, panel.series, field .. ".series")
  if #series == 0 then fail(what, "%s: nothing to plot: give series", field) end
  local width = 0.8 / #series
  local clauses = {}
  for k, s in ipairs(series) do
    local label = ("%s.series[%d].values"):format(field, k)
    if s.values == nil then fail(what, "%s.series[%d] has no values", field, k) end
    local v = to_list(s.values, what, label)
    if #v ~= #categories then
      fail(what, "%s has %d values for %d categories", label, #v, #categories)
    end
    local xs = {}
    for i = 1, #v do xs[i] = i - 0.4 + (k - 0.5) * width end
    blocks[#blocks + 1] = { xs, v }
    clauses[k] = ("%s index %d using 1:2 with boxes lc rgb %s %s"):format(gp_quote(data_path),
      #blocks - 1, gp_quote(color_of(s, k)), title_clause(s))
  end
  return ("set boxwidth %s absolute\n"):format(number_str(width))
    .. "plot " .. table.concat(clauses, ", \\\n     ")
end

local function bars_script(what, opts, data_path)
  if type(opts.categories) ~= "table" or #opts.categories == 0 then
    fail(what, "categories must list at least one category")
  end
  local categories = {}
  for i, c in ipairs(opts.categories) do categories[i] = tostring(c) end
  local tics = {}
  for i, c in ipairs(categories) do tics[i] = ("%s %d"):format(gp_quote(c), i) end
  local lines = { "set style fill solid 0.7 border", ("set xtics (%s)"):format(table.concat(tics, ", ")),
                  ("set xrange [0.4:%s]"):format(number_str(#categories + 0.6)) }
  if opts.yrange == nil then lines[#lines + 1] = "set yrange [0:*]" end   -- bars start at 0
  local longest = 0
  for _, c in ipairs(categories) do longest = math.max(longest, #c) end
  if longest > 3 then lines[#lines + 1] = "set xtics rotate by -45" end   -- names, not digits
  local blocks = {}
  if opts.panels == nil then
    lines[#lines + 1] = bars_panel(what, opts, "bars", categories, data_path, blocks)
  else
    local panels = check_list(what, opts.panels, "panels")
    if #panels == 0 then fail(what, "panels is empty") end
    local layout = opts.layout or { #panels, 1 }
    if type(layout) ~= "table" or math.type(layout[1]) ~= "integer" or math.type(layout[2]) ~= "integer"
        or layout[1] < 1 or layout[2] < 1 or layout[1] * layout[2] < #panels then
      fail(what, "layout must be {rows, cols} in positive integers with room for %d panels", #panels)
    end
    lines[#lines + 1] = "unset title"
    lines[#lines + 1] = "set key outside top center horizontal"   -- a key at the side squeezes small panels
    lines[#lines + 1] = ("set multiplot layout %d,%d%s"):format(layout[1], layout[2],
      opts.title and (" title " .. gp_quote(opts.title)) or "")
    for k, panel in ipairs(panels) do
      lines[#lines + 1] = panel.title and ("set title " .. gp_quote(panel.title)) or "unset title"
      lines[#lines + 1] = bars_panel(what, panel, ("panels[%d]"):format(k), categories, data_path, blocks)
    end
    lines[#lines + 1] = "unset multiplot"
  end
  write_blocks(data_path, blocks)
  return table.concat(lines, "\n")
end

-- gnuplot exits 0 when the disk fills under it: a PNG must end with its
-- IEND chunk and an SVG with </svg>, or the file is removed and the plot is
-- an error naming it.
local function check_complete(what, path)
  local f = io.open(path, "rb")
  local size = f and f:seek("end") or 0
  local tail = ""
  if f and size > 0 then
    f:seek("set", math.max(0, size - 64))
    tail = f:read("a") or ""
  end
  if f then f:close() end
  local png = path:lower():find("%.png$")
  if not tail:find(png and "IEND" or "</svg>", 1, true) then
    os.remove(path)
    fail(what, "cannot write '%s': the file came out incomplete (%d bytes; is the disk full?)", path, size)
  end
end

local function render(what, opts, body, terminal, output)
  local lines = header(what, opts, terminal, output)
  local data_path = os.tmpname()
  local ok, plot_cmd = pcall(body, what, opts, data_path)
  if not ok then os.remove(data_path); error(plot_cmd, 0) end
  lines[#lines + 1] = plot_cmd
  lines[#lines + 1] = "set output"   -- flushes and closes the file before gnuplot exits
  run_gnuplot(what, table.concat(lines, "\n") .. "\n", data_path)
end

local function write_file(what, opts, body)
  if type(opts) ~= "table" then fail(what, "expects a table of options") end
  if type(opts.file) ~= "string" then fail(what, "file must be a path ending in .png or .svg") end
  require_gnuplot(what)
  local terminal = terminal_for(what, opts.file, check_size(what, opts.size, { 800, 500 }))
  local path = check_file_name(what, opts.file)
  make_parent_dir(what, path)
  -- drawn into a temporary beside the file, then renamed over it: a failed
  -- plot (a full disk, gnuplot stopped) leaves the old figure as it was
  local ext = path:match("(%.%w+)$")
  local unique = os.tmpname()   -- a name no other process holds
  os.remove(unique)
  local tmp = ("%s.bbb-tmp.%s%s"):format(path:sub(1, -#ext - 1), unique:match("([^/]+)$"), ext)
  local ok, err = pcall(function()
    render(what, opts, body, terminal, tmp)
    check_complete(what, tmp)
  end)
  if ok then ok, err = os.rename(tmp, path) end
  if not ok then
    os.remove(tmp)
    error(tostring(err):gsub(tmp:gsub("%p", "%%%0"), (path:gsub("%%", "%%%%"))), 0)
  end
  return opts.file
end

--- lines{file = "out/x.png", title, xlabel, ylabel, size = {800, 500}, logy, logx,
--        xrange = {lo, hi}, yrange = {lo, hi}, ytics = {v, ...}, key = "right" | "below" (outside the axes) | "inside" (top right, boxed) | "off",
--        caption = "text" or {"line", ...} (under the plot),
--        shade = {{lo =, hi =, color =, opacity = 1, title =}} (spans of x, behind all),
--        series = {{x =, y =, title =, style = "lines"|"points"|"linespoints"|"errorbars"
--                   (errorbars: lo =, hi = too), color = "#rrggbb",
--                   width = 2, pointsize =, pointtype =, dash =}},
--        bands = {{x =, lo =, hi =, title =, color =, opacity = 0.25, edges = false, edge_color =}}} -> file
-- x, y, lo, hi are tensors or Lua arrays; x defaults to 1..#y. title may be
-- a list of lines.
plot.lines = entry_point(function(opts)
  return write_file("lines", opts, lines_script)
end)

--- panels{file = "out/x.png", size = {1400, 800}, page_title, layout = {rows, columns},
--         panels = {{title, xlabel, ylabel, xrange, yrange, key, shade, series, bands}, ...}} -> file
-- Several lines{} plots on one page (gnuplot's multiplot), one per panel.
plot.panels = entry_point(function(opts)
  return write_file("panels", opts, panels_script)
end)

--- histogram{file =, title, xlabel, ylabel, size, bins = 30, density = false,
--            series = {{values =, title =, color =}}} -> file
-- All series share one set of bins spanning their common range.
plot.histogram = entry_point(function(opts)
  return write_file("histogram", opts, histogram_script)
end)

--- bars{file =, title, xlabel, ylabel, size, yrange, categories = {"a", "b", ...},
--       series = {{values =, title =, color =}}} -> file: grouped bars, one
-- group per category and one bar per series (values: one per category).
-- panels = {{title =, series = {...}}, ...} with layout = {rows, cols}
-- draws one such chart per panel under the common title.
plot.bars = entry_point(function(opts)
  return write_file("bars", opts, bars_script)
end)

--- terminal{...} -> string: lines{} (or histogram{} when the series carry
-- values) drawn in text with gnuplot's dumb terminal; size in characters.
plot.terminal = entry_point(function(opts)
  if type(opts) ~= "table" then fail("terminal", "expects a table of options") end
  local size = check_size("terminal", opts.size, { 79, 24 })
  require_gnuplot("terminal")
  local first = type(opts.series) == "table" and opts.series[1]
  local body = type(first) == "table" and first.values ~= nil and histogram_script or lines_script
  local out = os.tmpname()
  local ok, err = pcall(render, "terminal", opts, body,
    ("dumb size %d,%d noenhanced"):format(size[1], size[2]), out)
  local text = read_all(out)
  os.remove(out)
  if not ok then error(err, 0) end
  return text
end)

return plot

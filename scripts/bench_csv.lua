--- bench_csv: bbb.data.read_csv on a large numeric CSV, against a floor
-- timed in the same run (reading the same bytes in the same 1 MiB blocks
-- and doing nothing with them), and its peak memory against the table's
-- float32 size. The file is written once (rows drawn from a pool of
-- random rows, numbers printed with %.6g) and kept for later runs.
--   build/bbblua scripts/bench_csv.lua [--rows 1000000] [--cols 50] [--file /tmp/bbb_bench.csv]
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local bbb = require "bbb"
local core = require "bbb.core"
local cli = require "bbb.app.cli"

local parser = recipe.parser("bench_csv", "Times bbb.data.read_csv against a plain read of the same file.", { defaults = { threads = "1" } })
flags.option(parser, "--rows", "Rows of the file (1..10^8).", "1000000"):convert(cli.integer { min = 1, max = 100000000 })
flags.option(parser, "--cols", "Numeric columns (1..1000).", "50"):convert(cli.integer { min = 1, max = 1000 })
flags.option(parser, "--file", "Where the CSV goes (kept: a second run reuses it).", "/tmp/bbb_bench.csv")
recipe.declare(parser, { "threads" })
local args = cli.parse(parser)
bbb.set_num_threads(args.threads)

local function status(key)
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^" .. key .. ":%s+(%d+)")
    if kb then return tonumber(kb) * 1024 end
  end
end

local function write_file(path, rows, cols)
  local gen, pool = bbb.Generator(7), {}
  local v = bbb.randn({ 4096, cols }, 0, 1, gen):totable()
  for i = 1, #v do
    for j = 1, cols do v[i][j] = ("%.6g"):format(v[i][j]) end
    pool[i] = table.concat(v[i], ",")
  end
  local f = assert(io.open(path, "wb"))
  local names = {}
  for j = 1, cols do names[j] = "x" .. j end
  f:write(table.concat(names, ","), "\n")
  local u = core.rand({ rows }, 0, 1, gen):totable()
  local block = {}
  for i = 1, rows do
    block[#block + 1] = pool[1 + math.floor(u[i] * #pool)]
    if #block == 4096 or i == rows then
      f:write(table.concat(block, "\n"), "\n")
      block = {}
    end
  end
  assert(f:close())
end

local exists = io.open(args.file, "rb")
local bytes
if exists then bytes = exists:seek("end"); exists:close() end
local expected_header = nil
if exists then
  local f = assert(io.open(args.file))
  expected_header = f:read("l")
  f:close()
end
local n_header = expected_header and select(2, expected_header:gsub(",", ",")) + 1
if not exists or n_header ~= args.cols then
  io.write(("bench_csv: writing %d x %d to %s ... "):format(args.rows, args.cols, args.file)); io.flush()
  local t0 = core.clock()
  write_file(args.file, args.rows, args.cols)
  print(("%.1f s"):format(core.clock() - t0))
  local f = assert(io.open(args.file, "rb")); bytes = f:seek("end"); f:close()
end

collectgarbage(); collectgarbage()
-- the floor: the same bytes, the same blocks, nothing done with them
local t0 = core.clock()
local f = assert(io.open(args.file, "rb"))
while true do
  local s = f:read(1 << 20)
  if not s then break end
end
f:close()
local floor = core.clock() - t0

local rss0 = status("VmRSS")
t0 = core.clock()
local d = bbb.data.read_csv(args.file)
local took = core.clock() - t0
local hwm = status("VmHWM")
local n, k = d.x:size()[1], d.x:size()[2]
local table_bytes = n * k * 4
print(("file           %d rows x %d columns, %.0f MB"):format(n, k, bytes / 1e6))
print(("read_csv       %.2f s (%.0f MB/s)"):format(took, bytes / 1e6 / took))
print(("floor          %.2f s (reading the bytes alone)   ratio %.1f"):format(floor, took / floor))
print(("memory         peak RSS %.0f MB above the %.0f MB before; the float32 table is %.0f MB: %.2fx")
  :format((hwm - rss0) / 1e6, rss0 / 1e6, table_bytes / 1e6, (hwm - rss0) / table_bytes))

-- Run by tests/dist_spec.lua under mpirun -np 2: the collectives.
local d = bbb.dist
local r, n = d.rank(), d.size()
local t = bbb.full({ 3 }, r + 1)
d.allreduce(t)
local a, b = bbb.ones{ 2, 2 }, bbb.full({ 1 }, r)
local extra = d.allreduce_flat({ a, b }, r == 1 and 1 or 0)
local c = bbb.full({ 2 }, r == 0 and 7 or -1)
d.broadcast(c, 0)
local g = d.allgather_number(10 * r)
local s = d.broadcast_string(r == 0 and "from rank 0" or nil, 0)
local nums = d.allreduce_numbers { 1.5, r }
-- one JSON line per rank, which the spec reads
print(require("bbb.json").encode{ rank = r, size = n, sum = t[1], flat = { a[1][1], b[1] }, extra = extra,
  bcast = c[2], gather = g, string = s, numbers = nums })
d.finalize()

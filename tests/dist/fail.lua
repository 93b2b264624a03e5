-- Run by tests/dist_spec.lua under mpirun -np 2: rank 1 fails; the job must
-- stop instead of leaving rank 0 in the barrier forever.
local d = bbb.dist
if d.rank() == 1 then error("rank 1 gives up") end
d.barrier()
print("rank 0 passed the barrier")
d.finalize()

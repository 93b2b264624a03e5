--- bbb.dist: data-parallel training and distributed searches over MPI.
-- Ranks are MPI's own, 0-based; rank 0 prints, logs and writes checkpoints.
--
--   mpirun -np 2 bbblua scripts/mnist.lua --distributed
--   local dist = bbb.dist
--   if dist.available then print(dist.rank(), dist.size()) end
--
-- Functions: rank(), size(), allreduce(t) (in place, sum), allreduce_flat(
-- {t1, t2, ...}, extra) (one call for a list of tensors), allreduce_numbers
-- {..}, allgather_number(x), broadcast(t, root), broadcast_string(s, root),
-- send_string(s, dest), recv_string([source]) -> s, source, barrier(),
-- finalize(), abort(code), launched() (started by mpirun?).
-- A build without MPI has them all raise "this build of bbb has no MPI".
local dist = {}

local function launched()
  for _, v in ipairs { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS" } do
    if os.getenv(v) then return true end
  end
  return false
end

--- True when this process was started by mpirun (or another MPI launcher).
dist.launched = launched

-- The functions below come from bbb.dist_mpi (src/dist) under mpirun;
-- their doc comments stand here, where the names are bound.

--- @function rank
-- rank() -> this process's rank, 0-based.

--- @function size
-- size() -> the number of ranks.

--- @function allreduce
-- allreduce(t) -> t: the sum over ranks, in place.

--- @function allreduce_flat
-- allreduce_flat({t1, t2, ...}, extra) -> extra summed: every tensor of the
-- list summed over ranks in place, in one call.

--- @function allreduce_numbers
-- allreduce_numbers({x1, x2, ...}) -> the list summed over ranks.

--- @function allgather_number
-- allgather_number(x) -> {x of rank 0, x of rank 1, ...}.

--- @function broadcast
-- broadcast(t, root) -> t: root's values on every rank, in place.

--- @function broadcast_string
-- broadcast_string(s, root) -> root's string on every rank.

--- @function send_string
-- send_string(s, dest): sends s to rank dest.

--- @function recv_string
-- recv_string([source]) -> s, source: a string sent by send_string.

--- @function barrier
-- barrier(): waits until every rank has called it.

--- @function finalize
-- finalize(): ends MPI in this process.

--- @function abort
-- abort(code): ends every rank with the exit status code.

--- @function wtime
-- wtime() -> seconds, MPI's wall clock.

local NAMES = { "rank", "size", "allreduce", "allreduce_flat", "allreduce_numbers", "allgather_number",
                "broadcast", "broadcast_string", "send_string", "recv_string", "barrier", "finalize",
                "abort", "wtime" }

-- Loading MPI outside mpirun would start a singleton job: only under a launcher.
local mpi, load_error
if launched() then
  local ok, m = pcall(require, "bbb.dist_mpi")
  if ok then mpi = m else load_error = tostring(m) end
end

dist.available = mpi ~= nil

if mpi then
  for _, k in ipairs(NAMES) do dist[k] = mpi[k] end
else
  local has_module = package.searchpath("bbb.dist_mpi", package.cpath) ~= nil
  local reason = not has_module
    and "this build of bbb has no MPI (install libopenmpi-dev and openmpi-bin, then rebuild)"
    or load_error and ("MPI could not start: " .. load_error)
    or "this process was not started by mpirun (mpirun -np N bbblua ...)"
  dist.reason = reason
  for _, k in ipairs(NAMES) do
    dist[k] = function() error("bbb.dist." .. k .. ": " .. reason, 2) end
  end
end

return dist

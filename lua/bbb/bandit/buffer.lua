--- A replay buffer of the last `capacity` (input, target) rows, kept in two
-- preallocated tensors (a ring), sampled uniformly with replacement.
local bbb = require "bbb"

local Buffer = {}
Buffer.__index = Buffer

--- ReplayBuffer{capacity = 4096, width = 119}
local function new(opts)
  local cap, width = opts.capacity, opts.width
  if math.type(cap) ~= "integer" or cap < 1 then
    error(("ReplayBuffer: capacity must be a positive integer, got %s"):format(tostring(cap)), 2)
  end
  if math.type(width) ~= "integer" or width < 1 then
    error(("ReplayBuffer: width must be a positive integer, got %s"):format(tostring(width)), 2)
  end
  return setmetatable({ capacity = cap, width = width, count = 0,
    x = bbb.zeros{ cap, width }, y = bbb.zeros{ cap, 1 } }, Buffer)
end

--- add(x (1, width), y): overwrites the oldest row once full.
function Buffer:add(x, y)
  local slot = self.count % self.capacity + 1
  self.x:narrow(1, slot, 1):copy(x)
  self.y:set(slot, 1, y)
  self.count = self.count + 1
end

--- How many rows it holds.
function Buffer:size() return math.min(self.count, self.capacity) end

--- sample(k, generator) -> x (k, width), y (k, 1): rows drawn with replacement.
function Buffer:sample(k, generator)
  local n = self:size()
  if n == 0 then error("ReplayBuffer:sample: the buffer is empty", 2) end
  local idx = bbb.rand_rows(k, n, generator)   -- floor(n u) + 1, u uniform on [0, 1)
  return self.x:index_select(idx), self.y:index_select(idx)
end

--- The filled rows and the count, for checkpoints (a buffer of 100,000 rows
-- that holds 3,000 saves 3,000).
function Buffer:state()
  local n = self:size()
  if n == 0 then return { count = self.count }, {} end
  return { count = self.count }, { x = self.x:narrow(1, 1, n), y = self.y:narrow(1, 1, n) }
end

--- Takes what state() saved; a checkpoint holding every row of the buffer
-- (as they were once written) loads too.
function Buffer:set_state(st, tensors)
  local c = math.tointeger(st.count)
  if not c or c < 0 then error("ReplayBuffer:set_state: bad count", 2) end
  local n = math.min(c, self.capacity)
  local x, y = tensors.x, tensors.y
  if n == 0 and x == nil and y == nil then
    self.count = 0
    return
  end
  local rows = bbb.is_tensor(x) and x:dim() == 2 and x:size(2) == self.width and x:size(1)
  if not (rows and (rows == n or rows == self.capacity) and bbb.is_tensor(y) and y:numel() == rows) then
    error(("ReplayBuffer:set_state: the saved rows do not fit a buffer of %d x %d holding %d")
      :format(self.capacity, self.width, n), 2)
  end
  self.x:narrow(1, 1, rows):copy(x)
  self.y:narrow(1, 1, rows):copy(y:reshape(rows, 1))
  self.count = c
end

return new

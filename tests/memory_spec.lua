-- Training-style loops that make temporary tensors every step must run at
-- flat memory without anyone calling collectgarbage(): the collector has to
-- see the tensor bytes it cannot see directly.
local bbb = require "bbb"

local PAGE = 4096
local MiB = 2 ^ 20
local LIMIT = 64 * MiB
-- 1000x1000: 4 MB per temporary, 3 temporaries a step, so a leak of any of
-- them is gigabytes. BBB_MEMORY_N shrinks it for slow (sanitized) builds.
local N = tonumber(os.getenv("BBB_MEMORY_N")) or 1000

local function rss()
  local f = assert(io.open("/proc/self/statm"))
  local resident = f:read("a"):match("^%d+%s+(%d+)")
  f:close()
  return tonumber(resident) * PAGE
end

-- Runs step() iters times and fails as soon as resident memory has grown
-- by more than LIMIT: a leak of this size would otherwise take the machine
-- down before the loop ends.
local function run_flat(iters, step)
  local before = rss()
  for i = 1, iters do
    step()
    if i % 100 == 0 then
      local grown = rss() - before
      assert.is_true(grown < LIMIT,
        ("resident memory grew by %.0f MiB after %d of %d steps (tensor bytes now %.0f MiB)")
          :format(grown / MiB, i, iters, bbb.bytes_allocated() / MiB))
    end
  end
  return rss() - before
end

describe("memory", function()
  it("20,000 steps of temporaries stay flat without collectgarbage()", function()
    local start = bbb.bytes_allocated()
    local x = bbb.rand({N, N}, -1, 1, bbb.Generator(1))
    local function step() local y = (x * 2 + 1):exp():sum() end
    for _ = 1, 200 do step() end   -- let the allocator and collector settle
    local grown = run_flat(20000, step)
    assert.is_true(grown < LIMIT, ("grew by %.1f MiB"):format(grown / MiB))
    x = nil
    collectgarbage()
    collectgarbage()
    local left = bbb.bytes_allocated() - start
    assert.is_true(math.abs(left) < MiB, ("%d tensor bytes left after collection"):format(left))
  end)

  it("2,000 forward and backward passes stay flat", function()
    local start = bbb.bytes_allocated()
    local x = bbb.rand({N, N}, -1, 1, bbb.Generator(2)):requires_grad(true)
    local function step()
      local y = (x * 2 + 1):exp():sum()
      y:backward()
    end
    for _ = 1, 200 do step() end
    local grown = run_flat(2000, step)
    assert.is_true(grown < LIMIT, ("grew by %.1f MiB"):format(grown / MiB))
    -- the gradient accumulated in place: one tensor, not one per step
    assert.are.same({N, N}, x.grad:size())
    x = nil
    collectgarbage()
    collectgarbage()
    local left = bbb.bytes_allocated() - start
    assert.is_true(math.abs(left) < MiB, ("%d tensor bytes left after collection"):format(left))
  end)
end)

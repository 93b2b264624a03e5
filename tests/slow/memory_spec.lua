-- Training-style loops that make temporary tensors every step must run at
-- flat memory without anyone calling collectgarbage(): the collector has to
-- see the tensor bytes it cannot see directly.
local bbb = require "bbb"
local helpers = require "helpers"

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

  -- Run in bbblua, whose Lua heap is small: under busted the heap is large
  -- enough that Lua's own pause hides the difference.
  it("a training step pays for about one collection cycle, not one per tensor it makes", function()
    local program = [[
      local bbb = require "bbb"
      -- A finalizer that makes its successor counts the collector's cycles.
      local cycles, counting = 0, true
      local function sentinel()
        setmetatable({}, { __gc = function()
          if counting then cycles = cycles + 1; sentinel() end
        end })
      end
      local gen = bbb.Generator(3)
      local net = bbb.nn.bayes_mlp({ 784, 1200, 1200, 10 }, { generator = gen })
      local opt = bbb.optim.Adam(net, { lr = 1e-3 })
      local elbo = bbb.elbo.ELBO{ n_data = 60000, batch_size = 128 }
      local x = bbb.rand({ 128, 784 }, 0, 1, gen)
      local labels = {}
      for i = 1, 128 do labels[i] = i % 10 + 1 end
      local y = bbb.tensor(labels)
      local function step()
        opt:zero_grad()
        elbo:loss(net, x, y, { batch = 1 }):backward()
        opt:step()
      end
      for _ = 1, 5 do step() end
      sentinel()
      for _ = 1, 40 do step() end
      counting = false
      print(("cycles %d"):format(cycles))
    ]]
    local status, out = helpers.run("-e " .. helpers.q(program))
    assert.are.equal(0, status, out)
    local cycles = tonumber(out:match("cycles (%d+)"))
    assert.is_true(cycles >= 20 and cycles <= 80, ("%s collection cycles in 40 steps"):format(cycles))
  end)
end)

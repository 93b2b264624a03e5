-- Threads: every op gives the same bits on any thread count, GEMMs
-- included, so the count in use can follow the load: beside a busy
-- process bbb runs on the cores the others leave.
local bbb = require "bbb"
local helpers = require "helpers"

local with_threads = helpers.with_threads

local function same_bits(a, b)
  assert.are.same(a:size(), b:size())
  assert.are.equal(0, (a - b):abs():max():item())
end

describe("GEMMs on any thread count", function()
  -- OpenBLAS threading one sgemm itself gives other last bits on 2 threads
  -- than on 1 (up to 7e-5 on 128x1200x1200); bbb cuts a GEMM into tiles
  -- that depend on the shape alone.
  local shapes = { {128, 1200, 1200}, {128, 784, 400}, {400, 128, 784}, {129, 785, 401}, {7, 3, 5}, {1, 1000, 1} }
  for _, s in ipairs(shapes) do
    it(("matmul %dx%dx%d, every transpose, the same on 1 and 2 threads"):format(s[1], s[2], s[3]), function()
      local g = bbb.Generator(s[1] * 7 + s[2])
      local m, k, n = s[1], s[2], s[3]
      for _, t in ipairs { {false, false}, {true, false}, {false, true}, {true, true} } do
        local a = t[1] and bbb.randn({k, m}, 0, 1, g) or bbb.randn({m, k}, 0, 1, g)
        local b = t[2] and bbb.randn({n, k}, 0, 1, g) or bbb.randn({k, n}, 0, 1, g)
        local function run() return bbb.matmul(a, b, t[1], t[2]) end
        same_bits(with_threads(1, run), with_threads(2, run))
      end
    end)
  end

  it("a linear layer's output and all three gradients are the same on 1 and 2 threads", function()
    local g = bbb.Generator(5)
    local x, w, b = bbb.randn({128, 784}, 0, 1, g), bbb.randn({1200, 784}, 0, 0.05, g), bbb.randn({1200}, 0, 1, g)
    local function run()
      local xs, ws, bs = x:clone():requires_grad(true), w:clone():requires_grad(true), b:clone():requires_grad(true)
      local y = bbb.linear(xs, ws, bs)
      y:relu():sum():backward()
      return { y:detach(), xs.grad, ws.grad, bs.grad }
    end
    local one, two = with_threads(1, run), with_threads(2, run)
    for i = 1, 4 do same_bits(one[i], two[i]) end
  end)

  it("same-shape add, sub and mul: the gradients the same on 1 and 2 threads, and as by hand", function()
    local g = bbb.Generator(9)   -- 60,000 elements: several threads' shares
    local a0, b0, c = bbb.randn({300, 200}, 0, 1, g), bbb.randn({300, 200}, 0, 1, g), bbb.randn({300, 200}, 0, 1, g)
    local function run()
      local a, b = a0:clone():requires_grad(true), b0:clone():requires_grad(true)
      local loss = ((a * b - a + b) * c):sum()
      loss:backward()
      return { a.grad, b.grad }
    end
    local one, two = with_threads(1, run), with_threads(2, run)
    same_bits(one[1], two[1])
    same_bits(one[2], two[2])
    local da, db = bbb.no_grad(function() return c * b0 - c, c * a0 + c end)
    assert.is_true((one[1] - da):abs():max():item() < 1e-5)
    assert.is_true((one[2] - db):abs():max():item() < 1e-5)
  end)
end)

describe("following the load", function()
  local cores = require("bbb.app.sys").nproc()

  it("beside a busy process the threads in use drop below the count asked for", function()
    if cores < 2 then return pending("needs 2 cores") end
    local asked = math.min(cores, bbb.max_threads())
    local busy = assert(require("bbb.app.sys").start({ "yes" }, { stdout = "/dev/null" }))
    local lowest = asked
    local ok, err = pcall(with_threads, asked, function()
      local x, w = bbb.randn(256, 512), bbb.randn(512, 512)
      local t0 = os.time()
      -- the load is looked at every 0.2 s; give it a few looks
      while os.time() - t0 < 4 and lowest == asked do
        for _ = 1, 20 do bbb.matmul(x, w) end
        lowest = math.min(lowest, bbb.threads_in_use())
      end
      assert.are.equal(asked, bbb.get_num_threads())   -- the asked-for count stays
    end)
    busy:stop(9)
    busy:wait()
    assert(ok, err)
    assert.is_true(lowest < asked, ("threads in use stayed %d beside a busy process"):format(lowest))
  end)

  it("BBB_FOLLOW_LOAD=0 keeps the count asked for", function()
    if cores < 2 then return pending("needs 2 cores") end
    local busy = assert(require("bbb.app.sys").start({ "yes" }, { stdout = "/dev/null" }))
    local out = os.tmpname()
    local script = ("bbb.set_num_threads(%d); local x, w = bbb.randn(256, 512), bbb.randn(512, 512); "
      .. "local low = 99; local t0 = os.time(); while os.time() - t0 < 2 do bbb.matmul(x, w); "
      .. "low = math.min(low, bbb.threads_in_use()) end; print('lowest ' .. low)"):format(cores)
    local ok = require("bbb.app.sys").run({ helpers.bbblua, "-e", script },
      { stdout = out, stderr = out, env = { BBB_FOLLOW_LOAD = "0" } })
    busy:stop(9)
    busy:wait()
    local text = helpers.read(out)
    os.remove(out)
    assert(ok, text)
    assert.truthy(text:find("lowest " .. cores, 1, true), text)
  end)
end)

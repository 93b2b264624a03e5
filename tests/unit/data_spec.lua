-- bbb.data: the IDX loaders on the real data sets, minibatch order and splits.
local bbb = require "bbb"
local data = require "bbb.data"

local function temp_dir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  return dir
end

-- A tiny IDX file of unsigned bytes: shape {n, ...} and values 0..255.
local function write_idx(path, shape, values)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack(">I4", 0x0800 + #shape))
  for _, d in ipairs(shape) do f:write(string.pack(">I4", d)) end
  f:write(string.char(table.unpack(values)))
  f:close()
end

-- x holds row i's own index, so a batch shows which rows it took.
local function indexed_dataset(n)
  return { x = bbb.arange(1, n + 1):reshape(n, 1), y = bbb.arange(1, n + 1), n = n }
end

local function batch_order(ds, size, opts)
  local seen = {}
  for _, xb in data.batches(ds, size, opts) do
    for _, v in ipairs(xb:reshape(-1):totable()) do seen[#seen + 1] = math.tointeger(v) end
  end
  return seen
end

describe("load_mnist", function()
  local ds = data.load_mnist { split = "test" }
  it("gives 10000 rows of 784 pixels scaled by 1/126", function()
    assert.are.same({ 10000, 784 }, ds.x:size())
    assert.are.equal(10000, ds.n)
    assert.are.same({ 10000 }, ds.y:size())
    assert.is_true(math.abs(ds.x:max():item() - 255 / 126) < 1e-5)
    assert.are.equal(0, -(-ds.x):max():item())   -- the smallest pixel
  end)
  it("labels digits 0..9 as classes 1..10, each present", function()
    local counts = {}
    for _, v in ipairs(ds.y:totable()) do counts[v] = (counts[v] or 0) + 1 end
    for c = 1, 10 do assert.is_true((counts[c] or 0) > 800, "class " .. c) end
    assert.are.equal(1, -(-ds.y):max():item())
    assert.are.equal(10, ds.y:max():item())
    assert.are.equal("0", ds.classes[1])
    assert.are.equal("9", ds.classes[10])
  end)
  it("honours scale and limit", function()
    local small = data.load_mnist { split = "train", scale = 1, limit = 7 }
    assert.are.same({ 7, 784 }, small.x:size())
    assert.are.equal(255, small.x:max():item())
    assert.are.equal(7, small.n)
  end)
  it("says where it looked when the files are missing", function()
    local dir = temp_dir()
    local ok, err = pcall(data.load_mnist, { root = dir })
    os.remove(dir)
    assert.is_false(ok)
    assert.truthy(err:find("data: MNIST not found in " .. dir .. " (run scripts/bootstrap)", 1, true), err)
  end)
  it("refuses a bad split or limit", function()
    assert.has_error(function() data.load_mnist { split = "valid" } end)
    assert.has_error(function() data.load_mnist { limit = 0 } end)
  end)
end)

describe("load_fashion_mnist", function()
  it("reads the gzipped files", function()
    local ds = data.load_fashion_mnist { split = "train", limit = 100 }
    assert.are.same({ 100, 784 }, ds.x:size())
    assert.are.same({ 100 }, ds.y:size())
    assert.are.equal(10, #ds.classes)
    assert.are.equal("Ankle boot", ds.classes[10])
    local labels = ds.y:totable()
    for i = 1, 100 do assert.is_true(labels[i] >= 1 and labels[i] <= 10) end
    assert.is_true(ds.x:max():item() <= 255 / 126 + 1e-6)
  end)
end)

describe("IDX pairs", function()
  it("reshape any image size to rows and reject mismatched counts", function()
    local dir = temp_dir()
    write_idx(dir .. "/t10k-images-idx3-ubyte", { 3, 2, 2 }, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 })
    write_idx(dir .. "/t10k-labels-idx1-ubyte", { 3 }, { 9, 0, 4 })
    local ds = data.load_mnist { root = dir, split = "test", scale = 1 }
    assert.are.same({ { 0, 1, 2, 3 }, { 4, 5, 6, 7 }, { 8, 9, 10, 11 } }, ds.x:totable())
    assert.are.same({ 10, 1, 5 }, ds.y:totable())
    write_idx(dir .. "/t10k-labels-idx1-ubyte", { 2 }, { 9, 0 })
    local ok, err = pcall(data.load_mnist, { root = dir, split = "test" })
    os.execute("rm -r '" .. dir .. "'")
    assert.is_false(ok)
    assert.truthy(err:find("holds 3 images but", 1, true), err)
    assert.truthy(err:find("holds 2 labels", 1, true), err)
  end)
end)

describe("batches", function()
  local ds = indexed_dataset(103)
  it("visit every row once, in order, without shuffling", function()
    local order = batch_order(ds, 10)
    assert.are.equal(103, #order)
    for i = 1, 103 do assert.are.equal(i, order[i]) end
  end)
  it("visit every row exactly once when shuffled", function()
    local order = batch_order(ds, 16, { shuffle = true, generator = bbb.Generator(5) })
    local seen = {}
    for _, v in ipairs(order) do
      assert.is_nil(seen[v], "row " .. v .. " twice")
      seen[v] = true
    end
    assert.are.equal(103, #order)
    local moved = 0
    for i = 1, 103 do if order[i] ~= i then moved = moved + 1 end end
    assert.is_true(moved > 50)
  end)
  it("repeat the order for the same seed, not for another", function()
    local a = batch_order(ds, 16, { shuffle = true, generator = bbb.Generator(5) })
    local b = batch_order(ds, 16, { shuffle = true, generator = bbb.Generator(5) })
    local c = batch_order(ds, 16, { shuffle = true, generator = bbb.Generator(6) })
    assert.are.same(a, b)
    assert.are_not.same(a, c)
  end)
  it("keep x and y rows together", function()
    for _, xb, yb in data.batches(ds, 8, { shuffle = true, generator = bbb.Generator(1) }) do
      assert.are.same(xb:reshape(-1):totable(), yb:totable())
    end
  end)
  it("count batches with and without drop_last", function()
    local sizes = {}
    for i, xb in data.batches(ds, 25, { drop_last = true }) do sizes[i] = xb:size()[1] end
    assert.are.same({ 25, 25, 25, 25 }, sizes)
    sizes = {}
    for i, xb in data.batches(ds, 25) do sizes[i] = xb:size()[1] end
    assert.are.same({ 25, 25, 25, 25, 3 }, sizes)
    assert.are.equal(5, data.num_batches(103, 25))
    assert.are.equal(4, data.num_batches(103, 25, true))
    assert.are.equal(4, data.num_batches(100, 25))
    assert.are.equal(0, data.num_batches(10, 25, true))
  end)
  it("refuse a bad batch size or data set", function()
    assert.has_error(function() data.batches(ds, 0) end)
    assert.has_error(function() data.batches(ds, 2.5) end)
    assert.has_error(function() data.batches({ x = 3 }, 4) end)
    assert.has_error(function() data.batches({ x = bbb.zeros(4, 2), y = bbb.zeros(3) }, 4) end)
  end)
end)

describe("split", function()
  it("gives the first n rows and the rest", function()
    local ds = indexed_dataset(10)
    ds.classes = { "a" }
    local first, rest = data.split(ds, 3)
    assert.are.equal(3, first.n)
    assert.are.equal(7, rest.n)
    assert.are.same({ 1, 2, 3 }, first.y:totable())
    assert.are.same({ { 4 } }, rest.x:narrow(1, 1, 1):totable())
    assert.are.equal(ds.classes, rest.classes)
  end)
  it("refuses a split that leaves a side empty", function()
    local ds = indexed_dataset(10)
    assert.error_matches(function() data.split(ds, 0) end, "split: n_first must be an integer in 1..9, got 0", 1, true)
    assert.has_error(function() data.split(ds, 10) end)
  end)
end)

describe("shift", function()
  -- Each image, moved by some (dy, dx) within the range, zeros coming in.
  local function moved_by(img, out, h, w, m)
    for dy = -m, m do
      for dx = -m, m do
        local same = true
        for r = 1, h do
          for c = 1, w do
            local sr, sc = r - dy, c - dx
            local want = (sr >= 1 and sr <= h and sc >= 1 and sc <= w) and img[(sr - 1) * w + sc] or 0
            if out[(r - 1) * w + c] ~= want then same = false break end
          end
          if not same then break end
        end
        if same then return dy, dx end
      end
    end
  end

  it("moves every image by its own offset within the range, zeros filling in", function()
    local h, w, m, B = 5, 7, 2, 40
    local x = bbb.rand({ B, h * w }, 1, 2, bbb.Generator(4))
    local y = data.shift(x, h, w, m, bbb.Generator(5))
    assert.are.same({ B, h * w }, { y:size(1), y:size(2) })
    local xs, ys, seen = x:totable(), y:totable(), {}
    for i = 1, B do
      local dy, dx = moved_by(xs[i], ys[i], h, w, m)
      assert.truthy(dy, "image " .. i .. " is not a shifted copy")
      seen[dy .. "," .. dx] = true
    end
    local kinds = 0
    for _ in pairs(seen) do kinds = kinds + 1 end
    assert.is_true(kinds > 5, "offsets vary between images")
  end)

  it("gives the same images for the same generator on 1 and 2 threads, and none changed at 0", function()
    local x = bbb.rand({ 300, 784 }, 0, 1, bbb.Generator(1))
    local old = bbb.get_num_threads()
    bbb.set_num_threads(1)
    local a = data.shift(x, 28, 28, 2, bbb.Generator(9))
    bbb.set_num_threads(2)
    local b = data.shift(x, 28, 28, 2, bbb.Generator(9))
    bbb.set_num_threads(old)
    assert.are.equal(0, (a - b):abs():max():item())
    assert.are.equal(0, (data.shift(x, 28, 28, 0, bbb.Generator(9)) - x):abs():max():item())
    assert.is_true((a - x):abs():max():item() > 0)
  end)

  it("refuses bad sizes and ranges, naming them", function()
    local x = bbb.zeros(2, 784)
    assert.has_error(function() data.shift(x, 28, 27, 2) end,
      "shift: expected images of 28 x 27, got a tensor of 784 values per row")
    assert.has_error(function() data.shift(x, 28, 28, 28) end, "shift: max_shift must be an integer in 0..27, got 28")
    assert.has_error(function() data.shift(x, 28, 28, 1.5) end, "shift: max_shift must be an integer in 0..27, got 1.5")
    assert.has_error(function() data.shift(x, 0, 28, 1) end, "shift: height and width must be positive integers, got 0 and 28")
  end)
end)

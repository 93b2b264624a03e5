-- The IDX reader trusts nothing in a file: sizes are checked against the file
-- (raw) or the gzip trailer before allocating, gzip output is capped, and each
-- kind of bad file gets its own message.
local bbb = require "bbb"
local core = bbb.core

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p '" .. dir .. "'")

local function be32(v)
  return string.char((v >> 24) & 255, (v >> 16) & 255, (v >> 8) & 255, v & 255)
end

-- An IDX header of unsigned bytes with the given sizes.
local function header(sizes)
  local h = { "\0\0\8", string.char(#sizes) }
  for _, s in ipairs(sizes) do h[#h + 1] = be32(s) end
  return table.concat(h)
end

local function write(name, bytes)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

local function gzip(name, bytes)
  local raw = write(name .. ".raw", bytes)
  assert(os.execute(("gzip -c -n '%s' > '%s/%s'"):format(raw, dir, name)))
  return dir .. "/" .. name
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local errors_with = require("helpers").errors_with

-- 3 images of 2x2 and their bytes
local pixels = string.char(0, 1, 2, 3, 10, 20, 30, 40, 252, 253, 254, 255)
local good = header { 3, 2, 2 } .. pixels

describe("IDX reader", function()
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("reads raw and gzipped files alike, with scale, offset and limit", function()
    for _, path in ipairs { write("good", good), gzip("good.gz", good) } do
      local t = core.load_idx(path, 0.5, 1)
      assert.are.same({ 3, 2, 2 }, { t:size(1), t:size(2), t:size(3) })
      assert.are.same({ { 1, 1.5 }, { 2, 2.5 } }, t:totable()[1])
      assert.are.equal(255 * 0.5 + 1, t:totable()[3][2][2])
      local two = core.load_idx(path, 1, 0, 2)
      assert.are.equal(2, two:size(1))
      assert.are.same({ { 10, 20 }, { 30, 40 } }, two:totable()[2])
    end
  end)

  it("checks a raw file's declared size against the file before allocating", function()
    -- 16 bytes declaring 60000 x 28 x 28 images
    local before = bbb.bytes_allocated()
    errors_with(function() core.load_idx(write("liar", header { 60000, 28, 28 })) end,
      "declares 47040000 data bytes, so 47040016 bytes in all, but holds 16")
    assert.are.equal(before, bbb.bytes_allocated())
    errors_with(function() core.load_idx(write("long", good .. "xx")) end,
      "declares 12 data bytes, so 28 bytes in all, but holds 30")
    errors_with(function() core.load_idx(write("short", good:sub(1, -3))) end,
      "declares 12 data bytes, so 28 bytes in all, but holds 26")
  end)

  it("checks a gzip stream's size against its trailer, and caps it", function()
    errors_with(function() core.load_idx(gzip("liar.gz", header { 60000, 28, 28 })) end,
      "declares 47040016 bytes in all, but its gzip trailer says 16")
    errors_with(function() core.load_idx(gzip("good2.gz", good), 1, 0, -1, 11) end,
      "declares more data bytes than the limit of 11 (max_bytes): size 2 in dimension 3")
    assert.are.equal(3, core.load_idx(gzip("good3.gz", good), 1, 0, -1, 12):size(1))
    -- a header claiming more than the 2 GiB default, in a tiny file
    errors_with(function() core.load_idx(gzip("huge.gz", header { 1 << 16, 1 << 15, 2 })) end,
      "declares more data bytes than the limit of 2147483648 (max_bytes): size 2 in dimension 3")
  end)

  it("gives each kind of bad file its own message", function()
    errors_with(function() core.load_idx(dir) end, "is a directory, not a file")
    errors_with(function() core.load_idx(dir .. "/nope") end, "cannot open '" .. dir .. "/nope': No such file")
    errors_with(function() core.load_idx(write("empty", "")) end, "is too short for an IDX header (0 bytes)")
    errors_with(function() core.load_idx(write("text", "hello world")) end, "is not an IDX file of unsigned bytes")
    errors_with(function() core.load_idx(write("cut", "\0\0\8\3\0\0")) end, "ends inside its header")
    -- a corrupt stream: flip bytes inside the deflate data
    local gz = read(gzip("c.gz", good .. string.rep("\7", 200)))
    local bad = gz:sub(1, 12) .. string.char(255 - gz:byte(13), 255 - gz:byte(14)) .. gz:sub(15)
    errors_with(function() core.load_idx(write("corrupt.gz", bad)) end, "corrupt gzip stream")
    -- a cut one
    local cut = read(gzip("t.gz", good))
    errors_with(function() core.load_idx(write("cut.gz", cut:sub(1, #cut - 12))) end, "gzip")
  end)

  it("refuses trailing bytes after a gzip stream, and a path with a NUL byte", function()
    local gz = read(gzip("tr.gz", good))
    -- keep the trailer last so the size check passes and the garbage is found
    errors_with(function() core.load_idx(write("trailing.gz", gz .. "garbage" .. gz:sub(-4))) end,
      "has trailing bytes after its gzip stream")
    errors_with(function() core.load_idx(write("twice.gz", gz .. gz)) end, "trailing bytes after its gzip stream")
    errors_with(function() core.load_idx(dir .. "/good\0.png") end, "bbb.core.load_idx: argument 1 (path): the path contains a NUL byte")
  end)

  it("load_mnist names a label file with two dimensions", function()
    local root = dir .. "/m"
    os.execute("mkdir -p '" .. root .. "'")
    local f = assert(io.open(root .. "/train-images-idx3-ubyte", "wb"))
    f:write(good)
    f:close()
    f = assert(io.open(root .. "/train-labels-idx1-ubyte", "wb"))
    f:write(header { 3, 2 } .. string.char(1, 2, 3, 4, 5, 6))
    f:close()
    errors_with(function() bbb.data.load_mnist { root = root } end,
      "train-labels-idx1-ubyte is not a label file: it has 2 dimensions (3x2), labels have 1")
    f = assert(io.open(root .. "/train-labels-idx1-ubyte", "wb"))
    f:write(header { 3 } .. string.char(1, 2, 3))
    f:close()
    local ds = bbb.data.load_mnist { root = root }
    assert.are.equal(3, ds.n)
    assert.are.same({ 2, 3, 4 }, ds.y:totable())
    errors_with(function() bbb.data.load_mnist { root = root, max_bytes = 0 } end,
      "load_mnist: max_bytes must be a positive integer, got 0")
  end)
end)

-- The R data reader (src/core/rdata.c) and bbb.data.load_mushroom: the known
-- facts of the real Mushroom table, and errors (never crashes) for
-- truncated, corrupted and hostile files.
local bbb = require "bbb"
local core = require "bbb.core"
local W = require "rdata_writer"

local root = os.getenv("BBB_ROOT") or "."
local MUSHROOM = root .. "/data/mushroom/Mushroom.rda"

local function read_file(path)
  local f = assert(io.open(path, "rb"), path .. " is missing: run scripts/bootstrap")
  local s = f:read("a")
  f:close()
  return s
end

local function parse_error(bytes)
  local ok, err = pcall(core.rdata_frame_bytes, bytes)
  assert.is_false(ok, "expected an error")
  assert.is_string(err)
  return err
end

local function expect_error(bytes, pattern)
  local err = parse_error(bytes)
  assert.truthy(err:find(pattern, 1, true), ("expected %q in %q"):format(pattern, err))
end

describe("load_mushroom", function()
  local m = bbb.data.load_mushroom{ path = MUSHROOM }

  it("has 8,124 rows: 4,208 edible and 3,916 poisonous", function()
    assert.are.equal(8124, m.n)
    assert.are.same({ 8124, 117 }, m.x:size())
    local edible = 0
    for i = 1, m.n do if m.edible[i] then edible = edible + 1 end end
    assert.are.equal(4208, edible)
    assert.are.equal(3916, m.n - edible)
    assert.are.equal(4208 * 1 + 3916 * 2, m.y:sum():item())
  end)

  it("one-hot encodes 22 attributes in 117 columns, NA as its own level", function()
    assert.are.equal(22, #m.attributes)
    assert.are.equal(117, #m.feature_names)
    local rows = m.x:sum(2):totable()
    for i = 1, m.n do assert.are.equal(22, rows[i]) end
    local col
    for j, name in ipairs(m.feature_names) do
      if name == "stalk-root=NA" then col = j end
    end
    assert.is_number(col)
    assert.are.equal(2480, m.x:narrow(2, col, 1):sum():item())
    -- NA is only a level where values are missing
    for k, a in ipairs(m.attributes) do
      if a ~= "stalk-root" then assert.are_not.equal("NA", m.levels[k][#m.levels[k]]) end
    end
  end)

  it("reads the raw frame: 23 factors, codes 1..levels and 0 for NA", function()
    local f = core.rdata_frame(MUSHROOM)
    assert.are.equal("Mushroom", f.name)
    assert.are.equal(23, #f.columns)
    assert.are.equal("class", f.columns[1].name)
    assert.are.same({ "edible", "poisonous" }, f.columns[1].levels)
    assert.are.same({ 8124, 23 }, f.codes:size())
  end)

  it("names a missing file", function()
    local ok, err = pcall(bbb.data.load_mushroom, { path = "/nonexistent/Mushroom.rda" })
    assert.is_false(ok)
    assert.truthy(err:find("load_mushroom: /nonexistent/Mushroom.rda not found (run scripts/bootstrap)", 1, true), err)
  end)

  it("a truncated file is an error", function()
    local bytes = read_file(MUSHROOM)
    for _, n in ipairs{ 0, 5, 12, 100, #bytes // 2, #bytes - 1 } do
      local err = parse_error(bytes:sub(1, n))
      assert.truthy(err:find("rdata:", 1, true), err)
    end
    expect_error(bytes:sub(1, #bytes // 2), "truncated xz stream")
  end)

  it("a corrupted xz stream is an error", function()
    local bytes = read_file(MUSHROOM)
    local mid = #bytes // 2
    local bad = bytes:sub(1, mid - 1) .. string.char(bytes:byte(mid) ~ 0x5a) .. bytes:sub(mid + 1)
    expect_error(bad, "corrupted xz stream")
    -- a damaged file on disk names the file
    local tmp = os.tmpname()
    local f = assert(io.open(tmp, "wb")); f:write(bad); f:close()
    local ok, err = pcall(bbb.data.load_mushroom, { path = tmp })
    os.remove(tmp)
    assert.is_false(ok)
    assert.truthy(err:find("load_mushroom: rdata: corrupted xz stream", 1, true), err)
    assert.truthy(err:find(tmp, 1, true), err)
  end)
end)

describe("rdata reader", function()
  it("refuses a long-vector length beyond 2^63 (found by fuzzing: the signed shift overflowed)", function()
    local root = os.getenv("BBB_ROOT") or "."
    expect_error(read_file(root .. "/tests/fuzz/corpus/rdata/long-length-overflow"),
      "vector length 18446744073709551615 at byte 40 is not a valid length")
  end)
  it("reads a small frame, plain and xz-compressed alike", function()
    for _, bytes in ipairs{ W.tiny(), W.xz(W.tiny()) } do
      local f = core.rdata_frame_bytes(bytes)
      assert.are.equal("Tiny", f.name)
      assert.are.equal(3, f.n_rows)
      assert.are.same({ "class", "root" }, { f.columns[1].name, f.columns[2].name })
      assert.are.same({ "bulbous", "club" }, f.columns[2].levels)
      assert.are.same({ { 1, 2 }, { 2, 0 }, { 1, 1 } }, f.codes:totable())
    end
  end)

  it("every truncation of a plain image is an error", function()
    local bytes = W.tiny()
    for n = 0, #bytes - 1 do
      local ok, err = pcall(core.rdata_frame_bytes, bytes:sub(1, n))
      assert.is_false(ok, "prefix of " .. n .. " bytes parsed")
      assert.truthy(err:find("rdata:", 1, true), err)
    end
  end)

  it("rejects other formats and versions by name", function()
    expect_error("RDA2\nA\n2\n", "only XDR format version 2 (RDX2) is supported, found 'RDA2'")
    expect_error(W.rda("x", W.NIL, 3), "serialization version 3, only version 2 is supported")
    expect_error("hello world", "not an R data file")
    expect_error("\x1f\x8b\x08\x00", "gzip-compressed R data is not supported")
  end)

  it("huge lengths are errors before anything is allocated", function()
    local head = "RDX2\nX\n" .. W.int(2) .. W.int(0) .. W.int(0) .. W.int(2 | 1 << 10) .. W.sym("x")
    expect_error(head .. W.int(13) .. W.int(0x7fffffff), "vector length 2147483647 at byte")
    expect_error(head .. W.int(19) .. W.int(-1) .. W.int(0x7fffffff) .. W.int(-1), "exceeds the")
    expect_error(head .. W.int(16) .. W.int(1) .. W.int(9) .. W.int(0x7ffffff0), "string length")
    expect_error(head .. W.int(13) .. W.int(-7), "vector length -7")
  end)

  it("names the unsupported types it finds", function()
    local function with(item) return W.rda("x", item) end
    expect_error(with(W.int(3) .. W.NIL), "unsupported R object: closure (type 3)")
    expect_error(with(W.int(14) .. W.int(1) .. string.rep("\0", 8)), "unsupported R object: double vector (type 14)")
    expect_error(with(W.int(4)), "environment (type 4)")
    expect_error(with(W.int(255 | 7 << 8)), "reference 7 at byte")
    -- a frame whose column is not a factor
    local frame = W.frame({ { name = "a", raw = W.intsxp{ 1, 2 } } }, 2)
    expect_error(with(frame), "column 1 ('a') is not a factor (found: integer vector without factor class and levels)")
    expect_error(with(W.intsxp{ 1 }), "object 'x' is not a data frame (found: integer vector)")
    expect_error(with(W.vecsxp{}), "object 'x' is not a data frame (found: list without class data.frame)")
  end)

  it("deep nesting is an error", function()
    local item = W.NIL
    for _ = 1, 200 do item = W.vecsxp{ item } end
    expect_error(W.rda("x", item), "nested deeper than 64")
  end)

  it("checks codes against the levels and column lengths against the rows", function()
    expect_error(W.rda("x", W.frame({ { name = "a", codes = { 1, 3 }, levels = { "p", "q" } } }, 2)),
      "column 1 ('a') row 2 has code 3 outside 1..2")
    expect_error(W.rda("x", W.frame({ { name = "a", codes = { 1, 2, 1 }, levels = { "p", "q" } } }, 2)),
      "column 1 ('a') has 3 rows, the frame 2")
  end)

  it("random damage to a valid image gives errors or frames, never crashes", function()
    local bytes = W.tiny()
    local g = bbb.Generator(11)
    local u = bbb.rand({ 2000 }, 0, 1, g):totable()
    for k = 1, #u, 2 do
      local pos = 1 + math.floor(u[k] * #bytes)
      local b = string.char(math.floor(u[k + 1] * 256))
      local ok, res = pcall(core.rdata_frame_bytes, bytes:sub(1, pos - 1) .. b .. bytes:sub(pos + 1))
      if ok then assert.is_table(res) else assert.truthy(res:find("rdata:", 1, true), res) end
    end
  end)
end)

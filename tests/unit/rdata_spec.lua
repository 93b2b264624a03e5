-- The R data reader (src/io/rdata.c) and bbb.data.load_mushroom: the known
-- facts of the real Mushroom table, and errors (never crashes) for
-- truncated, corrupted and hostile files.
local bbb = require "bbb"
local core = require "bbb.core"
local W = require "rdata_writer"
local H = require "helpers"

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
  it("reads a small frame, plain, gzip- and xz-compressed alike", function()
    for _, bytes in ipairs{ W.tiny(), W.gzip(W.tiny()), W.xz(W.tiny()) } do
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
    expect_error("RDA2\nA\n2\n", "only XDR format versions 2 and 3 (RDX2, RDX3) are supported, found 'RDA2'")
    expect_error(W.rda("x", W.NIL, 4), "serialization version 4, only versions 2 and 3 are supported")
    expect_error("RDX2\nA\n", "only the XDR (binary big-endian) serialization is supported, found ASCII")
    expect_error("hello world", "not an R data file")
    expect_error("\x1f\x8b\x08\x00", "rdata: the gzip stream: truncated zlib stream")
    expect_error("BZh91AY", "bzip2-compressed R data is not supported (only gzip and xz)")
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
    expect_error(with(W.int(15) .. W.int(1) .. string.rep("\0", 16)), "unsupported R object: complex vector (type 15)")
    expect_error(with(W.int(4)), "environment (type 4)")
    expect_error(with(W.int(255 | 7 << 8)), "reference 7 at byte")
    -- a frame whose column is not a factor
    local frame = W.frame({ { name = "a", raw = W.vecsxp{ W.NIL, W.NIL } } }, 2)
    expect_error(with(frame), "column 1 ('a') is a list, not numbers, a factor or strings")
    local nolev = W.frame({ { name = "f", raw = W.intsxp({ 1, 2 }, { { "class", W.strsxp{ "factor" } } }, true) } }, 2)
    expect_error(with(nolev), "column 1 ('f') is a factor without levels")
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

local function mixed_frame(rownames)
  return W.frame({
    { name = "x", raw = W.realsxp{ 1.5, -2.25, 0 / 0 } },
    { name = "n", raw = W.intsxp{ 7, W.NA, 9 } },
    { name = "s", raw = W.strsxp{ "b", "a", "b" } },
    { name = "f", codes = { 2, 1, 2 }, levels = { "lo", "hi" } },
  }, 3)
end

describe("rdata reader: numbers, strings, version 3, lazy-load databases", function()
  it("reads double, integer and string columns (NA as NaN or code 0)", function()
    local f = core.rdata_frame_bytes(W.rda("m", mixed_frame()))
    assert.are.same({ true, true, false, false }, { f.columns[1].numeric, f.columns[2].numeric,
                                                    f.columns[3].numeric, f.columns[4].numeric })
    assert.are.same({ "a", "b" }, f.columns[3].levels)
    local t = f.codes:totable()
    assert.are.same({ 1.5, 7, 2, 2 }, t[1])
    assert.are.same({ -2.25, 1, 1 }, { t[2][1], t[2][3], t[2][4] })
    assert.is_true(t[2][2] ~= t[2][2] and t[3][1] ~= t[3][1])   -- NA integer and NaN double
  end)

  it("reads version 3 (native encoding, ALTREP row names) and tibbles", function()
    local tib = W.vecsxp({ W.realsxp{ 1, 2 }, W.intsxp{ 3, 4 } }, {
      { "row.names", W.compact_intseq(2, 1) },
      { "names", W.strsxp{ "a", "b" } },
      { "class", W.strsxp{ "tbl_df", "tbl", "data.frame" } },
    }, true)
    local f = core.rdata_frame_bytes(W.rda3("tib", tib))
    assert.are.equal(2, f.n_rows)
    assert.are.same({ { 1, 3 }, { 2, 4 } }, f.codes:totable())
    expect_error(W.rda3("x", W.int(238) .. W.int(2) .. W.sym("deferred_string") .. W.NIL .. W.NIL .. W.NIL),
      "unsupported ALTREP class 'deferred_string'")
    expect_error(W.rda3("x", W.int(238) .. W.int(2) .. W.sym("compact_intseq") .. W.NIL ..
      W.realsxp{ 1e12, 1, 1 } .. W.NIL), "compact_intseq at byte")
  end)

  it("reads a lazy-load database with raw LZMA2 and uncompressed chunks, by name", function()
    for _, ty in ipairs { "Z", "0" } do
      local rdx, rdb = W.lazy({ { "one", W.frame({ { name = "a", raw = W.realsxp{ 3, 4 } } }, 2) },
                                { "two", mixed_frame() } }, ty)
      local f = core.rdata_lazy_bytes(rdx, rdb, "two")
      assert.are.equal("two", f.name)
      assert.are.same({ 3, 4 }, f.codes:size())
      assert.are.same({ { 3 }, { 4 } }, core.rdata_lazy_bytes(rdx, rdb, "one").codes:totable())
      H.errors_with(function() core.rdata_lazy_bytes(rdx, rdb, "three") end, "no data set 'three' here (there are: one, two)")
    end
  end)

  it("hostile lazy-load databases are errors, never crashes", function()
    local rdx, rdb = W.lazy({ { "d", mixed_frame() } }, "Z")
    local function fails(x, b, want) H.errors_with(function() core.rdata_lazy_bytes(x, b, "d") end, want) end
    fails(rdx, rdb:sub(1, #rdb - 3), "outside the")
    fails(rdx:sub(1, #rdx // 2), rdb, "truncated zlib stream")
    fails("not gzip", rdb, "corrupted zlib stream")
    fails(rdx, rdb:sub(1, 4) .. "Q" .. rdb:sub(6), "unknown lazy-load chunk type 0x51")
    fails(rdx, rdb:sub(1, 4) .. "2" .. rdb:sub(6), "bzip2-compressed lazy-load chunks are not supported")
    fails(rdx, W.int(0x7fffffff) .. rdb:sub(5), "declares 2147483647 bytes")
    fails(rdx, rdb:sub(1, 20) .. ("\255"):rep(8) .. rdb:sub(29), "LZMA2")
    local bad_index = W.lazy({}, "0")
    H.errors_with(function() core.rdata_lazy_bytes(bad_index, "", "d") end, "no data set 'd' here")
    -- every truncation and random damage of the database
    for n = 0, #rdb - 1, 7 do
      local ok, err = pcall(core.rdata_lazy_bytes, rdx, rdb:sub(1, n), "d")
      assert.is_false(ok)
      assert.truthy(err:find("rdata:", 1, true), err)
    end
    local g = bbb.Generator(5)
    local u = bbb.rand({ 600 }, 0, 1, g):totable()
    for k = 1, #u, 2 do
      local pos = 1 + math.floor(u[k] * #rdb)
      local b = rdb:sub(1, pos - 1) .. string.char(math.floor(u[k + 1] * 256)) .. rdb:sub(pos + 1)
      local ok, res = pcall(core.rdata_lazy_bytes, rdx, b, "d")
      if not ok then assert.truthy(res:find("rdata:", 1, true), res) end
    end
  end)
end)

describe("load_r on Debian's R packages", function()
  local R = root .. "/data/r"
  it("concrete (r-cran-modeldata, xz lazy-load): 1030 rows, 8 inputs", function()
    local d = bbb.data.load_r(R .. "/modeldata", "concrete", { target = "compressive_strength" })
    assert.are.same({ 1030, 8 }, d.x:size())
    assert.are.equal("cement", d.feature_names[1])
    assert.near(35.818, d.y:mean():item(), 1e-3)
  end)

  it("Boston (r-cran-mass, zlib lazy-load): 506 rows, medv mean 22.53", function()
    local d = bbb.data.load_r(R .. "/MASS", "Boston", { target = "medv" })
    assert.are.same({ 506, 13 }, d.x:size())
    assert.near(22.5328, d.y:mean():item(), 1e-3)
    assert.is_false(d.target.categorical)
  end)

  it("mlbench .rda files: factors one-hot, NA refused or dropped", function()
    H.errors_with(function() bbb.data.load_r(R .. "/mlbench", "BreastCancer", { target = "Class" }) end,
      "row 24, column 7 ('Bare.nuclei'): missing value (NA)")
    local d = bbb.data.load_r(R .. "/mlbench", "BreastCancer", { target = "Class", ignore = "Id", drop_missing = true })
    assert.are.same({ 683, 16 }, { d.n, d.n_dropped })
    assert.are.same({ "benign", "malignant" }, d.classes)
    local s = bbb.data.load_r(R .. "/mlbench", "Sonar", { target = "Class" })
    assert.are.same({ 208, 60 }, s.x:size())
    H.errors_with(function() bbb.data.load_r(R .. "/mlbench", "Nope") end, "no Nope.rda nor lazy-load database")
    H.errors_with(function() bbb.data.load_r(R .. "/MASS", "Boston", { target = "price" }) end,
      "target column 'price' is not in the data set")
  end)
end)

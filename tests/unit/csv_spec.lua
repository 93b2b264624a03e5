-- bbb.data.read_csv (src/io/csvread.c on libcsv): numbers against strtod
-- in float64, categories one-hot with their levels, RFC 4180 quoting, and
-- an error naming the row and column for every malformed input.
local bbb = require "bbb"
local core = require "bbb.core"
local H = require "helpers"

local function read(text, opts)
  opts = opts or {}
  opts.text = true
  return bbb.data.read_csv(text, opts)
end

local function fails(text, want, opts)
  H.errors_with(function() read(text, opts) end, want)
end

describe("read_csv numbers", function()
  it("parses to the float nearest the decimal, as strtod then rounding would", function()
    local cases = { "0", "-0", "1", "0.1", "3.14159265358979", "1e-45", "1.4e-45", "3.4028234e38",
      "-1.17549435e-38", "123456789", "16777217", "0.30000001192092896", "9.999999e-11", "7e10",
      "1E5", "+2.5", ".5", "5.", "0.000001", "2.5e-7", "99999999999999999999" }
    for _, s in ipairs(cases) do
      local want = string.unpack("f", string.pack("f", tonumber(s)))   -- float64, then to float32
      local got = core.csv_parse_float(s)
      assert.are.equal(want, got, s)
    end
    -- random decimals on the fast path and off it
    local g = bbb.Generator(3)
    local u = bbb.rand({ 2000 }, -1, 1, g):totable()
    for i, v in ipairs(u) do
      local s = ("%." .. (1 + i % 12) .. "e"):format(v * 10 ^ ((i % 40) - 20))
      assert.are.equal(string.unpack("f", string.pack("f", tonumber(s))), core.csv_parse_float(s), s)
    end
  end)

  it("refuses what is not a plain decimal number in the float range", function()
    for _, s in ipairs { "", "-", ".", "e5", "1e", "1e+", "0x10", "nan", "inf", "-Infinity", "1,5",
                         "1.2.3", "12a", " 1", "1e39", "-4e38", "1e99999999999" } do
      assert.is_nil(core.csv_parse_float(s), s)
    end
  end)
end)

describe("read_csv tables", function()
  it("reads numeric and categorical columns, one-hot with levels kept", function()
    local d = read("a,colour,b,y\n1,red,2.5,yes\n3,blue,-4,no\n5,red,6e1,yes\n", { target = "y" })
    assert.are.same({ 3, 4 }, d.x:size())
    assert.are.same({ { 1, 1, 0, 2.5 }, { 3, 0, 1, -4 }, { 5, 1, 0, 60 } }, d.x:totable())
    assert.are.same({ "a", "colour=red", "colour=blue", "b" }, d.feature_names)
    assert.are.same({ "red", "blue" }, d.columns[2].levels)
    assert.are.same({ 2, 2 }, { d.columns[2].first, d.columns[2].width })
    assert.are.same({ "yes", "no" }, d.classes)
    assert.are.same({ 1, 2, 1 }, d.y:totable())
  end)

  it("keeps a numeric target as values and reads other delimiters, no header", function()
    local d = read("1;2;0.5\n3;4;1.5\n", { delimiter = ";", header = false, target = "V3" })
    assert.are.same({ { 1, 2 }, { 3, 4 } }, d.x:totable())
    assert.are.same({ 0.5, 1.5 }, d.y:totable())
    assert.is_false(d.target.categorical)
  end)

  it("keeps a numeric target's values as doubles too, every digit float32 rounds away", function()
    local ds = read("x,y\n1,100000001.25\n2,NA\n3,-0.1\n", { target = "y", keep_missing = true })
    assert.are.equal(100000001.25, ds.y_exact[1])
    assert.is_true(ds.y_exact[2] ~= ds.y_exact[2])
    assert.are.equal(-0.1, ds.y_exact[3])
    assert.are.equal(100000000, ds.y:totable()[1])   -- the float32 the tensor holds
    -- dropped rows take no place
    ds = read("x,y\n1,5.5\nNA,7\n3,9.25\n", { target = "y", drop_missing = true })
    assert.are.same({ 5.5, 9.25 }, ds.y_exact)
    assert.is_nil(read("x,y\n1,a\n2,b\n", { target = "y" }).y_exact)
  end)
  it("follows RFC 4180: quoted delimiters, doubled quotes, line breaks, CRLF", function()
    local d = read('name,v\r\n"a, b",1\r\n"say ""hi""",2\r\n"two\nlines",3\r\n')
    assert.are.same({ "a, b", 'say "hi"', "two\nlines" }, d.columns[1].levels)
    assert.are.same({ 1, 2, 3 }, d.x:narrow(2, 4, 1):reshape(3):totable())
  end)

  it("reads numbers as categories when asked, ignores columns, skips a BOM", function()
    local d = read("\239\187\191id,zip,v\n1,75001,2\n2,10115,3\n3,75001,4\n", { ignore = "id", categorical = { "zip" } })
    assert.are.same({ "zip=75001", "zip=10115", "v" }, d.feature_names)
  end)

  it("drops rows with missing values only when asked, and counts them", function()
    fails("a,b\n1,x\n,y\n3,z\n", "row 2, column 1 ('a'): missing value (an empty field)")
    fails("a,b\n1,x\n2,NA\n", "row 2, column 2 ('b'): missing value 'NA'")
    fails("a,b\n1,x\n2,?\n", "row 2, column 2 ('b'): missing value '?'")
    local d = read("a,b\n1,x\n,y\n3,z\n4,NA\n", { drop_missing = true })
    assert.are.equal(2, d.n)
    assert.are.equal(2, d.n_dropped)
    assert.are.same({ "x", "z" }, d.columns[2].levels)   -- y came from a dropped row only
    local e = read("a,b\n1,NA\n2,-\n3,x\n", { na = { "-" }, drop_missing = true })
    assert.are.same({ 2, 1 }, { e.n, e.n_dropped })
    assert.are.same({ "NA", "x" }, e.columns[2].levels)
  end)

  it("maps onto a trained model's levels; an unseen category is an error naming it", function()
    local lv = { colour = { "red", "blue" } }
    local d = read("colour,v\nblue,1\nred,2\n", { levels = lv })
    assert.are.same({ { 0, 1, 1 }, { 1, 0, 2 } }, d.x:totable())
    fails("colour,v\nred,1\ngreen,2\n", "column 'colour': category 'green' (row 2) was never seen in training", { levels = lv })
  end)
end)

describe("read_csv malformed input", function()
  it("ragged rows", function()
    fails("a,b,c\n1,2,3\n4,5\n", "row 2 has 2 fields, the header 3")
    fails("a,b\n1,2\n3,4,5\n", "row 2 has 3 fields, the header 2")
    fails("1,2\n3\n", "row 2 has 1 field, the first row 2", { header = false })
  end)

  it("bad numbers, naming row, column and value", function()
    fails("a,b\n1,2\n3,4x\n", "row 2, column 2 ('b'): bad number")
    fails("a,b\n1,2\n3,1e39\n", "'1e39'")
    fails("a,b\n1,2\n3,0x1F\n", "'0x1F'")
  end)

  it("a stray cell is an error wherever it stands, the first row too", function()
    local rows = "\n2,3\n4,5\n6,7\n"
    for _, bad in ipairs { "12.5x", "nan", '"1,234"' } do
      fails("a,b\n" .. bad .. ",1" .. rows, "column 1 ('a') holds numbers in 3 rows, but row 1 holds '"
        .. bad:gsub('"', "") .. "', which is not a number")
      fails("a,b\n1,2" .. rows:gsub("4,5", bad .. ",5"), "row 3, column 1 ('a'): bad number")
    end
    -- a number no float holds is refused where it stands, never read as a category
    for _, big in ipairs { "1e39", "-1e300" } do
      fails("a,b\n" .. big .. ",1" .. rows, "row 1, column 1 ('a'): a number beyond float32's range")
      fails("a,b\n1,2" .. rows:gsub("4,5", big .. ",5"), "row 3, column 1 ('a'): a number beyond float32's range")
    end
    -- a target column too: no class per distinct number
    fails("x,y\n1,12.5x\n2,3\n4,5\n", "column 2 ('y') holds numbers in 2 rows", { target = "y" })
    -- categories stay categories, and a column named categorical takes numbers as levels
    local ds = read("a,b\nred,1\n2,3\ngreen,5\nblue,6\n")
    assert.is_true(ds.columns[1].categorical)
    ds = read("a,b\n12.5x,1\n2,3\n4,5\n", { categorical = { "a" } })
    assert.are.same({ "12.5x", "2", "4" }, ds.columns[1].levels)
  end)

  it("a header only, an empty file, and every row dropped", function()
    fails("a,b,c\n", "no data rows after the header")
    fails("", "the file is empty")
    fails("a,b\n,1\n2,\n", "every row has a missing value (2 dropped)", { drop_missing = true })
  end)

  it("broken header: empty and repeated names, unknown columns in options", function()
    fails("a,,c\n1,2,3\n", "header: column 2 has no name")
    fails("a,b,a\n1,2,3\n", "header: column 3: the name 'a' is used twice")
    fails("a,b\n1,2\n", "target column 'z' is not in the header", { target = "z" })
    fails("a,b\n1,2\n", "ignored column 'q' is not in the header", { ignore = { "q" } })
    fails("a,b\n1,2\n", "every column is ignored", { ignore = { "a", "b" } })
  end)

  it("malformed quoting and an unclosed quote", function()
    fails('a,b\n1,"2"x\n', "row 1: malformed quoting")
    fails('a,b\n1,2\n3,"4\n', "row 2: a quoted field is not closed at the end of the file")
  end)

  it("huge fields and too many levels", function()
    fails("a,b\n1," .. ("x"):rep(3 << 20) .. "\n", "a field longer than 1048576 bytes")
    local rows = { "id,v" }
    for i = 1, 1100 do rows[#rows + 1] = "u" .. i .. "," .. i end
    fails(table.concat(rows, "\n"), "column 1 ('id') has more than 1000 distinct values at row 1001")
  end)

  it("non-UTF-8 text and NUL bytes, shown escaped", function()
    fails("a,b\n1,caf\233\n", "row 1, column 2 ('b'): invalid UTF-8 in 'caf\\xe9'")
    fails("a,\255\n1,2\n", "header, column 2: invalid UTF-8 in '\\xff'")
    fails("a,b\n1,x\0y\n", "a NUL byte in 'x\\x00y'")
    fails("a,b\n1,\237\160\128\n", "invalid UTF-8")   -- a UTF-16 surrogate
  end)

  it("bad options are errors naming the option", function()
    H.errors_with(function() bbb.data.read_csv("x.csv", { delim = ";" }) end, "unknown option 'delim'")
    H.errors_with(function() read("a\n1\n", { delimiter = ";;" }) end, "delimiter must be one character")
    H.errors_with(function() read("a\n1\n", { delimiter = '"' }) end, "the delimiter and the quote are the same")
    H.errors_with(function() read("a\n1\n", { categorical = { 1 } }) end, "categorical[1] must be a string")
    H.errors_with(function() bbb.data.read_csv("/nonexistent/x.csv") end, "cannot open '/nonexistent/x.csv'")
  end)

  it("the fuzz seeds all parse or fail cleanly", function()
    local dir = H.root .. "/tests/fuzz/corpus/csv/"
    local p = assert(io.popen("ls " .. H.q(dir)))
    local n = 0
    for name in p:lines() do
      local f = assert(io.open(dir .. name, "rb"))
      local s = f:read("a")
      f:close()
      pcall(core.read_csv_string, s, { target = nil })
      n = n + 1
    end
    p:close()
    assert.is_true(n >= 8)
  end)
end)

describe("read_csv inputs that are not files", function()
  it("refuses a FIFO at once instead of waiting on it", function()
    local path = os.tmpname()
    os.remove(path)
    assert(os.execute("mkfifo '" .. path .. "'"))
    local ok, err = pcall(bbb.data.read_csv, path)
    os.remove(path)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("is not a regular file (it is a fifo)", 1, true), err)
  end)
end)

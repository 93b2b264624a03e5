-- bbb.plot: real PNG and SVG files through gnuplot, dumb-terminal text, errors.
local bbb = require "bbb"
local plot = require "bbb.plot"

local function temp_dir()
  local dir = os.tmpname()
  os.remove(dir)
  return dir
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function assert_error_has(fn, text)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  assert.truthy(tostring(err):find(text, 1, true), tostring(err))
end

describe("plot", function()
  local dir = temp_dir()   -- does not exist yet: the first plot creates it
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  local x = bbb.linspace(0, 3, 40)
  local y = x:tanh()

  it("writes a PNG with series and an uncertainty band, creating the directory", function()
    local file = dir .. "/sub/curve.png"
    assert.are.equal(file, plot.lines {
      file = file, title = "tanh", xlabel = "x", ylabel = "y", size = { 400, 300 },
      series = { { x = x, y = y, title = "mean" }, { x = { 0, 1, 2 }, y = { 0, 0.5, 1 }, style = "points" } },
      bands = { { x = x, lo = y - 0.1, hi = y + 0.1, title = "± 0.1", color = "#88aaff" } },
    })
    local png = read_file(file)
    assert.truthy(png, "no file written")
    assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
  end)

  it("writes an SVG with a log scale", function()
    local file = dir .. "/curve.svg"
    plot.lines { file = file, title = "loss", logy = true, series = { { y = { 10, 3, 1, 0.5 }, style = "linespoints" } } }
    local svg = read_file(file)
    assert.truthy(svg and svg:find("<svg", 1, true))
    assert.truthy(svg:find("loss", 1, true))
  end)

  it("writes a histogram of several series", function()
    local file = dir .. "/hist.png"
    plot.histogram { file = file, bins = 12, series = {
      { values = bbb.randn({ 500 }, 0, 1, bbb.Generator(1)), title = "a" },
      { values = { 1, 1, 2, 3 }, title = "b" } } }
    assert.are.equal("\137PNG", read_file(file):sub(1, 4))
  end)

  it("draws grouped bars, in one chart or in panels", function()
    local file = dir .. "/bars.svg"
    plot.bars { file = file, title = "class probabilities", xlabel = "class", ylabel = "p",
      categories = { 0, 1, 2 }, series = { { values = { 0.1, 0.5, 0.4 }, title = "BNN" },
                                           { values = bbb.tensor { 0, 1, 0 }, title = "MLP" } } }
    local svg = read_file(file)
    assert.truthy(svg and svg:find("class probabilities", 1, true))
    assert.truthy(svg:find("MLP", 1, true))
    file = dir .. "/panels.svg"
    plot.bars { file = file, title = "passes", categories = { "a", "b" }, layout = { 1, 2 },
      panels = { { title = "image one", series = { { values = { 3, 1 } } } },
                 { title = "image two", series = { { values = { 0, 4 } } } } } }
    svg = read_file(file)
    assert.truthy(svg and svg:find("image one", 1, true) and svg:find("image two", 1, true))
    assert_error_has(function()
      plot.bars { file = dir .. "/x.png", categories = { 1, 2 }, series = { { values = { 1 } } } }
    end, "plot.bars: bars.series[1].values has 1 values for 2 categories")
    assert_error_has(function()
      plot.bars { file = dir .. "/x.png", categories = { 1 }, layout = { 1, 1 },
        panels = { { series = { { values = { 1 } } } }, { series = { { values = { 1 } } } } } }
    end, "plot.bars: layout must be {rows, cols} in positive integers with room for 2 panels")
  end)

  it("renders to text with the dumb terminal", function()
    local text = plot.terminal { title = "training curve", size = { 60, 20 },
                                 series = { { y = { 1, 4, 9, 16 }, title = "squares" } } }
    assert.truthy(text:find("training curve", 1, true), text)
    assert.truthy(text:find("squares", 1, true), text)
    local hist = plot.terminal { title = "spread", series = { { values = { 1, 2, 2, 3, 3, 3 } } } }
    assert.truthy(hist:find("spread", 1, true), hist)
  end)

  it("keeps quotes in titles intact", function()
    local text = plot.terminal { title = "it's \"fine\"", series = { { y = { 1, 2 } } } }
    assert.truthy(text:find("it's \"fine\"", 1, true), text)
  end)

  it("refuses bad input with a message naming the function", function()
    assert_error_has(function() plot.lines { file = dir .. "/a.pdf", series = { { y = { 1 } } } } end,
      "plot.lines: cannot tell the format of")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = { { x = { 1, 2 }, y = { 1 } } } } end,
      "plot.lines: series[1]: x has 2 values but y has 1")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = {} } end,
      "plot.lines: nothing to plot")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = { { y = { 1, "a" } } } } end,
      "plot.lines: series[1].y[2] is string, not a number")
    assert_error_has(function() plot.histogram { file = dir .. "/h.png", series = { { y = { 1 } } } } end,
      "plot.histogram: series[1] has no values")
    assert_error_has(function() plot.terminal { series = { { y = { 1 } } }, size = { 0, 10 } } end,
      "plot.terminal: size must be")
  end)

  it("says so when gnuplot is not installed", function()
    local lua = "PATH=/nonexistent /usr/bin/lua5.4 -e "
      .. "'print(select(2, pcall(require(\"bbb.plot\").lines, {file = \"x.png\", series = {{y = {1}}}})))'"
    local p = assert(io.popen(lua))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("plot.lines: gnuplot not found (install gnuplot-nox)", 1, true), out)
  end)

  it("passes gnuplot's complaint on", function()
    assert_error_has(function()
      plot.lines { file = dir .. "/bad.png", series = { { y = { 1, 2 }, color = "not a colour" } } }
    end, "unrecognized color name")
  end)
end)

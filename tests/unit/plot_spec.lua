-- bbb.app.plot: real PNG and SVG files through gnuplot, dumb-terminal text, errors.
local bbb = require "bbb"
local plot = require "bbb.app.plot"

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

  it("labels a log axis shorter than a decade at the ytics asked for", function()
    local file = dir .. "/short.svg"
    plot.lines { file = file, logy = true, yrange = { 1.4, 4 }, ytics = { 1.5, 2, 3 },
                 series = { { y = { 3.5, 2, 1.6, 1.5 } } } }
    local svg = read_file(file)
    for _, label in ipairs { "> 1.5<", "> 2<", "> 3<" } do assert.truthy(svg:find(label, 1, true), label) end
    assert_error_has(function() plot.lines { file = file, ytics = {}, series = { { y = { 1 } } } } end,
      "plot.lines: ytics must be a list of numbers")
    assert_error_has(function() plot.lines { file = file, ytics = { 1, 0 / 0 }, series = { { y = { 1 } } } } end,
      "plot.lines: ytics[2] must be a finite number")
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

  it("draws shaded spans, bands with edges, a caption and a title in lines", function()
    local file = dir .. "/look.svg"
    plot.lines { file = file, title = { "first line", "second line" }, key = "below",
      caption = { "coverage 95.0%", "width 0.3" }, xrange = { -1, 4 }, yrange = { -2, 2 },
      shade = { { lo = 0, hi = 2, color = "#fdf0c2", title = "training range" } },
      bands = { { x = x, lo = y - 0.1, hi = y + 0.1, opacity = 0.5, edges = true, edge_color = "#2171b5", title = "band" } },
      series = { { x = x, y = y, title = "truth", dash = 2, width = 1.5 },
                 { x = { 1, 2 }, y = { 0.5, 1 }, style = "points", pointtype = 7, pointsize = 1.5, title = "data" } } }
    local svg = read_file(file)
    for _, text in ipairs { "first line", "second line", "coverage 95.0%", "width 0.3", "training range", "data" } do
      assert.truthy(svg:find(text, 1, true), text)
    end
    -- the caption's two lines are two texts, not one
    assert.is_nil(svg:find("coverage 95.0% width", 1, true))
    -- a key inside the axes leaves them the whole width: the plot's right edge moves out
    local function right_edge(key)
      local f = dir .. "/key-" .. key .. ".svg"
      plot.lines { file = f, key = key, series = { { x = x, y = y, title = "a curve with a long title" } } }
      local svg_k = read_file(f)
      assert.truthy(svg_k:find("a curve with a long title", 1, true), key)
      local edge = 0
      for xs in svg_k:gmatch([[class="gridline"%s*d='M[%d.]+,[%d.]+ L([%d.]+),]]) do edge = math.max(edge, tonumber(xs)) end
      return edge
    end
    local inside, right = right_edge("inside"), right_edge("right")
    assert.is_true(right > 0 and inside > right * 1.2, ("%g against %g"):format(inside, right))
  end)

  it("draws several panels on one page", function()
    local file = dir .. "/panels.png"
    assert.are.equal(file, plot.panels { file = file, size = { 900, 400 }, page_title = { "sweep", "two panels" },
      layout = { 1, 2 }, panels = {
        { title = { "beta = 1", "ELBO -1" }, series = { { x = x, y = y, title = "a" } } },
        { title = "beta = 0.1", key = "off", bands = { { x = x, lo = y - 1, hi = y + 1, edges = true } },
          shade = { { lo = 1, hi = 2 } } } } })
    assert.are.equal("\137PNG", read_file(file):sub(1, 4))
    local svg_file = dir .. "/panels.svg"
    plot.panels { file = svg_file, panels = { { title = "left", series = { { y = { 1, 2 } } } },
                                               { title = "right", series = { { y = { 2, 1 } } } } } }
    local svg = read_file(svg_file)
    assert.truthy(svg:find("left", 1, true) and svg:find("right", 1, true))
  end)

  it("refuses bad panels and looks with a message naming the function", function()
    local one = { { y = { 1, 2 } } }
    assert_error_has(function() plot.panels { file = dir .. "/p.png", layout = { 1, 1 },
      panels = { { series = one }, { series = one } } } end, "plot.panels: layout must be {rows, columns}")
    assert_error_has(function() plot.panels { file = dir .. "/p.png", panels = {} } end,
      "plot.panels: nothing to plot: give panels")
    assert_error_has(function() plot.panels { file = dir .. "/p.png", panels = { { series = one }, { series = {} } } } end,
      "plot.panels: panels[2]: nothing to plot")
    assert_error_has(function() plot.panels { file = dir .. "/p.png", panels = { { series = one, caption = "c" } } } end,
      "plot.panels: panels[1]: a panel has no caption")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = one, key = "left" } end,
      "plot.lines: key must be right, below, inside or off, got left")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", bands = { { x = { 1 }, lo = { 0 }, hi = { 1 }, opacity = 2 } } } end,
      "plot.lines: bands[1].opacity must be a number in [0, 1], got 2")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = one, shade = { { lo = 0 } } } end,
      "plot.lines: shade[1].hi must be a finite number, got nil")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = { { y = { 1 }, dash = 9 } } } end,
      "plot.lines: series[1].dash must be an integer in 1..5")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = one, title = { "a", {} } } end,
      "plot.lines: title[2] is table, not a string")
    assert_error_has(function() plot.lines { file = dir .. "/a.png", series = one, caption = { 1, true } } end,
      "plot.lines: caption[2] is boolean, not a string")
  end)

  it("says so when gnuplot is not installed", function()
    local lua = "PATH=/nonexistent /usr/bin/lua5.4 -e "
      .. "'print(select(2, pcall(require(\"bbb.app.plot\").lines, {file = \"x.png\", series = {{y = {1}}}})))'"
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

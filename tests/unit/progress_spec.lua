-- bbb.progress: what each mode writes, captured through a fake stream and clock.
local progress = require "bbb.progress"

-- Collects writes; \r and \n stay in the text so redraws can be counted.
local function fake_stream()
  local s = { parts = {} }
  function s:write(...)
    for _, p in ipairs { ... } do self.parts[#self.parts + 1] = p end
    return self
  end
  function s:text() return table.concat(self.parts) end
  return s
end

-- A clock the test moves by hand: each call returns the current time.
local function fake_clock(step)
  local t = 0
  return function() t = t + (step or 0) return t end
end

local function count(text, pattern)
  return select(2, text:gsub(pattern, ""))
end

describe("progress", function()
  it("bar mode draws label, bar, percentage, rate and ETA", function()
    local out = fake_stream()
    local bar = progress.new { total = 10, label = "epoch 1", width = 10, stream = out,
                               mode = "bar", clock = fake_clock(0.5) }
    for i = 1, 10 do bar:update(i, "loss 0.25") end
    bar:finish("done")
    local text = out:text()
    assert.truthy(text:find("epoch 1", 1, true), text)
    assert.truthy(text:find("%", 1, true), text)
    assert.truthy(text:find("100%", 1, true), text)
    assert.truthy(text:find("it/s", 1, true), text)
    assert.truthy(text:find("ETA", 1, true), text)
    assert.truthy(text:find("[==========]", 1, true), text)
    assert.truthy(text:find("loss 0.25", 1, true), text)
    assert.truthy(text:find("done *\n$"), text)
    assert.truthy(text:find("\r", 1, true), text)
  end)
  it("bar mode redraws at most every tenth of a second, and always at the end", function()
    local out = fake_stream()
    local bar = progress.new { total = 100, label = "x", stream = out, mode = "bar", clock = fake_clock(0.001) }
    for i = 1, 100 do bar:update(i) end
    -- 0.2 s pass in 200 clock reads: the first draw, one ~0.1 s later, and the last
    local draws = count(out:text(), "\r")
    assert.is_true(draws >= 2 and draws <= 4, tostring(draws))
    assert.truthy(out:text():find("100/100", 1, true))
  end)
  it("bar mode pads over a longer previous line", function()
    local out = fake_stream()
    local bar = progress.new { total = 2, label = "x", stream = out, mode = "bar", clock = fake_clock(1) }
    bar:update(1, "a long extra text")
    bar:update(2)
    local last = out.parts[#out.parts - 2] .. out.parts[#out.parts - 1]
    assert.is_true(#last >= #out.parts[2], last)
  end)
  it("off mode writes nothing", function()
    local out = fake_stream()
    local bar = progress.new { total = 5, label = "epoch 1", stream = out, mode = "off" }
    for i = 1, 5 do bar:update(i, "loss 1") end
    bar:finish("end")
    assert.are.equal("", out:text())
  end)
  it("lines mode writes a plain line per tenth and nothing at finish", function()
    local out = fake_stream()
    local bar = progress.new { total = 100, label = "epoch 2", stream = out, mode = "lines", clock = fake_clock(0.01) }
    for i = 1, 100 do bar:update(i) end
    bar:finish()
    local text = out:text()
    assert.are.equal(11, count(text, "\n"))
    assert.are.equal(0, count(text, "\r"))
    assert.truthy(text:find("epoch 2 [", 1, true), text)
  end)
  it("works without a total", function()
    local out = fake_stream()
    local bar = progress.new { label = "steps", stream = out, mode = "bar", clock = fake_clock(1) }
    bar:update(3)
    bar:finish()
    assert.truthy(out:text():find("steps 3 ", 1, true), out:text())
  end)
  it("takes its default mode from BBB_PROGRESS, else from whether stderr is a terminal", function()
    local function mode_with(prefix)
      local cmd = prefix .. " lua5.4 -e 'io.write(require(\"bbb.progress\").mode)' 2>/dev/null"
      local p = assert(io.popen(cmd))
      local mode = p:read("a")
      p:close()
      return mode
    end
    assert.are.equal("lines", mode_with("BBB_PROGRESS=lines"))
    assert.are.equal("bar", mode_with("BBB_PROGRESS=bar"))
    assert.are.equal("off", mode_with("BBB_PROGRESS="))
  end)
  it("has a default mode and refuses unknown ones", function()
    assert.truthy(({ bar = true, lines = true, off = true })[progress.mode])
    assert.error_matches(function() progress.new { mode = "fancy" } end,
      "progress.new: mode must be bar, lines or off, got fancy", 1, true)
  end)
end)

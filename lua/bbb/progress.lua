--- bbb.progress: a one-line progress bar for training loops.
-- On a terminal it redraws in place with `\r`; in logs and pipes it stays
-- silent, since the caller prints its own line per epoch. BBB_PROGRESS =
-- bar | lines | off overrides the terminal check; new{mode = ...} overrides both.
local clock = require("bbb.core").clock or os.clock

local progress = {}

local MODES = { bar = true, lines = true, off = true }
local REDRAW_SECONDS = 0.1

local function detect_mode()
  local forced = os.getenv("BBB_PROGRESS")
  if forced and MODES[forced] then return forced end
  -- stderr is where the bar goes
  return require("bbb.core").sys.isatty(2) and "bar" or "off"
end

--- The mode new() uses when not told otherwise.
progress.mode = detect_mode()

local Bar = {}
Bar.__index = Bar

--- new{total = n, label = "epoch 1", width = 30, stream = io.stderr,
--      mode = "bar"|"lines"|"off", clock = fn} -> bar with :update(i, extra), :finish(extra)
-- @usage
--   local bar = bbb.progress.new{ total = 3, label = "epoch 1", mode = "off" }
--   for i = 1, 3 do bar:update(i) end
--   bar:finish()
function progress.new(opts)
  opts = opts or {}
  local mode = opts.mode or progress.mode
  if not MODES[mode] then
    error(("progress.new: mode must be bar, lines or off, got %s"):format(tostring(mode)), 2)
  end
  if opts.total ~= nil and (type(opts.total) ~= "number" or opts.total < 0) then
    error(("progress.new: total must be a number >= 0, got %s"):format(tostring(opts.total)), 2)
  end
  local now = opts.clock or clock
  return setmetatable({
    total = opts.total, label = opts.label or "", width = opts.width or 30,
    stream = opts.stream or io.stderr, mode = mode, clock = now,
    start = now(), last_draw = -math.huge, last_len = 0, last_tenth = -1, done = 0,
  }, Bar)
end

local function format_seconds(s)
  if s ~= s or s == math.huge then return "--:--" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return ("%d:%02d:%02d"):format(s // 3600, s % 3600 // 60, s % 60) end
  return ("%d:%02d"):format(s // 60, s % 60)
end

local function format_rate(r)
  if r >= 100 then return ("%.0f it/s"):format(r) end
  return ("%.2f it/s"):format(r)
end

-- The text after the bar: count, rate, then ETA (or elapsed when finished).
local function status_text(self, elapsed, finished)
  local rate = elapsed > 0 and self.done / elapsed or 0
  local parts = { self.total and ("%d/%d"):format(self.done, self.total) or tostring(self.done),
                  format_rate(rate) }
  if finished or not self.total then
    parts[#parts + 1] = format_seconds(elapsed)
  elseif rate > 0 then
    parts[#parts + 1] = "ETA " .. format_seconds((self.total - self.done) / rate)
  end
  return table.concat(parts, " ")
end

local function bar_text(self)
  if not self.total then return "" end
  local frac = self.total > 0 and math.min(1, self.done / self.total) or 1
  local filled = math.floor(frac * self.width + 1e-9)
  local head = filled < self.width and ">" or ""
  local bar = string.rep("=", filled) .. head
  bar = bar .. string.rep(" ", self.width - #bar)
  return (" [%s] %3d%%"):format(bar, math.floor(frac * 100 + 1e-9))
end

local function line(self, finished, extra)
  local elapsed = self.clock() - self.start
  local text = self.label .. bar_text(self) .. " " .. status_text(self, elapsed, finished)
  if extra and extra ~= "" then text = text .. " " .. extra end
  return text
end

-- Pads over what the previous, possibly longer, line left on screen.
local function redraw(self, text, ending)
  local pad = math.max(0, self.last_len - #text)
  self.stream:write("\r", text, string.rep(" ", pad), ending or "")
  if self.stream.flush then self.stream:flush() end
  self.last_len = #text
end

--- update(i, extra_text): i items are done; extra_text (e.g. "loss 0.31") is appended.
-- @usage
--   local bar = bbb.progress.new{ total = 2, mode = "off" }
--   bar:update(1, "loss 0.31")
--   bar:finish("done")
function Bar:update(i, extra)
  self.done = i
  if self.mode == "off" then return end
  local t = self.clock()
  if self.mode == "lines" then
    -- one plain line per tenth of the way, readable in a log
    local tenth = self.total and self.total > 0 and math.floor(10 * i / self.total) or -1
    if tenth > self.last_tenth then
      self.last_tenth = tenth
      self.stream:write(line(self, false, extra), "\n")
      -- a log is block-buffered: unflushed, the lines would come at the end
      if self.stream.flush then self.stream:flush() end
    end
    return
  end
  if t - self.last_draw < REDRAW_SECONDS and i ~= self.total then return end
  self.last_draw = t
  redraw(self, line(self, false, extra))
end

--- clear(): on a bar, blanks its line so other output can be printed; the
-- next update draws it again.
function Bar:clear()
  if self.mode ~= "bar" or self.last_len == 0 then return end
  self.stream:write("\r", string.rep(" ", self.last_len), "\r")
  if self.stream.flush then self.stream:flush() end
  self.last_len, self.last_draw = 0, -math.huge
end

--- finish(extra_text): on a bar, draws the final state and ends the line.
function Bar:finish(extra)
  if self.mode ~= "bar" then return end
  if self.total then self.done = math.max(self.done, self.total) end
  redraw(self, line(self, true, extra), "\n")
end

return progress

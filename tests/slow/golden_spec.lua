-- The golden runs (tests/golden/runs): every experiment on tiny settings,
-- their printed numbers compared line by line with tests/fixtures/golden.txt
-- (tests/golden/record writes it). Products come from OpenBLAS, whose
-- kernels differ by CPU and version, so the comparison holds only in the
-- environment the fixture names; elsewhere the spec says it did not compare.
local bbb = require "bbb"
local h = require "helpers"

local root = h.root:sub(1, 1) == "/" and h.root or (os.getenv("PWD") .. "/" .. h.root)

describe("the golden runs", function()
  it("print what the fixture recorded, in the environment it records", function()
    local f = assert(io.open(root .. "/tests/fixtures/golden.txt"))
    local header, want = f:read("l"), f:read("a")
    f:close()
    local e = bbb.core.environment()
    local here = ("# environment: %s | %s"):format(e.openblas, e.core)
    if header ~= here then
      pending(("not compared: the fixture was recorded under '%s', this is '%s' (tests/golden/record)")
        :format(header:gsub("^# environment: ", ""), here:gsub("^# environment: ", "")))
      return
    end
    -- bash without a sanitizer's preloaded runtime, which reports bash's own leaks
    local got = h.sh(("env -u LD_PRELOAD bash %s/tests/golden/runs %s"):format(h.q(root), h.q(root)))
    if got ~= want then
      local recorded, now = os.tmpname(), os.tmpname()
      h.write(recorded, want)
      h.write(now, got)
      local diff = h.sh(("diff -u %s %s | head -120"):format(h.q(recorded), h.q(now)))
      os.remove(recorded)
      os.remove(now)
      error("the golden runs differ from tests/fixtures/golden.txt (recorded, then now):\n" .. diff, 0)
    end
  end)
end)

-- The golden runs (tests/golden/runs): every experiment on tiny settings,
-- their printed numbers compared line by line with a fixture that
-- tests/golden/record wrote. Products come from OpenBLAS, whose kernels
-- differ by CPU family, so there is a fixture per family
-- (tests/fixtures/golden/<family>.txt): on a recorded family the output
-- must be the same text; on another, the same text with every number within
-- TOLERANCE (relative) plus ABSOLUTE of some recorded family's. Never pending.
local bbb = require "bbb"
local h = require "helpers"

local root = h.root:sub(1, 1) == "/" and h.root or (os.getenv("PWD") .. "/" .. h.root)
-- Across kernel families two epochs of training on 600 images move losses
-- and accuracies in their third digit at most; figures are printed to four
-- decimals, so a number may also move by ABSOLUTE.
local TOLERANCE, ABSOLUTE = 0.05, 1e-3

-- The recorded fixtures: {family = {header =, text =}}.
local function fixtures()
  local out = {}
  local p = assert(io.popen(("ls %s/tests/fixtures/golden/*.txt"):format(h.q(root))))
  for path in p:lines() do
    local f = assert(io.open(path))
    local header, text = f:read("l"), f:read("a")
    f:close()
    out[path:match("([^/]+)%.txt$")] = { header = header, text = text }
  end
  p:close()
  return out
end

-- The first line where a and b differ beyond tol (numbers relative, text
-- exact), as "line N: a | b", or nil.
local function differ(a, b, tol)
  local la, lb = {}, {}
  for l in (a .. "\n"):gmatch("(.-)\n") do la[#la + 1] = l end
  for l in (b .. "\n"):gmatch("(.-)\n") do lb[#lb + 1] = l end
  for i = 1, math.max(#la, #lb) do
    local x, y = la[i] or "", lb[i] or ""
    local pattern = "[-+]?%d+%.?%d*[eE]?[-+]?%d*"
    if x:gsub(pattern, "#") ~= y:gsub(pattern, "#") then return ("line %d: %s | %s"):format(i, x, y) end
    local nx, ny = {}, {}
    for n in x:gmatch(pattern) do nx[#nx + 1] = tonumber(n) end
    for n in y:gmatch(pattern) do ny[#ny + 1] = tonumber(n) end
    for k = 1, #nx do
      local u, v = nx[k], ny[k]
      if u and v and math.abs(u - v) > tol * math.max(math.abs(u), math.abs(v)) + (tol > 0 and ABSOLUTE or 0) then
        return ("line %d: %s | %s"):format(i, x, y)
      end
    end
  end
end

describe("the golden runs", function()
  it("finds a number moved past the tolerance, and takes one within it", function()
    assert.is_nil(differ("loss 1.000 acc 97.0%\nexit 0", "loss 1.010 acc 97.3%\nexit 0", TOLERANCE))
    assert.are.equal("line 1: loss 1.000 | loss 1.200", differ("loss 1.000", "loss 1.200", TOLERANCE))
    assert.are.equal("line 2: exit 0 | exit 1", differ("a\nexit 0", "a\nexit 1", 0))
    assert.truthy(differ("saved x", "wrote x", TOLERANCE))
  end)

  it("print what the fixture of this kernel family recorded, or within the tolerance elsewhere", function()
    local e = bbb.core.environment()
    local here = ("# environment: %s | %s"):format(e.openblas, e.core)
    local all = fixtures()
    assert.is_true(next(all) ~= nil, "no fixture in tests/fixtures/golden (tests/golden/record)")
    -- bash without a sanitizer's preloaded runtime, which reports bash's own leaks
    local got = h.sh(("env -u LD_PRELOAD bash %s/tests/golden/runs %s"):format(h.q(root), h.q(root)))
    local own = all[e.core]
    if own and own.header == here then
      local diff = differ(own.text, got, 0)
      assert.is_nil(diff, "the golden runs differ from tests/fixtures/golden/" .. e.core .. ".txt: " .. tostring(diff))
      return
    end
    local why = {}
    for family, fx in pairs(all) do
      local diff = differ(fx.text, got, TOLERANCE)
      if not diff then return end
      why[#why + 1] = family .. ": " .. diff
    end
    error(("no fixture is within %g of this run (%s): %s"):format(TOLERANCE, here, table.concat(why, "; ")), 0)
  end)
end)

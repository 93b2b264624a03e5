-- The hostile-input battery (tests/battery.lua) against this checkout's
-- build: every script, reader and output tried as a hostile or careless
-- user would. None of its cases may run planted code, lose a file, crash,
-- hang or accept what it should refuse, and at most 1% may be refused with
-- an unclear message.
local h = require "helpers"
local json = require "bbb.json"

local root = h.root:sub(1, 1) == "/" and h.root or (os.getenv("PWD") .. "/" .. h.root)

describe("the hostile-input battery", function()
  it("finds no code execution, data loss, crash, hang or silent acceptance in 2,500+ cases", function()
    local out = os.tmpname()
    local log = h.sh(("%s %s/tests/battery.lua --build %s --json %s 2>&1"):format(h.q(h.bbblua), h.q(root),
      h.q(h.build), h.q(out)))
    local r = json.decode(assert(h.read(out), log))
    os.remove(out)
    local findings = {}
    for _, f in ipairs(r.findings) do findings[#findings + 1] = f.class .. ": " .. f.case end
    local seen = table.concat(findings, "\n")
    assert.is_true(r.cases >= 2500, "cases: " .. r.cases)
    assert.are.equal(0, r.code_exec, seen)
    assert.are.equal(0, r.data_loss, seen)
    assert.are.equal(0, r.crashes, seen)
    assert.are.equal(0, r.hangs, seen)
    assert.are.equal(0, r.silent, seen)
    assert.is_true(r.unclear <= r.cases // 100, seen)
    -- the classes add up to the cases: none fell through the classification
    assert.are.equal(r.cases, r.clean + r.unclear + r.silent + r.data_loss + r.code_exec + r.hangs + r.crashes
      + r.ran_as_they_should)
  end)
end)

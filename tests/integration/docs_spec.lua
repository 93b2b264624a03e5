-- The docs run: every ```lua block of README.md and doc/**/*.md (the
-- research notebooks in doc/notebook/ aside), a page's blocks in order as
-- one script, run by bbblua from the repository root.
local helpers = require "helpers"

-- The ```lua blocks of a markdown text, in order.
local function lua_blocks(text)
  local blocks = {}
  for body in (text .. "\n"):gmatch("\n```lua\n(.-)\n```%s*\n") do blocks[#blocks + 1] = body end
  if text:match("^```lua\n") then table.insert(blocks, 1, text:match("^```lua\n(.-)\n```")) end
  return blocks
end

local function pages()
  local p = assert(io.popen(("cd %q && { echo README.md; find doc -name '*.md' -not -path 'doc/notebook/*'; } | sort")
    :format(helpers.root)))
  local list = {}
  for f in p:lines() do list[#list + 1] = f end
  p:close()
  return list
end

describe("the docs' Lua blocks", function()
  it("finds the blocks of a page in order", function()
    local t = "x\n```lua\na = 1\n```\ntext\n```text\nno\n```\n```lua\nb = 2\n```\n"
    assert.are.same({ "a = 1", "b = 2" }, lua_blocks("\n" .. t))
  end)

  local total = 0
  for _, page in ipairs(pages()) do
    local blocks = lua_blocks("\n" .. helpers.read(helpers.root .. "/" .. page))
    total = total + #blocks
    if #blocks > 0 then
      it("run on " .. page, function()
        local script = os.tmpname()
        helpers.write(script, table.concat(blocks, "\n"))
        local status, out = helpers.run(helpers.q(script), "BBB_PROGRESS=off")
        os.remove(script)
        assert.are.equal(0, status, page .. ":\n" .. out)
      end)
    end
  end

  it("number at least a dozen", function()
    assert.truthy(total >= 12, ("only %d blocks"):format(total))
  end)
end)

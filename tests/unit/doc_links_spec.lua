-- Every relative link of README.md and doc/**/*.md leads to a file that
-- exists (pages move: doc/notebook/ took two of them).
local helpers = require "helpers"

local function pages()
  local p = assert(io.popen(("cd %q && { echo README.md; find doc -name '*.md'; } | sort"):format(helpers.root)))
  local list = {}
  for f in p:lines() do list[#list + 1] = f end
  p:close()
  return list
end

-- The relative link targets of a markdown text (no scheme, anchor cut off).
local function links(text)
  local out = {}
  for target in text:gmatch("%]%(([^%)%s]+)%)") do
    target = target:gsub("#.*$", "")
    if target ~= "" and not target:match("^%a+:") then out[#out + 1] = target end
  end
  return out
end

describe("the docs' links", function()
  it("are found in a page's text", function()
    assert.are.same({ "a.md", "b/c.png" }, links("[x](a.md#part) [y](https://e.org) ![z](b/c.png) [w](#here)"))
  end)

  it("lead to files that exist", function()
    local n = 0
    for _, page in ipairs(pages()) do
      local dir = page:match("^(.*)/[^/]*$") or "."
      for _, target in ipairs(links(helpers.read(helpers.root .. "/" .. page))) do
        n = n + 1
        local f = io.open(helpers.root .. "/" .. dir .. "/" .. target)
        assert.truthy(f, ("%s links to %s, which does not exist"):format(page, target))
        f:close()
      end
    end
    assert.truthy(n > 20, "too few links found")
  end)
end)

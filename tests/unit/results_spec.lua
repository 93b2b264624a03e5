-- doc/results.md is generated from doc/results/*.json and index.json: the
-- committed page must be what the generator writes now.
-- To regenerate: build/bbblua cmake/genresults.lua doc/results.md
local helpers = require "helpers"

describe("doc/results.md", function()
  local genresults = dofile(helpers.root .. "/cmake/genresults.lua")

  it("is what cmake/genresults.lua writes from doc/results/", function()
    local text = genresults.generate(helpers.root)
    assert.truthy(select(2, text:gsub("\n| ", "")) >= 5, "too few rows")
    assert.truthy(helpers.read(helpers.root .. "/doc/results.md") == text, "doc/results.md differs: regenerate")
  end)

  it("holds every figure of README's results table", function()
    local readme = helpers.read(helpers.root .. "/README.md")
    local results = helpers.read(helpers.root .. "/doc/results.md")
    local rows = 0
    for row in readme:gmatch("\n(| `[^\n]+)") do
      rows = rows + 1
      for _, cell in ipairs { row:match("^|[^|]+|([^|]+)|([^|]+)|") } do
        for number in cell:gmatch("%d+%.%d+") do
          assert.truthy(results:find(number, 1, true), ("README's %s (%s) is not in doc/results.md"):format(number, row))
        end
        for number in cell:gmatch("%f[%d]%d%d%d%d+%f[^%d]") do
          assert.truthy(results:find(number, 1, true), ("README's %s (%s) is not in doc/results.md"):format(number, row))
        end
      end
    end
    assert.truthy(rows >= 5, "README has no results table")
  end)
end)

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
end)

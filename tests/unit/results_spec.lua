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

describe("doc/results/protocol.json", function()
  local json = require "bbb.json"
  local genresults = dofile(helpers.root .. "/cmake/genresults.lua")
  local protocol = json.decode(helpers.read(helpers.root .. "/doc/results/protocol.json"))

  it("keeps every report table and seed apart from the tuning ones", function()
    local tab = protocol.experiments.tabular
    local tuned = {}
    for _, t in ipairs(tab.tuning.tables) do tuned[t.spec] = true end
    assert.is_true(#tab.report.tables >= 5)
    for _, t in ipairs(tab.report.tables) do assert.is_nil(tuned[t.spec], t.spec .. " is in both sets") end
    local ref = protocol.experiments.reference
    local sampled = {}
    for _, t in ipairs(ref.tuning.tables) do sampled[t.spec] = true end
    for _, t in ipairs(ref.report.tables) do
      assert.is_nil(sampled[t.spec], t.spec .. " is in both sets")
      assert.is_nil(tuned[t.spec], t.spec .. " is a tabular tuning table")
    end
    for _, name in ipairs { "bandit", "shift" } do
      local seen = {}
      for _, s in ipairs(protocol.experiments[name].tuning.seeds) do seen[s] = true end
      for _, s in ipairs(protocol.experiments[name].report.seeds) do
        assert.is_nil(seen[s], ("%s seed %d is in both sets"):format(name, s))
      end
    end
  end)

  -- A repository of one result file, its index entry given, for generate.
  local function repo(entry, result)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p '%s/doc/results'"):format(dir)))
    helpers.write(dir .. "/doc/results/protocol.json", json.encode(protocol))
    -- a string is a CSV result's text
    entry.file = type(result) == "string" and "r.csv" or "r.json"
    helpers.write(dir .. "/doc/results/" .. entry.file, type(result) == "string" and result or json.encode(result))
    entry.label, entry.reference = entry.label or "a result", "none"
    entry.ours = entry.ours or { { path = { "x" } } }
    helpers.write(dir .. "/doc/results/index.json", json.encode { results = { entry } })
    return dir
  end

  it("every row names its set, and a set the protocol lacks is refused", function()
    local ok_dir = repo({ experiment = "bandit", set = "report" }, { x = 1, commit = "abc" })
    local text = genresults.generate(ok_dir)
    assert.truthy(text:find("| a result | 1 | none | report |", 1, true), text)
    local bad = repo({ experiment = "bandit", set = "holdout" }, { x = 1 })
    local ok, err = pcall(genresults.generate, bad)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("names set holdout, which protocol.json does not declare for bandit", 1, true))
    local clash = repo({ experiment = "bandit", set = "report" }, { x = 1, set = "tuning" })
    ok, err = pcall(genresults.generate, clash)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("the file says tuning", 1, true), tostring(err))
    os.execute(("rm -rf '%s' '%s' '%s'"):format(ok_dir, bad, clash))
  end)

  it("a paired cell is bbb.stats' corrected interval over the file's splits", function()
    local runs = {}
    for i = 1, 4 do
      runs[i] = { bbb = { ll = -1 + 0.1 * i }, gp = { ll = -1.2 + 0.1 * i + (i % 2) * 0.01 },
                  _rows = { train = 80, validation = 10, test = 10 } }
    end
    local dir = repo({ experiment = "tabular", set = "report",
      ours = { { paired = { table = "t", a = "bbb", b = "gp", metric = "ll" } } } },
      { tables = { t = { runs = runs } } })
    local text = genresults.generate(dir)
    os.execute(("rm -rf '%s'"):format(dir))
    local want = require("bbb.stats").format(require("bbb.stats").paired({ -0.9, -0.8, -0.7, -0.6 },
      { -1.09, -1.0, -0.89, -0.8 }, { method = "corrected", n_train = 90, n_test = 10 }))
    assert.truthy(text:find("| " .. want .. " |", 1, true), want .. "\n" .. text)
  end)

  it("a paired-rows cell pairs a CSV's rows on a column, as bbb.stats' t interval", function()
    local csv = "# a comment\nagent,seed,regret\nbbb,11,100\neps0,11,150\nbbb,12,120\neps0,12,140\n"
      .. "eps0,13,170\nbbb,13,90\n"
    local cellspec = { paired_rows = { by = "seed", a = { agent = "bbb" }, b = { agent = "eps0" }, column = "regret",
      digits = 1 } }
    local dir = repo({ experiment = "bandit", set = "report", ours = { cellspec } }, csv)
    local text = genresults.generate(dir)
    os.execute(("rm -rf '%s'"):format(dir))
    -- rows out of order pair by seed: differences -50, -20, -80
    local stats = require "bbb.stats"
    local want = stats.format(stats.paired({ 100, 120, 90 }, { 150, 140, 170 }, { method = "t" }), 1)
    assert.truthy(text:find("| " .. want .. " |", 1, true), want .. "\n" .. text)
    -- a seed without its pair is refused, naming it
    dir = repo({ experiment = "bandit", set = "report", ours = { cellspec } }, csv .. "bbb,14,80\n")
    local ok, err = pcall(genresults.generate, dir)
    os.execute(("rm -rf '%s'"):format(dir))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("for seed 14", 1, true), tostring(err))
  end)

  it("a paired-lists cell pairs two lists of a JSON result by position", function()
    local cellspec = { paired_lists = { a = { "methods", "bbb", "tv_rows" }, b = { "methods", "ensemble", "tv_rows" },
      digits = 2 } }
    local result = { methods = { bbb = { tv_rows = { 0.5, 0.25, 0.75 } }, ensemble = { tv_rows = { 0.25, 0.25, 0.25 } } } }
    local dir = repo({ experiment = "reference", set = "report", ours = { cellspec } }, result)
    local text = genresults.generate(dir)
    os.execute(("rm -rf '%s'"):format(dir))
    -- differences 0.25, 0, 0.5: mean 0.25, sd 0.25, t(2) 4.303 * 0.25 / sqrt(3) = 0.621
    assert.truthy(text:find("| 0.25 [-0.37, 0.87] |", 1, true), text)
    result.methods.ensemble.tv_rows[4] = 0.5
    dir = repo({ experiment = "reference", set = "report", ours = { cellspec } }, result)
    local ok, err = pcall(genresults.generate, dir)
    os.execute(("rm -rf '%s'"):format(dir))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("must be lists of one length", 1, true), tostring(err))
  end)
end)

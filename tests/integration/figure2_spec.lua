-- scripts/figure2.lua given what it cannot use: a --from file whose chosen
-- setting is not one, an empty --from, and flags after -- that it sets
-- itself or that one of its nets cannot take. Each is refused before any
-- net trains, naming what is wrong.
local helpers = require "helpers"
local q = helpers.q

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. q(tmp))

local function figure2(dir, more)
  return helpers.run(("scripts/figure2.lua --units 8 --methods sgd --epochs 1 --limit 300 --val 100 --test-limit 100 "
    .. "--threads 1 --dir %s %s"):format(q(dir), more))
end

-- status was 2, out says want, and nothing trained or was written.
local function refused(status, out, want, dir)
  assert.are.equal(2, status, out)
  helpers.has(out, want)
  assert.falsy(out:find("== sgd: epochs", 1, true), "trained before refusing:\n" .. out)
  assert.is_nil(helpers.read(dir .. "/figure2-8.csv"))
end

describe("figure2.lua", function()
  teardown(function() os.execute("rm -rf " .. q(tmp)) end)

  it("refuses a --from row whose chosen learning rate is text, NaN or missing", function()
    for i, c in ipairs {
      { "lr=abc samples=1", "chose lr=abc samples=1, whose lr is abc: it must be a positive finite number" },
      { "lr=nan samples=1", "chose lr=nan samples=1, whose lr is nan: it must be a positive finite number" },
      { "samples=1", "chose samples=1, whose lr is missing: it must be a positive finite number" },
      { "lr=0.001 samples=0.5", "chose lr=0.001 samples=0.5, whose samples is 0.5: it must be an integer from 1 to 1000" },
    } do
      local from = ("%s/p%d.json"):format(tmp, i)
      helpers.write(from, ('{"rows": [{"units": 8, "method": "sgd", "chosen": "%s"}]}'):format(c[1]))
      local dir = ("%s/from%d"):format(tmp, i)
      local status, out = figure2(dir, "--from " .. q(from))
      refused(status, out, ("figure2.lua: --from: %s: the sgd row of 2x8 %s"):format(from, c[2]), dir)
    end
  end)

  it("refuses an empty --from and an empty name in its list", function()
    local status, out = figure2(tmp .. "/e1", "--from ''")
    refused(status, out, "figure2.lua: --from: expected a file name (or a comma list of them), got ''", tmp .. "/e1")
    status, out = figure2(tmp .. "/e2", "--from a.json,,b.json")
    refused(status, out, "figure2.lua: --from: 'a.json,,b.json' holds an empty file name", tmp .. "/e2")
  end)

  it("refuses a flag after -- that it sets for each net, or that one of its nets cannot take", function()
    for i, c in ipairs {
      { "-- --hidden 50", "figure2.lua: --hidden after --: figure2.lua sets it for each net itself, from --units" },
      { "-- --checkpoint x.ckpt", "figure2.lua: --checkpoint after --: figure2.lua sets it for each net itself, from --dir" },
      { "-- --lr 0.1", "figure2.lua: --lr after --: figure2.lua sets it for each net itself, from --from" },
      { "-- --dropout 0.3", "mnist.lua: --dropout cannot act in this run: --model mlp has no dropout" },
    } do
      local dir = ("%s/after%d"):format(tmp, i)
      local status, out = figure2(dir, c[1])
      refused(status, out, c[2], dir)
    end
  end)
end)

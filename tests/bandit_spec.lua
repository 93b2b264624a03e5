-- bbb.bandit: reward and regret bookkeeping on hand-computed sequences,
-- common random numbers, the replay buffer, each agent's interface, the
-- linear agent's posterior against a direct solve, and the script end to end.
local bbb = require "bbb"
local bandit = require "bbb.bandit"

local helpers = require "helpers"
local run, has = helpers.run, helpers.has

-- Three mushrooms with 4 one-hot features: edible, poisonous, edible.
local function tiny_data()
  return { x = bbb.tensor{ { 1, 0, 1, 0 }, { 0, 1, 1, 0 }, { 1, 0, 0, 1 } },
           edible = { true, false, true }, n = 3 }
end



describe("rewards and regret", function()
  it("follow the rules: pass 0, edible +5, poisonous +5 or -35", function()
    assert.are.equal(0, bandit.reward(true, bandit.PASS, false))
    assert.are.equal(0, bandit.reward(false, bandit.PASS, true))
    assert.are.equal(5, bandit.reward(true, bandit.EAT, false))
    assert.are.equal(5, bandit.reward(false, bandit.EAT, true))
    assert.are.equal(-35, bandit.reward(false, bandit.EAT, false))
    assert.are.equal(-15, bandit.expected_reward(false, bandit.EAT))
    assert.are.equal(5, bandit.oracle_reward(true))
    assert.are.equal(0, bandit.oracle_reward(false))
    assert.has_error(function() bandit.reward(true, 3, false) end,
      "reward: action must be 1 (pass) or 2 (eat), got 3")
  end)

  it("accumulate over a hand-computed sequence", function()
    local env = bandit.Mushroom{ data = tiny_data(), seed = 1 }
    -- {mushroom, lucky, action, reward, realised regret, expected regret}
    local seq = {
      { 1, false, 2, 5, 0, 0 },      -- edible eaten
      { 3, true, 1, 0, 5, 5 },       -- edible passed
      { 2, true, 2, 5, -5, 15 },     -- poisonous eaten, lucky
      { 2, false, 2, -35, 35, 15 },  -- poisonous eaten, unlucky
      { 2, false, 1, 0, 0, 0 },      -- poisonous passed
      { 2, true, 2, 5, -5, 15 },     -- lucky again
    }
    local reward, real, expct, oracle = 0, 0, 0, 0
    for k, s in ipairs(seq) do
      env:present(s[1], s[2])
      assert.are.equal(s[4], env:act(s[3]))
      reward, real, expct = reward + s[4], real + s[5], expct + s[6]
      oracle = oracle + (tiny_data().edible[s[1]] and 5 or 0)
      assert.are.equal(k, env.t)
      assert.are.equal(reward, env.reward)
      assert.are.equal(real, env.regret_realised)
      assert.are.equal(expct, env.regret_expected)
    end
    assert.are.equal(-20, env.reward)
    assert.are.equal(10, env.oracle)
    assert.are.equal(30, env.regret_realised)     -- oracle - reward
    assert.are.equal(50, env.regret_expected)
    assert.has_error(function() env:act(2) end, "Mushroom:act: call next() first")
  end)

  it("uses common random numbers: the same seed gives the same mushrooms and coins", function()
    local data = tiny_data()
    local a, b, c = bandit.Mushroom{ data = data, seed = 5 }, bandit.Mushroom{ data = data, seed = 5 },
      bandit.Mushroom{ data = data, seed = 6 }
    local differ = false
    for t = 1, 200 do
      local _, ia = a:next()
      local _, ib = b:next()
      local _, ic = c:next()
      assert.are.equal(ia, ib)
      assert.are.equal(a.lucky, b.lucky)
      if ia ~= ic or a.lucky ~= c.lucky then differ = true end
      a:act(t % 2 + 1)   -- different actions do not change what comes next
      b:act(2)
      c:act(1)
    end
    assert.is_true(differ)
  end)

  it("draws mushrooms uniformly from the real table", function()
    local env = bandit.Mushroom{ seed = 3 }
    local edible = 0
    for _ = 1, 4000 do
      local _, i = env:next()
      if env.edible[i] then edible = edible + 1 end
      env:act(1)
    end
    -- 4208 / 8124 = 0.518; 4 standard errors is 0.032
    assert.is_true(math.abs(edible / 4000 - 4208 / 8124) < 0.032, tostring(edible))
    assert.are.equal(0, env.reward)
  end)
end)

describe("replay buffer", function()
  it("keeps the last rows in a ring and samples only from them", function()
    local buf = bandit.ReplayBuffer{ capacity = 3, width = 2 }
    for k = 1, 5 do buf:add(bbb.tensor{ { k, -k } }, 10 * k) end
    assert.are.equal(3, buf:size())
    assert.are.same({ { 4, -4 }, { 5, -5 }, { 3, -3 } }, buf.x:totable())
    local x, y = buf:sample(50, bbb.Generator(1))
    local seen = {}
    for i, row in ipairs(x:totable()) do
      assert.is_true(row[1] >= 3 and row[1] <= 5)
      assert.are.equal(10 * row[1], y:totable()[i][1])
      seen[row[1]] = true
    end
    assert.is_true(seen[3] and seen[4] and seen[5])
  end)
end)

local small = { context_dim = 4, hidden = { 8 }, buffer = 16, updates = 2, batch = 4, seed = 1 }
local function opts(extra)
  local o = {}
  for k, v in pairs(small) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

describe("agents", function()
  local makers = {
    BBB = function() return bandit.BBB(opts()) end,
    ["eps-greedy 5%"] = function() return bandit.EpsilonGreedy(opts{ epsilon = 0.05 }) end,
    ["eps-greedy 0%"] = function() return bandit.EpsilonGreedy(opts{ epsilon = 0 }) end,
    uniform = function() return bandit.Uniform{ context_dim = 4, seed = 1 } end,
    ["linear TS"] = function() return bandit.LinearTS{ context_dim = 4, seed = 1 } end,
  }
  for name, make in pairs(makers) do
    it(name .. " decides a valid action and accepts transitions", function()
      local agent = make()
      local env = bandit.Mushroom{ data = tiny_data(), seed = 2 }
      local counts = { 0, 0 }
      for _ = 1, 30 do
        local ctx = env:next()
        local a = agent:decide(ctx)
        assert.is_true(a == 1 or a == 2, tostring(a))
        counts[a] = counts[a] + 1
        agent:update(ctx, a, env:act(a))
      end
      assert.are.equal(30, counts[1] + counts[2])
      assert.has_error(function() agent:decide(bbb.zeros{ 1, 5 }) end)
      assert.has_error(function() agent:update(env.x:narrow(1, 1, 1), 3, 0) end)
    end)
  end

  it("BBB's network changes with each update and samples new weights per decision", function()
    local agent = bandit.BBB(opts())
    local before = {}
    for k, v in pairs(agent.net:state_dict()) do before[k] = v:clone() end
    local ctx = tiny_data().x:narrow(1, 1, 1)
    agent:update(ctx, 2, 5)
    local changed = 0
    for k, v in pairs(agent.net:state_dict()) do
      if (v - before[k]):abs():max():item() > 0 then changed = changed + 1 end
    end
    assert.are.equal(4 * 2, changed)   -- mu and rho of weights and biases, two layers
    local p1 = agent:predict_actions(ctx):totable()
    local p2 = agent:predict_actions(ctx):totable()
    assert.are_not.same(p1, p2)
  end)

  it("epsilon-greedy with epsilon 1 acts at random, with 0 never does", function()
    local ctx = tiny_data().x:narrow(1, 1, 1)
    local random, greedy = bandit.EpsilonGreedy(opts{ epsilon = 1 }), bandit.EpsilonGreedy(opts{ epsilon = 0 })
    local eats = 0
    local first = greedy:decide(ctx)
    for _ = 1, 400 do
      if random:decide(ctx) == 2 then eats = eats + 1 end
      assert.are.equal(first, greedy:decide(ctx))
    end
    assert.is_true(eats > 150 and eats < 250, tostring(eats))
  end)

  it("rejects a buffer smaller than a minibatch", function()
    assert.has_error(function() bandit.BBB(opts{ buffer = 2 }) end,
      "BBB: buffer (2) must hold at least one minibatch (4)")
    assert.has_error(function() bandit.EpsilonGreedy(opts{ epsilon = 2 }) end,
      "EpsilonGreedy: epsilon must be in [0, 1], got 2")
  end)

  it("linear TS's posterior mean is the ridge solution (X'X + lambda I)^-1 X'y", function()
    local lambda = 0.25
    local agent = bandit.LinearTS{ context_dim = 2, lambda = lambda, seed = 1 }
    local rows = { { 1, 0, 3 }, { 0, 1, -1 }, { 1, 1, 2.5 }, { 1, 0, 2 }, { 0.5, 2, 0 } }
    for _, r in ipairs(rows) do agent:update(bbb.tensor{ { r[1], r[2] } }, 2, r[3]) end
    -- direct solve in float64 by Gaussian elimination; features x1, x2, 1
    local A, b = {}, { 0, 0, 0 }
    for i = 1, 3 do A[i] = { 0, 0, 0 }; A[i][i] = lambda end
    for _, r in ipairs(rows) do
      local x = { r[1], r[2], 1 }
      for i = 1, 3 do
        b[i] = b[i] + x[i] * r[3]
        for j = 1, 3 do A[i][j] = A[i][j] + x[i] * x[j] end
      end
    end
    for k = 1, 3 do
      for i = k + 1, 3 do
        local f = A[i][k] / A[k][k]
        for j = k, 3 do A[i][j] = A[i][j] - f * A[k][j] end
        b[i] = b[i] - f * b[k]
      end
    end
    local want = {}
    for i = 3, 1, -1 do
      local s = b[i]
      for j = i + 1, 3 do s = s - A[i][j] * want[j] end
      want[i] = s / A[i][i]
    end
    local got = agent:posterior_mean(2)
    for i = 1, 3 do assert.is_true(math.abs(got[i] - want[i]) < 1e-12, got[i] .. " vs " .. want[i]) end
    -- the other action's model saw nothing: its mean is the prior's, zero
    for _, v in ipairs(agent:posterior_mean(1)) do assert.are.equal(0, v) end
  end)
end)

describe("scripts/bandit.lua", function()
  local out = os.tmpname()
  os.remove(out)

  it("answers --help, as does its benchmark", function()
    local status, text = run("scripts/bandit.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    has(text, "--resume")
    status, text = run("scripts/bench_bandit.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
  end)

  it("runs every agent on tiny settings, writes the table, the CSV and the plot, and resumes", function()
    local args = "scripts/bandit.lua --steps 120 --updates 2 --batch 8 --buffer 64 --checkpoint-every 50 --out " .. out
    local status, text = run(args)
    assert.are.equal(0, status, text)
    for _, want in ipairs { "cumulative expected regret", "Bayes by Backprop", "5% greedy", "1% greedy",
                            "greedy", "linear TS", "uniform", "ordering at the end", "realised" } do
      has(text, want)
    end
    assert.truthy(text:match("\n%s+100%s+%d+"), text)
    assert.truthy(text:match("\n%s+120%s+%d+"), text)
    local f = assert(io.open(out .. "/bandit_curves.csv"))
    local header = f:read("l")
    local lines = 0
    for _ in f:lines() do lines = lines + 1 end
    f:close()
    assert.are.equal("step,bbb_expected,bbb_realised,eps5_expected,eps5_realised,eps1_expected,eps1_realised,"
      .. "eps0_expected,eps0_realised,linear_expected,linear_realised,uniform_expected,uniform_realised", header)
    assert.are.equal(120, lines)
    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      assert.truthy(io.open(out .. "/bandit_regret.png"), "no plot")
    end
    -- a longer run resumes from the checkpoints and ends as one run would
    local status2, text2 = run(args:gsub("--steps 120", "--steps 150") .. " --resume --agents bbb,uniform --no-plot")
    assert.are.equal(0, status2, text2)
    has(text2, "[bbb r0] resumed at step 120")
    has(text2, "[uniform r0] resumed at step 120")
    local status3, text3 = run(args:gsub("--steps 120", "--steps 150") .. " --agents bbb,uniform --no-plot --out " .. out .. "/fresh")
    assert.are.equal(0, status3, text3)
    local function final(t) return t:match("\n%s+150%s+(%d+)%s+(%d+)") end
    local a1, a2 = final(text2)
    local b1, b2 = final(text3)
    assert.is_truthy(a1, text2)
    assert.are.same({ b1, b2 }, { a1, a2 })
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("stops on bad input before the run starts", function()
    for args, want in pairs {
      ["--agents bbb,foo"] = "unknown agent 'foo' (known: bbb, eps5, eps1, eps0, linear, uniform)",
      ["--steps 0"] = "--steps: integer '0' is out of range",
      ["--buffer 0"] = "--buffer: integer '0' is out of range",
      ["--buffer 32"] = "--buffer (32) must hold at least one minibatch (--batch 64)",
      ["--data /nonexistent/Mushroom.rda"] = "load_mushroom: /nonexistent/Mushroom.rda not found",
      ["--data scripts/bandit.lua"] = "load_mushroom: rdata: not an R data file",
    } do
      local status, text = run("scripts/bandit.lua " .. args .. " --out " .. out)
      assert.are_not.equal(0, status, text)
      has(text, want)
      assert.is_nil(text:find("r0]", 1, true), text)   -- no worker started
    end
  end)
end)

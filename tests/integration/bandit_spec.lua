-- bbb.bandit: reward and regret bookkeeping on hand-computed sequences,
-- common random numbers, the replay buffer, each agent's interface, the
-- linear agent's posterior against a direct solve, the experiment's config,
-- workers and result in-process, and the script end to end.
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

  it("saves only the rows it holds, and loads them (or a whole saved ring) back", function()
    local buf = bandit.ReplayBuffer{ capacity = 100, width = 2 }
    for k = 1, 4 do buf:add(bbb.tensor{ { k, -k } }, 10 * k) end
    local st, t = buf:state()
    assert.are.same({ 4, 2 }, { t.x:size(1), t.x:size(2) })
    local path = os.tmpname()
    local checkpoint = require "bbb.checkpoint"
    checkpoint.write(path, t, { buffer = st })
    local tensors, meta = checkpoint.read(path)
    local back = bandit.ReplayBuffer{ capacity = 100, width = 2 }
    back:set_state(meta.buffer, tensors)
    os.remove(path)
    local a1, b1 = buf:sample(30, bbb.Generator(2))
    local a2, b2 = back:sample(30, bbb.Generator(2))
    assert.are.same(a1:totable(), a2:totable())
    assert.are.same(b1:totable(), b2:totable())
    local whole = bandit.ReplayBuffer{ capacity = 100, width = 2 }
    whole:set_state(st, { x = buf.x, y = buf.y })   -- every row, as checkpoints once held
    assert.are.same(buf.x:totable(), whole.x:totable())
    local empty = bandit.ReplayBuffer{ capacity = 100, width = 2 }
    local est, et = empty:state()
    assert.are.same({}, et)
    empty:set_state(est, et)
    assert.are.equal(0, empty:size())
    assert.has_error(function() back:set_state(st, { x = bbb.zeros(3, 2), y = bbb.zeros(3, 1) }) end,
      "ReplayBuffer:set_state: the saved rows do not fit a buffer of 100 x 2 holding 4")
    assert.has_error(function() back:set_state(st, {}) end,
      "ReplayBuffer:set_state: the saved rows do not fit a buffer of 100 x 2 holding 4")
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
    ["MC dropout"] = function() return bandit.MCDropout(opts{ dropout = 0.3 }) end,
    NeuralLinear = function() return bandit.NeuralLinear(opts{ refit = 7 }) end,
    ["BBB (KL / t, mean of 2 samples, learned noise)"] = function()
      return bandit.BBB(opts{ kl_n = "seen", decide_samples = 2, learn_sigma = true }) end,
    ["BBB (the paper's minibatch weighting)"] = function() return bandit.BBB(opts{ kl_n = "blundell" }) end,
    ["BBB (heteroscedastic noise)"] = function() return bandit.BBB(opts{ hetero = true, sigma = 0.05 }) end,
    ["BBB (rewards as classes)"] = function() return bandit.BBB(opts{ reward_values = { -35, 0, 5 } }) end,
    ["MC dropout (rewards as classes)"] = function()
      return bandit.MCDropout(opts{ dropout = 0.3, reward_values = { -35, 0, 5 } }) end,
    ["eps-greedy 0% (heteroscedastic noise, at most 1)"] = function()
      return bandit.EpsilonGreedy(opts{ epsilon = 0, hetero = true, sigma = 0.05, sigma_max = 1 }) end,
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

  it("MC dropout scores both actions under one mask, and its draws differ", function()
    local agent = bandit.MCDropout(opts{ dropout = 0.5, hidden = { 64 } })
    local ctx = tiny_data().x:narrow(1, 1, 1)
    -- the same mask for both rows: with the action columns' weights zeroed,
    -- both rows are the same input, so a shared mask gives equal outputs
    local w = agent.net.layers[1].weight
    for i = 1, 64 do w:set(i, 5, 0); w:set(i, 6, 0) end
    local differ = false
    local first = agent:sample_actions(ctx)
    for _ = 1, 20 do
      local v = agent:sample_actions(ctx)
      assert.are.equal(v[1], v[2])
      if v[1] ~= first[1] then differ = true end
    end
    assert.is_true(differ)
  end)

  it("NeuralLinear's refit equals the regression updated row by row on the same features", function()
    local agent = bandit.NeuralLinear(opts{ refit = 1000 })
    local env = bandit.Mushroom{ data = tiny_data(), seed = 4 }
    for _ = 1, 12 do
      local ctx = env:next()
      local a = agent:decide(ctx)
      agent:update(ctx, a, env:act(a))
    end
    -- row by row, with the network's final features
    local ref = bandit.LinearTS{ context_dim = 8, lambda = 0.25, seed = 1 }
    local n = agent.buffer:size()
    local z = agent:features(agent.buffer.x:narrow(1, 1, n))
    for i = 1, n do
      local a = agent.buffer.x:get(i, 6) > 0.5 and 2 or 1
      ref:update(z:narrow(1, i, 1), a, agent.buffer.y:get(i, 1))
    end
    agent:refit_posterior()
    for a = 1, 2 do
      local got, want = agent.blr:posterior_mean(a), ref:posterior_mean(a)
      for i = 1, #want do
        assert.is_true(math.abs(got[i] - want[i]) <= 1e-3 * (1 + math.abs(want[i])), a .. ": " .. got[i] .. " vs " .. want[i])
      end
      assert.are.equal(ref.models[a].n, agent.blr.models[a].n)
    end
  end)

  it("the diagnostics leave the agent's decisions unchanged", function()
    local experiment = require "bbb.app.experiments.bandit_agent"
    local data = tiny_data()
    local function play(probe)
      local acts = {}
      local cfg = { seed = 3, updates = 2, batch = 4, buffer = 16, lr = 1e-3, sigma = 1, rho_init = -3,
        prior_sigma = 0.1, kl = "seen", decide_samples = 1 }
      local diag
      experiment.play{ cfg = cfg, data = data, index = 1, run = 0, steps = 20, probes = probe and { 10 } or {},
        make = function(o) o.hidden = { 8 }; local a = bandit.BBB(o)
          local decide = a.decide
          a.decide = function(self, c) local v = decide(self, c); acts[#acts + 1] = v; return v end
          return a end,
        on_probe = function(_, d) diag = d end }
      return acts, diag
    end
    local a1 = play(false)
    local a2, d = play(true)
    assert.are.same(a1, a2)
    assert.are.equal(2, #d.sigma)
    assert.is_true(d.spread_poison > 0 and d.eat_poison >= 0 and d.eat_poison <= 1)
  end)

  it("counting the costly decisions by cause leaves the run unchanged and counts each one once", function()
    local experiment = require "bbb.app.experiments.bandit_agent"
    local data = tiny_data()
    local function play(causes)
      local cfg = { seed = 5, updates = 2, batch = 4, buffer = 16, lr = 1e-3, sigma = 0.1, rho_init = -3,
        prior_sigma = 0.1, kl = "seen", decide_samples = 1 }
      local acts, costly = {}, 0
      local env = experiment.play{ cfg = cfg, data = data, index = 1, run = 0, steps = 40, causes = causes,
        make = function(o) o.hidden = { 8 }; return bandit.BBB(o) end,
        on_step = function(t, e)
          local r = e.regret_expected
          if t > 10 and r > (acts[#acts] or 0) then costly = costly + 1 end
          acts[#acts + 1] = r
        end }
      return acts, costly, env
    end
    local plain = play(nil)
    local causes = { from = 10 }
    local counted, costly = play(causes)
    assert.are.same(plain, counted)
    local n = 0
    for k, v in pairs(causes) do
      if k ~= "from" then
        assert.truthy(k:match("^eaten_by_") or k:match("^passed_by_"), k)
        n = n + v
      end
    end
    assert.is_true(costly > 0)
    assert.are.equal(costly, n)
  end)

  it("diagnoses a network with a noise output on its mean column", function()
    local experiment = require "bbb.app.experiments.bandit_agent"
    local data = tiny_data()
    local agent = bandit.EpsilonGreedy(opts{ epsilon = 0, hetero = true, sigma = 0.05 })
    agent:update(data.x:narrow(1, 2, 1), 2, -35)
    local v = agent:predict_actions(data.x:narrow(1, 2, 1)):totable()
    local d = experiment.diagnose(agent, data, { rows = 1, samples = 2 })
    assert(math.abs(d.gap_poison - (v[2][1] - v[1][1])) < 1e-6, d.gap_poison .. " vs " .. (v[2][1] - v[1][1]))
  end)

  it("counts the mistakes of the fitted mean as a mushroom-by-mushroom check does", function()
    local experiment = require "bbb.app.experiments.bandit_agent"
    local data = { x = bbb.tensor{ { 1, 0, 1, 0 }, { 0, 1, 1, 0 }, { 1, 0, 0, 1 }, { 0, 1, 0, 1 }, { 1, 1, 0, 0 } },
                   edible = { true, false, true, false, false }, n = 5 }
    for _, agent in ipairs { bandit.EpsilonGreedy(opts{ epsilon = 0, buffer = 64 }), bandit.BBB(opts{ buffer = 64 }) } do
      -- poisonous 2: two lucky meals; 4: one lucky, one -35; 5: never eaten
      for _, t in ipairs { { 2, 5 }, { 2, 5 }, { 4, 5 }, { 4, -35 }, { 1, 5 }, { 3, 5 }, { 1, 5 } } do
        agent:update(data.x:narrow(1, t[1], 1), 2, t[2])
      end
      agent:update(data.x:narrow(1, 5, 1), 1, 0)
      local seed, counter = agent.generator:state()
      local m = experiment.mistakes(agent, data, { samples = 8 })
      local s2, c2 = agent.generator:state()
      assert.are.same({ seed, counter }, { s2, c2 })
      -- the mean's choice, one mushroom at a time
      local modes = {}
      agent.net:apply(function(l) if l.weight_rho then modes[l] = l.mode; l.mode = "mean" end end)
      agent.net:evaluate()
      local kinds = { [2] = "lucky", [4] = "mixed", [5] = "unseen" }
      local want = { poison_eaten = 0, edible_passed = 0, lucky = 0, mixed = 0, unseen = 0 }
      for i = 1, 5 do
        local eats = agent:greedy(data.x:narrow(1, i, 1)) == 2
        if data.edible[i] and not eats then want.edible_passed = want.edible_passed + 1 end
        if not data.edible[i] and eats then
          want.poison_eaten = want.poison_eaten + 1
          want[kinds[i]] = want[kinds[i]] + 1
        end
      end
      for l, mode in pairs(modes) do l.mode = mode end
      agent.net:train()
      for k, v in pairs(want) do assert.are.equal(v, m[k], k) end
      assert.are.equal(m.edible_passed, #m.passed_rows)
      assert.are.equal(m.poison_eaten, #m.eaten_rows)
      for _, i in ipairs(m.passed_rows) do assert.is_true(data.edible[i]) end
      for _, i in ipairs(m.eaten_rows) do assert.is_false(data.edible[i]) end
      assert.are.same({ n = 2, lucky = 2 }, m.meals[2])
      assert.are.same({ n = 2, lucky = 1 }, m.meals[4])
      assert.is_nil(m.meals[5])
      assert.is_true(m.eat_rate >= 0 and m.eat_rate <= 3 / 5 + 1e-12 and m.pass_rate >= 0 and m.pass_rate <= 2 / 5 + 1e-12)
    end
    assert.has_error(function() experiment.mistakes(bandit.Uniform{ context_dim = 4, seed = 1 }, data) end,
      "mistakes: needs a network agent (BBB or epsilon-greedy)")
  end)

  it("lists the feature values a set of mushrooms shares, with their counts over the data and the buffer's meals", function()
    local experiment = require "bbb.app.experiments.bandit_agent"
    local data = { x = bbb.tensor{ { 1, 0, 1, 0 }, { 0, 1, 1, 0 }, { 1, 0, 0, 1 }, { 0, 1, 0, 1 }, { 1, 1, 0, 0 } },
                   edible = { true, false, true, false, false }, n = 5, feature_names = { "a=1", "a=2", "b=1", "b=2" } }
    -- rows 1 and 3 share column 1 alone; rows 1, 3 and 5 have it, row 5 poisonous
    assert.are.same({ { name = "a=1", column = 1, total = 3, poisonous = 1, meals = 3 } },
      experiment.shared_features(data, { 1, 3 }, { [1] = { n = 2, lucky = 2 }, [5] = { n = 1, lucky = 0 }, [2] = { n = 4, lucky = 1 } }))
    assert.are.same({ { name = "a=2", column = 2, total = 3, poisonous = 3, meals = 0 } },
      experiment.shared_features(data, { 2, 4 }))
    assert.are.same({ { name = "a=1", column = 1, total = 3, poisonous = 1, meals = 0 },
                      { name = "b=1", column = 3, total = 2, poisonous = 1, meals = 0 } },
      experiment.shared_features(data, { 1 }, {}))
    assert.are.same({}, experiment.shared_features(data, {}))
    assert.are.same({}, experiment.shared_features(data, { 1, 4 }))
    -- the table form of data.x, given, gives the same lists
    assert.are.same(experiment.shared_features(data, { 1, 3 }, { [1] = { n = 2, lucky = 2 } }),
      experiment.shared_features(data, { 1, 3 }, { [1] = { n = 2, lucky = 2 } }, data.x:totable()))
    data.feature_names = nil
    assert.are.equal("column 2", experiment.shared_features(data, { 2 })[1].name)
  end)

  it("rejects bad options of the new agents and settings", function()
    assert.has_error(function() bandit.MCDropout(opts{ dropout = 1 }) end,
      "MCDropout: dropout must be a number in (0, 1), got 1")
    assert.has_error(function() bandit.NeuralLinear(opts{ refit = 0 }) end,
      "NeuralLinear: refit must be a positive integer, got 0")
    assert.has_error(function() bandit.NeuralLinear(opts{ lambda = -1 }) end,
      "NeuralLinear: lambda must be a number > 0, got -1")
    assert.has_error(function() bandit.BBB(opts{ kl_n = "t" }) end,
      'BBB: kl_n must be "size", "capacity", "seen" or "blundell", got t')
    assert.has_error(function() bandit.BBB(opts{ decide_samples = 0 }) end,
      "BBB: decide_samples must be a positive integer, got 0")
    -- the input layer's own prior
    local wide = bbb.prior.Gaussian{ sigma = 0.3 }
    local a = bandit.BBB(opts{ prior_in = wide })
    assert.are.equal(wide, a.net.layers[1].prior)
    assert.are_not.equal(wide, a.net.layers[3].prior)
    assert.are.equal(0.1, a.net.layers[3].prior.sigma)
    assert.has_error(function() bandit.BBB(opts{ reward_values = { 5 } }) end,
      "BBB: reward_values must list at least two rewards, got 1")
    assert.has_error(function() bandit.BBB(opts{ reward_values = { 5, math.huge } }) end,
      "BBB: reward_values[2] must be a finite number, got inf")
    assert.has_error(function() bandit.BBB(opts{ reward_values = { 5, 0, 5 } }) end,
      "BBB: reward_values lists 5 twice")
    assert.has_error(function() bandit.NeuralLinear(opts{ reward_values = { 5, 0 } }) end,
      "NeuralLinear: reward_values does not apply (its last layer is a regression on the rewards)")
    local classes = bandit.BBB(opts{ reward_values = { -35, 0, 5 } })
    assert.has_error(function() classes:update(tiny_data().x:narrow(1, 1, 1), 2, 4) end,
      "BBB:update: reward 4 is not one of reward_values")
    -- the prediction is the expected reward under the class probabilities
    local logits = bbb.tensor{ { 0, 1, 2 }, { 3, -1, 0 } }
    local want = {}
    for i, row in ipairs(logits:totable()) do
      local z, e = 0, 0
      for k, l in ipairs(row) do z = z + math.exp(l); e = e + math.exp(l) * ({ -35, 0, 5 })[k] end
      want[i] = e / z
    end
    local got = classes:value(logits):totable()
    for i = 1, 2 do assert(math.abs(got[i][1] - want[i]) < 1e-4, got[i][1] .. " vs " .. want[i]) end
    assert.has_error(function() bandit.BBB(opts{ sigma_final = -1, sigma_steps = 10 }) end,
      "BBB: sigma_final must be a finite number > 0, got -1")
    assert.has_error(function() bandit.BBB(opts{ sigma_final = 1 }) end,
      "BBB: sigma_steps must be a positive integer, got nil")
    -- the noise grows geometrically with the transitions seen, then stays
    local growing = bandit.BBB(opts{ sigma = 0.05, sigma_final = 0.8, sigma_steps = 4 })
    local seen = {}
    for _ = 1, 6 do
      growing:update(tiny_data().x:narrow(1, 1, 1), 2, 5)
      seen[#seen + 1] = growing.elbo:sigma()
    end
    for k, want in ipairs { 0.1, 0.2, 0.4, 0.8, 0.8, 0.8 } do
      assert(math.abs(seen[k] - want) < 1e-12, k .. ": " .. seen[k] .. " vs " .. want)
    end
    assert.has_error(function() bandit.BBB(opts{ reward_scale = 0 }) end,
      "BBB: reward_scale must be a finite number > 0, got 0")
    -- the buffer holds the scaled reward
    local scaled = bandit.EpsilonGreedy(opts{ epsilon = 0, reward_scale = 0.1 })
    scaled:update(tiny_data().x:narrow(1, 2, 1), 2, -35)
    assert.are.equal(-3.5, math.floor(scaled.buffer.y:get(1, 1) * 1e4 + 0.5) / 1e4)
  end)

  it("rejects a buffer smaller than a minibatch", function()
    assert.has_error(function() bandit.BBB(opts{ buffer = 2 }) end,
      "BBB: buffer (2) must hold at least one minibatch (4)")
    assert.has_error(function() bandit.EpsilonGreedy(opts{ epsilon = 2 }) end,
      "EpsilonGreedy: epsilon must be in [0, 1], got 2")
  end)

  it("linear TS factors a Gram matrix that float32 rounding left indefinite, with a recorded jitter", function()
    local agent = bandit.LinearTS{ context_dim = 1, lambda = 0.25, seed = 1 }
    -- (1e6, 1e6; 1e6, 1e6 - 1) + 0.25 I is indefinite; 1e-6 of the mean diagonal fixes it
    local G = { 1e6, 1e6, 1e6, 1e6 - 1 }
    agent:set_posterior(1, G, { 1, 2 }, 3, 10)
    local shift = 0.25 + (2e6 - 1) / 2 * 1e-6
    assert(math.abs(agent.jitter[1] - (2e6 - 1) / 2 * 1e-6) < 1e-12)
    local L = agent.models[1].L
    -- L L' = G + shift I
    local want = { G[1] + shift, G[2], G[3], G[4] + shift }
    local got = { L[1] * L[1], L[1] * L[3], L[3] * L[1], L[3] * L[3] + L[4] * L[4] }
    for k = 1, 4 do assert(math.abs(got[k] - want[k]) <= 1e-9 * math.abs(want[k]), k .. ": " .. got[k]) end
    agent:set_posterior(2, { 2, 1, 1, 2 }, { 1, 2 }, 3, 10)
    assert.are.equal(0, agent.jitter[2])
    assert.has_error(function() agent:set_posterior(1, { -1e6, 0, 0, 1 }, { 1, 2 }, 3, 10) end,
      "linear TS:set_posterior: X'X + lambda I is not positive definite")
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

describe("bbb.app.experiments.bandit", function()
  local experiment = require "bbb.app.experiments.bandit"
  local json = require "bbb.json"
  local out = os.tmpname()
  os.remove(out)

  it("gives a worker the coordinator's config, to the type, with or without --paper-agent", function()
    for _, flags in ipairs {
      {},
      { "--paper-agent" },
      { "--paper", "--agents", "bbb" },
      { "--noise-model", "hetero", "--prior-sigma-in", "0", "--prior-mix", "0.5,1.0,0.1", "--sigma", "1.0" },
      { "--paper-agent", "--learn-sigma", "--sigma-final", "0.5", "--rho-init", "-4", "--resume", "--jobs", "3" },
    } do
      local args = experiment.parse { "--out", out, table.unpack(flags) }
      local config = experiment.config(args)
      local worker = experiment.parse(experiment.worker_args(args, config, "bbb", 1))
      assert.are.equal("bbb", worker.worker)
      assert.are.equal(1, worker.run)
      assert.are.equal(args.out, worker.out)
      assert.are.equal(args.resume, worker.resume)
      local got = experiment.config(worker)
      assert.are.equal(1, got.repeats)   -- a worker plays one run
      got.repeats = config.repeats
      assert.are.same(config, got)
      for k, v in pairs(config) do assert.are.equal(math.type(v), math.type(got[k]), k) end
    end
  end)

  it("reads a saved config again: its integers are integers, a refused value names its setting", function()
    local config = experiment.config(experiment.parse { "--out", out, "--noise-model", "hetero",
      "--prior-mix", "0.5,1,0.1", "--prior-sigma-in", "0" })
    local saved = json.decode(json.encode(config))   -- as a checkpoint gives it back
    assert.are.equal("float", math.type(saved.updates))
    local back = experiment.saved_config(saved, "c.safetensors")
    assert.are.same(config, back)
    for _, k in ipairs { "steps", "updates", "batch", "buffer", "seed", "repeats", "every", "decide_samples",
                         "refit", "sigma_steps" } do
      assert.are.equal("integer", math.type(back[k]), k)
    end
    assert.is_true(back.hetero)
    assert.is_false(back.prior_sigma_in)
    saved.kl = "t"
    helpers.errors_with(function() experiment.saved_config(saved, "c.safetensors") end,
      "c.safetensors holds an invalid --kl (expected one of size, capacity, seen, blundell, got 't')")
  end)

  it("runs the workers and returns each agent's curves over its runs", function()
    local args = experiment.parse { "--agents", "uniform,bbb", "--steps", "30", "--updates", "2", "--batch", "8",
      "--buffer", "64", "--repeats", "2", "--jobs", "2", "--checkpoint-every", "0", "--out", out,
      "--data", helpers.root .. "/data/mushroom/Mushroom.rda" }
    local result = experiment.run(args, { command = { helpers.bbblua, helpers.root .. "/scripts/bandit.lua" } })
    assert.are.same({ "bbb", "uniform" }, result.names)
    assert.are.equal(30, result.steps)
    assert.are.equal(2, result.repeats)
    assert.are.equal(out .. "/bandit_curves.csv", result.csv)
    for _, name in ipairs(result.names) do
      local finals = {}
      for r = 0, 1 do   -- each worker's own curve
        local last
        for line in io.lines(("%s/raw/%s_r%d.csv"):format(out, name, r)) do last = line end
        finals[#finals + 1] = tonumber(last:match("^30,([^,]+),"))
      end
      assert.are.same(finals, result.finals[name])
      assert.are.equal((finals[1] + finals[2]) / 2, result.expected[name][30])
      assert.are.equal(math.min(finals[1], finals[2]), result.lowest[name][30])
      assert.are.equal(math.max(finals[1], finals[2]), result.highest[name][30])
      assert.are.equal(30, #result.realised[name])
    end
    assert.are_not.equal(result.finals.uniform[1], result.finals.uniform[2])   -- two seeds
    os.execute("rm -rf '" .. out .. "'")
  end)
end)

describe("scripts/bandit.lua", function()
  local out = os.tmpname()
  os.remove(out)

  it("answers --help, as do its benchmark and its inspector", function()
    local status, text = run("scripts/bandit.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    has(text, "--resume")
    has(text, "--paper-agent")
    status, text = run("scripts/bandit_ablation.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    status, text = run("scripts/bench_bandit.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    status, text = run("scripts/bandit_inspect.lua --help")
    assert.are.equal(0, status, text)
    has(text, "Usage:")
    has(text, "poisonous mushrooms its mean eats")
  end)

  it("bench_bandit projects the paper protocol for every agent and 5 seeds, never below its GEMMs alone", function()
    local path = out .. "-bench.json"
    local status, text = run("scripts/bench_bandit.lua --updates 20 --steps 1 --late 10 --json " .. path)
    assert.are.equal(0, status, text)
    local f = assert(io.open(path))
    local b = require("bbb.json").decode(f:read("a"))
    f:close()
    os.remove(path)
    -- every update timed, each no faster than its bare GEMMs could allow in part
    for _, k in ipairs { "bayes_fused", "bayes_graph", "plain_fused", "plain_graph" } do
      assert.is_true(b.updates[k].ms > 0, k)
    end
    assert.is_true(b.gemm_ms > 0)
    -- the Bayesian update's own passes, each a positive time, on top of its GEMMs
    local p = b.bayes_passes
    assert.is_true(p.draws_ms > 0 and p.sample_ms > 0 and p.adam_ms > 0)
    assert.is_near(b.gemm_ms + p.draws_ms + p.sample_ms + p.adam_ms, p.floor_ms, 1e-9)
    -- every agent's steps, early and late; the products' share of a network agent's
    -- late step is a part of it, the agents without a network have none
    for _, name in ipairs { "bbb", "eps5", "eps1", "eps0", "linear", "uniform", "dropout", "neurallinear" } do
      assert.is_true(b.step_ms[name] >= 0 and b.late_step_ms[name] >= 0, name)
    end
    for _, name in ipairs { "bbb", "eps0", "dropout", "neurallinear" } do
      assert.is_true(b.product_share[name] > 0 and b.product_share[name] < 1, name)
    end
    assert.are.equal(0, b.product_share.uniform)
    -- the projection: never below the GEMMs alone; the floor with BBB's passes between;
    -- with every product free, below the projection
    local m = b.protocol_min
    assert.is_true(m.gemms_alone > 0 and m.projected >= m.gemms_alone)
    assert.is_true(m.with_bbb_passes >= m.gemms_alone)
    assert.is_true(m.products_free < m.projected)
    assert.is_string(b.environment.openblas)
  end)

  it("replays the recorded regrets at step 1,000 in the recorded environment (OpenBLAS pinned)", function()
    -- the recorded runs were made on OpenBLAS 0.3.21's Haswell kernels: pinned to them, the
    -- products (and so every regret) are the recorded ones
    local ok_env, why = helpers.recorded_environment()
    if not ok_env then
      pending(why)
      return
    end
    local want = {}
    for line in io.lines(helpers.root .. "/tests/fixtures/bandit_regret_1k_haswell.csv") do
      local agent, seed, recorded = line:match("^(%w+),(%d+),(%d+),")
      if seed == "1" then want[agent] = tonumber(recorded) end
    end
    local status, text = run("scripts/bandit.lua --agents bbb,eps0,neurallinear --steps 1000 --jobs 2 --out "
      .. out .. "-1k", "OPENBLAS_CORETYPE=Haswell")
    assert.are.equal(0, status, text)
    for _, agent in ipairs { "bbb", "eps0", "neurallinear" } do
      local last
      for line in io.lines(out .. "-1k/raw/" .. agent .. "_r0.csv") do
        last = line:match("^1000,(%-?%d+),") or last
      end
      assert.are.equal(want[agent], tonumber(last), agent)
    end
    os.execute("rm -rf '" .. out .. "-1k'")
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
      .. "eps0_expected,eps0_realised,linear_expected,linear_realised,uniform_expected,uniform_realised,"
      .. "dropout_expected,dropout_realised,neurallinear_expected,neurallinear_realised", header)
    assert.are.equal(120, lines)
    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      assert.truthy(io.open(out .. "/bandit_regret.png"), "no plot")
    end
    -- a longer run resumes from the checkpoints and ends as one run would
    local more = args:gsub("--steps 120", "--steps 150") .. " --agents bbb,uniform,dropout,neurallinear --no-plot"
    local status2, text2 = run(more .. " --resume")
    assert.are.equal(0, status2, text2)
    for _, name in ipairs { "bbb", "uniform", "dropout", "neurallinear" } do
      has(text2, "[" .. name .. " r0] resumed at step 120")
    end
    local status3, text3 = run(more .. " --out " .. out .. "/fresh")
    assert.are.equal(0, status3, text3)
    local function final(t) return { t:match("\n%s+150%s+(%d+)%s+(%d+)%s+(%d+)%s+(%d+)") } end
    local a, b = final(text2), final(text3)
    assert.are.equal(4, #a, text2)
    assert.are.same(b, a)
    -- a setting changed on --resume is refused, naming it
    local status4, text4 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --kl size")
    assert.are_not.equal(0, status4, text4)
    has(text4, "was written with --kl seen, this run has size")
    local status5, text5 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --sigma-final 1")
    assert.are_not.equal(0, status5, text5)
    has(text5, "bbb_r0.safetensors was written with --sigma-final 3, this run has 1")
    -- weight samples per decision are BBB's alone: the other agents resume under another number
    local status6, text6 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --decide-samples 3")
    assert.are_not.equal(0, status6, text6)
    has(text6, "bbb_r0.safetensors was written with --decide-samples 1, this run has 3")
    -- the input layer's prior is BBB's alone too
    local status8, text8 = run(more:gsub("--steps 150", "--steps 160") .. " --resume --prior-sigma-in 0.5")
    assert.are_not.equal(0, status8, text8)
    has(text8, "bbb_r0.safetensors was written with --prior-sigma-in ")
    has(text8, ", this run has 0.5")
    -- (the refused --sigma-final run above took the other agents on to step 160)
    local status7, text7 = run(more:gsub("--steps 150", "--steps 170"):gsub("bbb,", "") .. " --resume --decide-samples 3")
    assert.are.equal(0, status7, text7)
    has(text7, "[dropout r0] resumed at step 160")
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("bandit_ablation.lua prints its table, records each run at once and does not rerun a recorded one", function()
    local res = out .. "-ablation.jsonl"
    local cmd = "scripts/bandit_ablation.lua --rows paper,unb-samples2,greedy --seeds 1 --steps 60 --probes 30,60 --results " .. res
    local status, text = run(cmd)
    assert.are.equal(0, status, text)
    for _, want in ipairs { "regret at step 60", "paper", "unb-samples2", "greedy", "P(eat|p)" } do has(text, want) end
    local f = assert(io.open(res))
    local n = 0
    for line in f:lines() do
      n = n + 1
      has(line, '"command":"build/bbblua scripts/bandit_ablation.lua --rows')
      has(line, '"commit":')
    end
    f:close()
    assert.are.equal(3, n)
    local status2, text2 = run(cmd)
    assert.are.equal(0, status2, text2)
    assert.is_nil(text2:find("step 30/60", 1, true), text2)   -- nothing played again
    assert.are.equal(text:match("regret at step.*$"), text2:match("regret at step.*$"))
    -- a record made while the row meant other settings (a default changed since) is played again
    local lines = {}
    for line in io.lines(res) do lines[#lines + 1] = line end
    local g = assert(io.open(res, "w"))
    g:write((lines[1]:gsub('"settings":{}', '"settings":{"rho_init":-4}')), "\n")
    assert(g:close())
    has(lines[1], '"row":"paper"')
    local status3, text3 = run(cmd:gsub("paper,unb%-samples2,greedy", "paper"))
    assert.are.equal(0, status3, text3)
    has(text3, "[paper seed 1] step 30/60")
    local n3 = 0
    for _ in io.lines(res) do n3 = n3 + 1 end
    assert.are.equal(2, n3)
    for args, want in pairs {
      ["--rows foo"] = "--rows: unknown row 'foo'",
      ["--seeds 1,x"] = "--seeds: 'x' is not a non-negative integer",
      ["--probes ,"] = "--probes names nothing",
      ["--causes-from 0"] = "--causes-from",
    } do
      local st, tx = run("scripts/bandit_ablation.lua " .. args .. " --results " .. res)
      assert.are.equal(2, st, tx)
      has(tx, "bandit_ablation.lua: " .. want)
    end
    os.remove(res)
  end)

  it("bandit_inspect.lua reads the saved agents of a run with the learned noise, and resume keeps the noise model", function()
    local dir = out .. "-inspect"
    local args = "scripts/bandit.lua --steps 60 --updates 2 --batch 8 --buffer 64 --agents bbb,eps0,uniform "
      .. "--noise-model hetero --no-plot --out " .. dir
    local status, text = run(args)
    assert.are.equal(0, status, text)
    local st, tx = run("scripts/bandit_inspect.lua --shared " .. dir .. "/ckpt/bbb_r0.safetensors " .. dir .. "/ckpt/eps0_r0.safetensors")
    assert.are.equal(0, st, tx)
    has(tx, "poison")
    has(tx, "lucky")
    -- --shared: a list per agent and kind of mistake that it makes, each value with three counts
    for _, name in ipairs { "bbb_r0", "eps0_r0" } do
      local n1 = tonumber(tx:match(name .. "%.safetensors%s+60%s+%d+%s+(%d+)"))
      local n0 = tonumber(tx:match(name .. "%.safetensors%s+60%s+(%d+)"))
      for _, kind in ipairs { { n1, "edible mushrooms the mean passes" }, { n0, "poisonous mushrooms the mean eats" } } do
        local count, what = kind[1], kind[2]
        local head = name .. ".safetensors: the " .. count .. " " .. what .. " all have"
        if count > 0 then
          has(tx, head)
          assert.truthy(tx:match(head:gsub("%p", "%%%0") .. "\n[^\n]+\n  %S+%s+%d+%s+%d+%%%s+%d+"), tx)
        else
          assert.is_nil(tx:find(head, 1, true))
        end
      end
    end
    for _, name in ipairs { "bbb_r0", "eps0_r0" } do
      -- step 60, then five counts and two rates
      assert.truthy(tx:match(name .. "%.safetensors%s+60%s+%d+%s+%d+%s+[%d.]+%s+[%d.]+%s+%d+%s+%d+%s+%d+"), tx)
    end
    for a, want in pairs {
      [dir .. "/ckpt/uniform_r0.safetensors"] = "agent uniform: only BBB and the epsilon-greedy agents can be inspected",
      [dir .. "/nothing.safetensors"] = "nothing.safetensors",
      [""] = "checkpoints",
    } do
      local s2, t2 = run("scripts/bandit_inspect.lua " .. a)
      assert.are_not.equal(0, s2, t2)
      has(t2, want)
    end
    local s3, t3 = run(args:gsub("--steps 60", "--steps 80"):gsub("--noise%-model hetero", "") .. " --resume")
    assert.are_not.equal(0, s3, t3)
    has(t3, "was written with --noise-model hetero, this run has fixed")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("stops on bad input before the run starts", function()
    for args, want in pairs {
      ["--agents bbb,foo"] = "unknown agent 'foo' (known: bbb, eps5, eps1, eps0, linear, uniform, dropout, neurallinear)",
      ["--kl t"] = "--kl: expected one of size, capacity, seen, blundell, got 't'",
      ["--decide-samples 0"] = "--decide-samples: integer '0' is out of range",
      ["--dropout 1"] = "--dropout: number '1' is out of range: must be in [0, 1)",
      ["--refit 0"] = "--refit: integer '0' is out of range",
      ["--sigma-final 0"] = "--sigma-final: number '0' is out of range",
      ["--sigma-steps 0"] = "--sigma-steps: integer '0' is out of range",
      ["--noise-model learned"] = "--noise-model: expected one of fixed, hetero, got 'learned'",
      ["--noise-model hetero --learn-sigma"] = "--learn-sigma learns one noise for every reward",
      ["--prior-sigma-in -1"] = "--prior-sigma-in: number '-1' is out of range",
      ["--prior-sigma-in wide"] = "--prior-sigma-in: expected a number, got 'wide'",
      ["--prior-mix 0.5,1"] = "--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1",
      ["--prior-mix 1.5,1,0.1"] = "--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1",
      ["--prior-mix 0.5,0,0.1"] = "--prior-mix must be PI,SIGMA1,SIGMA2 with 0 < PI < 1",
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

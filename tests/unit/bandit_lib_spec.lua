-- bbb.bandit in-process: reward and regret bookkeeping on hand-computed
-- sequences, common random numbers, the replay buffer, each agent's
-- interface, and the linear agent's posterior against a direct solve.
local bbb = require "bbb"
local bandit = require "bbb.bandit"

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

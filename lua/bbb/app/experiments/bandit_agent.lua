--- bbb.app.experiments.bandit_agent: one agent of the Mushroom bandit
-- experiment (bbb.app.experiments.bandit runs them all and reports): the
-- agents' settings (DEFAULTS, PAPER_AGENT, the ablation's rows), one agent's
-- run from a configuration table, shared by scripts/bandit.lua's workers and
-- scripts/bandit_ablation.lua, and the posterior diagnostics of a network
-- agent (the mean sigma of each Bayesian layer, and the spread over weight
-- samples of f(eat) - f(pass) on poisonous and edible mushrooms).
-- The agents and the environment themselves are the library's, in bbb.bandit.
local bbb = require "bbb"
local env_mod = require "bbb.bandit.env"
local agents = require "bbb.bandit.agents"

local M = {}

--- The agent settings of the network agents: DEFAULTS are the ones the
-- ablation chose (doc/notebook/bandit.md), PAPER_AGENT the ones used before it
-- (section 5.3's buffer of the last 4,096 transitions with the complexity
-- term divided by its size, one weight sample per decision).
M.PAPER_AGENT = { buffer = 4096, kl = "size", sigma = 1, learn_sigma = false, hetero = false, rho_init = -3,
  prior_sigma = 0.1, prior_sigma_in = false, prior_mix = false, decide_samples = 1, lr = 1e-3, updates = 64, batch = 64,
  dropout = 0.2, refit = 100, sigma_final = false, sigma_steps = 5000 }
M.DEFAULTS = {}
for k, v in pairs(M.PAPER_AGENT) do M.DEFAULTS[k] = v end
-- Every transition kept, the complexity term divided by the transitions seen
-- so far. One weight sample per decision (pure Thompson sampling): the mean
-- of two samples explores less and can stop eating altogether
-- (doc/notebook/bandit.md, sections 4 and 10). Likelihood noise 0.05: the costly
-- decisions come from a wrong posterior mean rather than from the draws, and
-- a smaller noise weighs each reward more against the complexity term
-- (section 5).
M.DEFAULTS.buffer, M.DEFAULTS.kl, M.DEFAULTS.sigma, M.DEFAULTS.decide_samples = 100000, "seen", 0.05, 1
-- BBB's noise grows from 0.05 to 3 over the first transitions: the late
-- mistakes are poisonous mushrooms whose every meal was lucky (+5), which a
-- noise of 0.05 makes worth (20 / 0.05)^2 / 2 nats against the features; at
-- noise 3 one lucky meal no longer outweighs them, while the small noise
-- early still teaches the mean fast (section 6). Why it grows over 2,500
-- transitions rather than 5,000: section 8.
M.DEFAULTS.sigma_final, M.DEFAULTS.sigma_steps = 3, 2500
-- BBB's input layer has the prior N(0, 0.2^2), the other layers N(0, 0.1^2):
-- under 0.1 everywhere, a seed with few poisonous meals by the end of the
-- noise's growth can lose its feature weights to the complexity term as the
-- noise reaches 3, and then eats every mushroom for a while. A weight of the
-- input layer carries one feature value; under 0.2 it costs a quarter of the
-- nats (section 11).
M.DEFAULTS.prior_sigma_in = 0.2
-- The baselines' own settings, chosen as BBB's were: on tuning seeds 1-5 at
-- 10,000 steps (doc/results/bandit_tune_baselines.csv). MC dropout TS keeps
-- units with probability 0.95: the best of 0.01 to 0.4, with worse rates on
-- either side. NeuralLinear refits its regression every 100 steps, the best
-- of 10, 50, 100 and 400.
M.DEFAULTS.dropout, M.DEFAULTS.refit = 0.05, 100


-- "unb": every transition kept, the complexity term divided by t; "S4":
-- doc/notebook/bandit.md section 4's defaults.
local UNB = { buffer = 100000 }
local S4 = { buffer = 100000, kl = "seen", sigma = 0.1, decide_samples = 1 }
--- with(t, extra) -> a copy of t with extra's fields set.
function M.with(t, extra)
  local o = {}
  for k, v in pairs(t) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

--- The ablation's rows (scripts/bandit_ablation.lua): {name, settings, what}; each
-- row's settings change PAPER_AGENT.
M.ABLATION_ROWS = {
  { "paper", {}, "the previous agent: last 4,096 transitions, KL / buffer size" },
  { "kl-seen", { kl = "seen" }, "KL / t, sliding buffer of 4,096" },
  { "kl-blundell", { kl = "blundell" }, "the paper's minibatch weighting, sliding buffer" },
  { "unbounded", UNB, "all data kept, KL / t" },
  { "unb-kl-capacity", M.with(UNB, { kl = "capacity" }), "all data kept, KL / 100,000 from the start" },
  { "unb-sigma0.1", M.with(UNB, { sigma = 0.1 }), "likelihood noise 0.1" },
  { "unb-sigma0.3", M.with(UNB, { sigma = 0.3 }), "likelihood noise 0.3" },
  { "unb-sigma0.1-samples2", M.with(UNB, { sigma = 0.1, decide_samples = 2 }), "noise 0.1, mean of 2 samples" },
  { "unb-sigma0.1-kl-capacity", M.with(UNB, { sigma = 0.1, kl = "capacity" }), "noise 0.1, KL / 100,000" },
  { "unb-sigma5", M.with(UNB, { sigma = 5 }), "likelihood noise 5" },
  { "unb-sigma-learned", M.with(UNB, { learn_sigma = true }), "likelihood noise learned (from 1)" },
  { "unb-rho-5", M.with(UNB, { rho_init = -5 }), "initial sigma 0.0067" },
  { "unb-rho-6", M.with(UNB, { rho_init = -6 }), "initial sigma 0.0025" },
  { "unb-samples2", M.with(UNB, { decide_samples = 2 }), "mean of 2 weight samples per decision" },
  { "unb-prior0.03", M.with(UNB, { prior_sigma = 0.03 }), "prior N(0, 0.03^2)" },
  { "unb-prior0.05", M.with(UNB, { prior_sigma = 0.05 }), "prior N(0, 0.05^2)" },
  { "prior0.03", { prior_sigma = 0.03 }, "prior N(0, 0.03^2), sliding buffer" },
  { "unb-prior0.03-samples2", M.with(UNB, { prior_sigma = 0.03, decide_samples = 2 }), "prior 0.03, mean of 2 samples" },
  { "unb-mixture", M.with(UNB, { prior_mix = { 0.75, math.exp(-1), math.exp(-6) }, rho_init = -5 }),
    "scale-mixture prior (0.75, e^-1, e^-6), rho -5" },
  { "unb-rho-5-prior0.05", M.with(UNB, { rho_init = -5, prior_sigma = 0.05 }), "the issue's candidate" },
  { "unb-lr3e-4", M.with(UNB, { lr = 3e-4 }), "Adam lr 3e-4" },
  { "unb-updates16", M.with(UNB, { updates = 16 }), "16 updates per step" },
  { "greedy-unb", M.with(UNB, { agent = "eps0" }), "the greedy MLP, all data kept" },
  -- From section 4's defaults (all data, KL / t, noise 0.1, one sample per decision).
  { "s4", S4, "section 4's defaults" },
  { "s4-sigma0.05", M.with(S4, { sigma = 0.05 }), "likelihood noise 0.05" },
  { "s4-sigma0.02", M.with(S4, { sigma = 0.02 }), "likelihood noise 0.02" },
  { "s4-sigma0.3", M.with(S4, { sigma = 0.3 }), "likelihood noise 0.3" },
  { "s4-kl-capacity", M.with(S4, { kl = "capacity" }), "KL / 100,000 from the start" },
  { "s4-mixture", M.with(S4, { prior_mix = { 0.75, math.exp(-1), math.exp(-6) }, rho_init = -5 }),
    "scale-mixture prior (0.75, e^-1, e^-6), rho -5" },
  { "s4-lr2e-3", M.with(S4, { lr = 2e-3 }), "Adam lr 2e-3" },
  { "s4-batch256", M.with(S4, { batch = 256, updates = 16 }), "16 updates of 256 per step" },
  { "s4-greedy", M.with(S4, { agent = "eps0" }), "the greedy MLP with section 4's settings" },
  { "greedy", { agent = "eps0" }, "the greedy MLP, last 4,096 transitions" },
  -- Section 5: s4-sigma0.05 (the defaults) with the noise learned.
  { "s5-hetero", M.with(S4, { sigma = 0.05, hetero = true }), "the noise learned per mushroom and action, floor 0.05" },
  { "s5-hetero-max1", M.with(S4, { sigma = 0.05, hetero = true, sigma_max = 1 }), "the noise learned per mushroom and action, 0.05 to 1" },
  { "s5-hetero-max0.3", M.with(S4, { sigma = 0.05, hetero = true, sigma_max = 0.3 }), "the noise learned per mushroom and action, 0.05 to 0.3" },
  { "s5-scale0.1-sigma0.1", M.with(S4, { reward_scale = 0.1, sigma = 0.1 }), "rewards / 10 (+0.5, -3.5), noise 0.1 (1 in reward units)" },
  { "s5-scale0.1-sigma0.3", M.with(S4, { reward_scale = 0.1, sigma = 0.3 }), "rewards / 10, noise 0.3 (3 in reward units)" },
  { "s5-scale0.1-sigma0.5", M.with(S4, { reward_scale = 0.1, sigma = 0.5 }), "rewards / 10, noise 0.5 (5 in reward units)" },
  { "s5-scale0.1-sigma1", M.with(S4, { reward_scale = 0.1, sigma = 1 }), "rewards / 10, noise 1 (10 in reward units)" },
  { "s5-categorical", M.with(S4, { reward_values = { -35, 0, 5 } }), "the rewards as three classes (-35, 0, +5), a categorical likelihood" },
  { "s5-categorical-kl-capacity", M.with(S4, { reward_values = { -35, 0, 5 }, kl = "capacity" }), "the rewards as classes, KL / 100,000 from the start" },
  { "s5-sigma-grows3", M.with(S4, { sigma = 0.05, sigma_final = 3, sigma_steps = 5000 }), "noise 0.05 growing to 3 over the first 5,000 transitions" },
  { "default-in0.3", M.with(M.DEFAULTS, { prior_sigma_in = 0.3 }), "bandit.lua's defaults, the input layer's prior N(0, 0.3^2)" },
  { "default", M.with(M.DEFAULTS), ("bandit.lua's defaults (noise %g growing to %g over the first %d transitions, "
    .. "the input layer's prior N(0, %g^2))"):format(M.DEFAULTS.sigma, M.DEFAULTS.sigma_final, M.DEFAULTS.sigma_steps,
    M.DEFAULTS.prior_sigma_in) },
}

--- prior(cfg) -> the prior of the Bayesian layers: N(0, prior_sigma^2), or
-- with prior_mix = {pi, sigma1, sigma2} the scale mixture.
function M.prior(cfg)
  if cfg.prior_mix then
    local m = cfg.prior_mix
    return bbb.prior.ScaleMixture{ pi = m[1], sigma1 = m[2], sigma2 = m[3] }
  end
  return bbb.prior.Gaussian{ sigma = cfg.prior_sigma }
end

--- agent_seed(cfg, index, run): agent `index` of run `run` (0-based) gets
-- its own seed; the environment's is cfg.seed + run (common random numbers).
function M.agent_seed(cfg, index, run) return 1000003 * (cfg.seed + run) + 7919 * index end

--- agent_opts(cfg, index, run, context_dim) -> the options of any agent constructor.
function M.agent_opts(cfg, index, run, context_dim)
  return { seed = M.agent_seed(cfg, index, run), updates = cfg.updates, batch = cfg.batch,
    buffer = cfg.buffer, lr = cfg.lr, sigma = cfg.sigma, learn_sigma = cfg.learn_sigma, hetero = cfg.hetero,
    sigma_max = cfg.sigma_max, reward_scale = cfg.reward_scale, reward_values = cfg.reward_values,
    sigma_final = cfg.sigma_final, sigma_steps = cfg.sigma_steps,
    rho_init = cfg.rho_init, prior = M.prior(cfg), kl_n = cfg.kl, decide_samples = cfg.decide_samples,
    prior_in = cfg.prior_sigma_in and bbb.prior.Gaussian{ sigma = cfg.prior_sigma_in } or nil,
    dropout = cfg.dropout, refit = cfg.refit, context_dim = context_dim }
end

-- Rows of the table: every `stride`-th poisonous and edible mushroom, k of each.
local function probe_rows(data, k)
  local poison, edible = {}, {}
  for i = 1, data.n do
    local list = data.edible[i] and edible or poison
    list[#list + 1] = i
  end
  local function pick(list)
    local out, stride = {}, math.max(1, #list // k)
    for j = 1, math.min(k, #list) do out[j] = list[(j - 1) * stride + 1] end
    return bbb.tensor(out)
  end
  return pick(poison), pick(edible)
end

-- f(eat) - f(pass) for each row of x under one draw of the network.
local function gaps(agent, x)
  local net = agent.net
  local n = x:size(1)
  local pass = bbb.cat({ x, bbb.zeros{ n, 2 } + bbb.tensor{ { 1, 0 } } }, 2)
  local eat = bbb.cat({ x, bbb.zeros{ n, 2 } + bbb.tensor{ { 0, 1 } } }, 2)
  local f = agent:value(net:forward(bbb.cat({ pass, eat }, 1))):reshape(-1):totable()
  local out = {}
  for i = 1, n do out[i] = f[n + i] - f[i] end
  return out
end

--- diagnose(agent, data, {rows = 200, samples = 32}) -> {sigma = {mean sigma of
-- each Bayesian layer's weights}, spread_poison, gap_poison, eat_poison,
-- spread_edible, gap_edible, pass_edible}: spread is the standard deviation
-- of f(eat) - f(pass) over weight samples averaged over the mushrooms, gap
-- its mean, eat_poison the fraction of (mushroom, sample) pairs that would
-- eat a poisonous one. The agent's generator is restored afterwards, so a
-- diagnosed run takes the same decisions as one that is not.
function M.diagnose(agent, data, o)
  o = o or {}
  local net = agent.net
  if not net then return {} end
  local g = agent.generator
  local seed, counter = g:state()
  local sig = {}
  net:apply(function(l)
    if l.weight_rho then
      sig[#sig + 1] = bbb.no_grad(function() return l.weight_rho:softplus():mean():item() end)
    end
  end)
  local poison, edible = probe_rows(data, o.rows or 200)
  local res = { sigma = sig }
  for _, part in ipairs { { "poison", poison }, { "edible", edible } } do
    local x = data.x:index_select(part[2])
    local S = o.samples or 32
    local sum, sq, wrong, n = {}, {}, 0, x:size(1)
    for i = 1, n do sum[i], sq[i] = 0, 0 end
    for _ = 1, S do
      local d = bbb.no_grad(function() return gaps(agent, x) end)
      for i = 1, n do
        sum[i], sq[i] = sum[i] + d[i], sq[i] + d[i] * d[i]
        if (part[1] == "poison") == (d[i] > 0) then wrong = wrong + 1 end
      end
    end
    local spread, gap = 0, 0
    for i = 1, n do
      local m = sum[i] / S
      gap, spread = gap + m, spread + math.sqrt(math.max(0, sq[i] / S - m * m))
    end
    res["spread_" .. part[1]], res["gap_" .. part[1]] = spread / n, gap / n
    res[part[1] == "poison" and "eat_poison" or "pass_edible"] = wrong / (n * S)
  end
  g:set_state(seed, counter)
  return res
end

--- mistakes(agent, data, {samples = 64}) -> {poison_eaten, edible_passed,
-- eat_rate, pass_rate, lucky, mixed, unseen, samples}: the costly decisions
-- the agent would take now, over every mushroom of data. poison_eaten and
-- edible_passed count the mushrooms its mean (the Bayesian layers at their
-- mean weights) gets wrong; eat_rate and pass_rate are the expected costly
-- decisions per step under its weight draws (a mushroom comes up with
-- probability 1 / data.n), so eat_rate * 15 + pass_rate * 5 is the regret it
-- adds per step if it stopped learning. Each poisonous mushroom the mean eats
-- is sorted by what the buffer holds of it: eaten only with the lucky coin
-- (every reward +5), eaten with at least one -35 (mixed), or never eaten
-- (unseen: the network generalised). passed_rows and eaten_rows list those
-- mushrooms (rows of data.x); meals maps a mushroom to what the buffer holds
-- of its meals, {n, lucky}. The generator is restored afterwards.
function M.mistakes(agent, data, o)
  o = o or {}
  local net = agent.net
  if not (net and agent.buffer and agent.predict_actions) then
    error("mistakes: needs a network agent (BBB or epsilon-greedy)", 2)
  end
  local g = agent.generator
  local seed, counter = g:state()
  local x = data.x
  local n = x:size(1)
  local modes = {}   -- the Bayesian layers' modes, set to their mean weights for a moment
  net:apply(function(l) if l.weight_rho then modes[l] = l.mode; l.mode = "mean" end end)
  local bayes = next(modes) ~= nil
  net:evaluate()
  local mean_gap = bbb.no_grad(function() return gaps(agent, x) end)
  for l, m in pairs(modes) do l.mode = m end
  net:train()
  local S = bayes and (o.samples or 64) or 1
  local eat = {}
  for i = 1, n do eat[i] = bayes and 0 or (mean_gap[i] > 0 and 1 or 0) end
  for _ = 1, bayes and S or 0 do
    local d = bbb.no_grad(function() return gaps(agent, x) end)
    for i = 1, n do if d[i] > 0 then eat[i] = eat[i] + 1 / S end end
  end
  g:set_state(seed, counter)
  -- what the buffer holds of each mushroom: its eat rewards
  local W = x:size(2)
  local index = {}
  local function key(row, w)
    local t = {}
    for j = 1, w do t[j] = row[j] > 0.5 and "1" or "0" end
    return table.concat(t)
  end
  local xt = x:totable()
  for i = 1, n do index[key(xt[i], W)] = i end
  local meals = {}
  local buf = agent.buffer
  local size = buf:size()
  if size > 0 then
    local bx = buf.x:narrow(1, 1, size):totable()
    local by = buf.y:narrow(1, 1, size):reshape(-1):totable()
    for r = 1, size do
      local i = index[key(bx[r], W)]
      if i and bx[r][W + 2] > 0.5 then
        meals[i] = meals[i] or { n = 0, lucky = 0 }
        meals[i].n = meals[i].n + 1
        if by[r] > 0 then meals[i].lucky = meals[i].lucky + 1 end
      end
    end
  end
  local res = { poison_eaten = 0, edible_passed = 0, eat_rate = 0, pass_rate = 0, lucky = 0, mixed = 0,
                unseen = 0, samples = S, passed_rows = {}, eaten_rows = {}, meals = meals }
  for i = 1, n do
    if data.edible[i] then
      if mean_gap[i] <= 0 then
        res.edible_passed = res.edible_passed + 1
        res.passed_rows[#res.passed_rows + 1] = i
      end
      res.pass_rate = res.pass_rate + (1 - eat[i]) / n
    else
      res.eat_rate = res.eat_rate + eat[i] / n
      if mean_gap[i] > 0 then
        res.poison_eaten = res.poison_eaten + 1
        res.eaten_rows[#res.eaten_rows + 1] = i
        local m = meals[i]
        if not m then res.unseen = res.unseen + 1
        elseif m.lucky == m.n then res.lucky = res.lucky + 1
        else res.mixed = res.mixed + 1 end
      end
    end
  end
  return res
end

--- shared_features(data, rows, meals [, xt]) -> the feature values (one-hot
-- columns) that every mushroom of `rows` has, in column order, each as
-- {name, total = mushrooms with it, poisonous = how many of those are,
-- meals = how many meals of mushrooms with it `meals` counts}: `meals` is
-- mistakes()'s table (mushroom -> {n, lucky}). Why a mistake persists: the
-- edible mushrooms a mean passes often share a value no eaten mushroom has.
-- xt, data.x:totable(), spares a caller with several row sets converting
-- the whole data set for each.
function M.shared_features(data, rows, meals, xt)
  if #rows == 0 then return {} end
  xt = xt or data.x:totable()
  local W, names = #xt[1], data.feature_names or {}
  local out = {}
  for j = 1, W do
    local all = true
    for _, i in ipairs(rows) do
      if xt[i][j] <= 0.5 then all = false; break end
    end
    if all then
      local f = { name = names[j] or ("column " .. j), column = j, total = 0, poisonous = 0, meals = 0 }
      for i = 1, #xt do
        if xt[i][j] > 0.5 then
          f.total = f.total + 1
          if not data.edible[i] then f.poisonous = f.poisonous + 1 end
          f.meals = f.meals + (meals and meals[i] and meals[i].n or 0)
        end
      end
      out[#out + 1] = f
    end
  end
  return out
end

--- count_cause(causes, agent, context, edible, action): when the action costs
-- regret (a poisonous mushroom eaten, an edible one passed), asks whether the
-- agent's mean prediction over 16 weight draws would have taken it too (the
-- fitted model is wrong) or not (the draw explored), and counts it in
-- causes.{eaten_by_mean, eaten_by_draw, passed_by_mean, passed_by_draw}. The
-- agent's generator is restored, so the run is unchanged.
function M.count_cause(causes, agent, context, edible, action)
  local eaten = not edible and action == env_mod.EAT
  if not eaten and not (edible and action == env_mod.PASS) then return end
  local gap = 0
  if agent.predict_actions then
    local g = agent.generator
    local seed, counter = g:state()
    for _ = 1, 16 do
      local v = agent:predict_actions(context):totable()
      gap = gap + (v[2][1] - v[1][1]) / 16
    end
    g:set_state(seed, counter)
  end
  local by_mean = eaten and gap > 0 or (not eaten and gap <= 0)
  local k = (eaten and "eaten_by_" or "passed_by_") .. (by_mean and "mean" or "draw")
  causes[k] = (causes[k] or 0) + 1
end

--- play{cfg =, data =, make = function(opts) -> agent, index =, run =, steps =,
--       probes = {step, ...}, on_probe = function(t, diag, env), on_step = function(t, env),
--       causes = {from = step}}
-- -> env: builds the environment and the agent of run `run` and plays;
-- at each probe step the agent is diagnosed; with `causes`, every costly
-- decision after step `from` is counted there by M.count_cause.
function M.play(o)
  local cfg = o.cfg
  local environment = env_mod.Mushroom{ data = o.data, seed = cfg.seed + o.run }
  local agent = o.make(M.agent_opts(cfg, o.index, o.run, o.data.x:size(2)))
  local want = {}
  for _, s in ipairs(o.probes or {}) do want[s] = true end
  for _ = 1, o.steps do
    local context, i = environment:next()
    local action = agent:decide(context)
    if o.causes and environment.t >= (o.causes.from or 0) then
      M.count_cause(o.causes, agent, context, environment.edible[i], action)
    end
    local r = environment:act(action)
    agent:update(context, action, r)
    local t = environment.t
    if o.on_step then o.on_step(t, environment) end
    if want[t] and o.on_probe then o.on_probe(t, M.diagnose(agent, o.data), environment) end
  end
  return environment, agent
end

return M

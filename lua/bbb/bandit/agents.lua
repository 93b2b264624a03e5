--- Bandit agents. Every agent has the same two methods, so a new one is a
-- Lua table with them:
--
--   action = agent:decide(context)          -- context: (1, d) tensor; 1 pass, 2 eat
--   agent:update(context, action, reward)   -- learn from the transition
--
-- The network agents (Bayes by Backprop with Thompson sampling, and
-- epsilon-greedy MLPs) regress the reward on the context and a one-hot
-- action with a Gaussian likelihood, keep the last `buffer` transitions, and
-- after every step take `updates` minibatches of `batch` rows from it.
local bbb = require "bbb"
local new_buffer = require "bbb.bandit.buffer"
local fused = require "bbb.nn.fused"

local agents = {}

local N_ACTIONS = 2
local KL_N = { size = true, capacity = true, seen = true, blundell = true }

local function positive_int(v, what, name)
  if math.type(v) ~= "integer" or v < 1 then
    error(("%s: %s must be a positive integer, got %s"):format(what, name, tostring(v)), 4)
  end
  return v
end

local function check_context(self, context)
  if not bbb.is_tensor(context) or context:dim() ~= 2 or context:size(1) ~= 1
     or context:size(2) ~= self.context_dim then
    error(("%s:decide/update: context must be a 1 x %d tensor, got %s"):format(self.name,
      self.context_dim, bbb.is_tensor(context) and table.concat(context:size(), "x") or type(context)), 3)
  end
end

local function check_transition(self, context, action, reward)
  check_context(self, context)
  if action ~= 1 and action ~= 2 then
    error(("%s:update: action must be 1 or 2, got %s"):format(self.name, tostring(action)), 3)
  end
  if type(reward) ~= "number" or reward ~= reward then
    error(("%s:update: reward must be a number, got %s"):format(self.name, tostring(reward)), 3)
  end
end

-- The agent's fused plan (bbb.nn.fused) for net and elbo, made once and
-- again whenever the network's tensors changed; false where none fits.
local function fused_plan(o, net, elbo)
  local p = o.fused_plan
  if p == nil or (p and not (rawequal(p.net, net) and p:current())) then
    p = fused.plan(net, elbo) or false
    o.fused_plan = p
  end
  return p
end

--- fit_buffer(net, elbo, opt, buffer, {updates =, batch =, generator =}):
-- `updates` Adam steps on minibatches drawn with replacement from the
-- buffer, the KL weighted for the buffer's size N: each step minimises
-- nll / batch + complexity / N. Returns the last step's terms.
-- o.kl_n chooses N: "size" (rows in the buffer, the default), "capacity"
-- (the buffer's capacity), "seen" (every transition seen so far, t) or
-- "blundell" (the paper's minibatch weighting, eq. 9: update u of the step's
-- U carries 2^(U-u) / (2^U - 1) of one complexity term).
function agents.fit_buffer(net, elbo, opt, buffer, o)
  local B, U = o.batch, o.updates
  local xs, ys = buffer:sample(U * B, o.generator)
  if o.reward_values then ys = ys:reshape{ U * B } end   -- class labels
  local kl_n = o.kl_n
  if o.sigma_final then
    -- the noise grows geometrically from sigma to sigma_final over sigma_steps
    -- transitions: small while the first rewards teach the mean, larger once
    -- one lucky reward should no longer outweigh what the features say
    local f = math.min(1, buffer.count / o.sigma_steps)
    elbo.sigma_value = o.sigma * (o.sigma_final / o.sigma) ^ f
  end
  if kl_n ~= "blundell" then
    elbo.kl_weight = B / (kl_n == "capacity" and buffer.capacity or kl_n == "seen" and buffer.count
      or buffer:size())
  end
  -- the graph-free step where the network and likelihood allow it: the
  -- same bits (bbb.nn.fused), a fraction of the bookkeeping
  local plan = o.fused ~= false and fused_plan(o, net, elbo)
  local terms
  for u = 1, U do
    local start = (u - 1) * B + 1
    if kl_n == "blundell" then elbo.kl_weight = 2.0 ^ -u / (1 - 2.0 ^ -U) end
    local x, y = xs:narrow(1, start, B), ys:narrow(1, start, B)
    if plan then
      terms = elbo:fused_step(plan, x, y)
    else
      opt:zero_grad()
      local loss
      loss, terms = elbo:loss(net, x, y)
      loss:backward()
    end
    opt:step()
  end
  return terms
end

-- The network agents' common part.
local Neural = {}
Neural.__index = Neural

local function neural(cls, name, o)
  o = o or {}
  local self = setmetatable({ name = name }, cls)
  self.context_dim = positive_int(o.context_dim or 117, name, "context_dim")
  self.updates = positive_int(o.updates or 64, name, "updates")
  self.batch = positive_int(o.batch or 64, name, "batch")
  local cap = positive_int(o.buffer or 4096, name, "buffer")
  if cap < self.batch then
    error(("%s: buffer (%d) must hold at least one minibatch (%d)"):format(name, cap, self.batch), 3)
  end
  self.generator = o.generator or bbb.Generator(o.seed or 1)
  -- fused = false: every update through the graph (the same numbers, slower)
  if o.fused ~= nil and type(o.fused) ~= "boolean" then
    error(("%s: fused must be true or false, got %s"):format(name, tostring(o.fused)), 3)
  end
  self.fused = o.fused
  local sizes = { self.context_dim + N_ACTIONS }
  for _, h in ipairs(o.hidden or { 100, 100 }) do sizes[#sizes + 1] = h end
  -- the network is fitted to reward * reward_scale: its prior, N(0, 0.1^2)
  -- per weight, gives outputs of order 1, and the noise sigma is in these units
  self.reward_scale = o.reward_scale or 1
  if type(self.reward_scale) ~= "number" or not (self.reward_scale > 0 and self.reward_scale < math.huge) then
    error(("%s: reward_scale must be a finite number > 0, got %s"):format(name, tostring(o.reward_scale)), 3)
  end
  -- heteroscedastic: a second output, the noise of the reward (sigma = the
  -- noise floor + softplus of it), so the coin of a poisonous meal (+5 or
  -- -35) is fitted as noise instead of as the mushroom's value
  self.hetero = o.hetero and true or false
  self.sigma_max = o.sigma_max
  -- reward_values = {v1, ..., vK}: the rewards as K classes (a categorical
  -- likelihood over the values a reward can take); the network gives K
  -- logits and its prediction is the expected reward sum_k p_k v_k. One
  -- reward is then worth at most what its class's probability can still
  -- gain, where the Gaussian likelihood makes a single +5 of a poisonous
  -- mushroom worth (20 / sigma)^2 / 2 nats against -15.
  if o.reward_values ~= nil then
    local v = o.reward_values
    if type(v) ~= "table" or #v < 2 then
      error(("%s: reward_values must list at least two rewards, got %s"):format(name,
        type(v) == "table" and ("%d"):format(#v) or tostring(v)), 3)
    end
    self.reward_class = {}
    for k, r in ipairs(v) do
      if type(r) ~= "number" or r ~= r or r == math.huge or r == -math.huge then
        error(("%s: reward_values[%d] must be a finite number, got %s"):format(name, k, tostring(r)), 3)
      end
      if self.reward_class[r] then
        error(("%s: reward_values lists %g twice"):format(name, r), 3)
      end
      self.reward_class[r] = k
    end
    if self.hetero then error(("%s: reward_values and hetero exclude each other"):format(name), 3) end
    self.reward_values = bbb.tensor(v):reshape{ #v, 1 }
  end
  sizes[#sizes + 1] = self.reward_values and #o.reward_values or self.hetero and 2 or 1
  self.sizes = sizes
  self.buffer = new_buffer{ capacity = cap, width = sizes[1] }
  self.sigma = o.sigma or 1
  self.lr = o.lr or 1e-3
  self.kl_n = o.kl_n or "size"
  if not KL_N[self.kl_n] then
    error(('%s: kl_n must be "size", "capacity", "seen" or "blundell", got %s'):format(name, tostring(self.kl_n)), 3)
  end
  self.learn_sigma = o.learn_sigma and true or false
  -- one-hot action columns: (1, 2) per action, and both actions stacked (2, 2)
  self.action_rows = { bbb.tensor{ { 1, 0 } }, bbb.tensor{ { 0, 1 } } }
  self.both_actions = bbb.tensor{ { 1, 0 }, { 0, 1 } }
  return self, o
end

function Neural:finish_init()
  if self.hetero then
    -- the noise output starts at softplus(-6) = 0.0025 over the floor, so
    -- the first fits weigh every reward as the fixed noise does
    local last = self.net.layers[#self.net.layers]
    local b = last.bias_mu or last.bias
    b:set(2, -6)
  end
  local likelihood = self.reward_values and "categorical" or self.hetero and "heteroscedastic" or "gaussian"
  self.elbo = bbb.elbo.ELBO{ n_data = self.buffer.capacity, batch_size = self.batch, likelihood = likelihood,
    sigma = self.sigma, kl_weight = 1, learn_sigma = self.learn_sigma, sigma_max = self.sigma_max }
  local params = self.net:named_parameters()
  for _, p in ipairs(self.elbo:named_parameters()) do params[#params + 1] = p end
  self.optimizer = bbb.optim.Adam(params, { lr = self.lr })
  self.net:train()
end

--- value(out) -> (N, 1): the predicted reward from the network's output
-- rows: the output itself, its mean column (hetero), or the expected reward
-- under the class probabilities (reward_values).
function Neural:value(out)
  if self.reward_values then return out:softmax():matmul(self.reward_values) end
  return self.hetero and out:narrow(2, 1, 1) or out
end

-- The predicted reward of each action for one context: a (2, 1) tensor.
function Neural:predict_actions(context)
  local x = bbb.cat({ bbb.cat({ context, context }, 1), self.both_actions }, 2)
  return bbb.no_grad(function() return self:value(self.net:forward(x)) end)
end

function Neural:greedy(context)
  local v = self:predict_actions(context):totable()
  return v[2][1] > v[1][1] and 2 or 1
end

function Neural:update(context, action, reward)
  check_transition(self, context, action, reward)
  local target = reward * self.reward_scale
  if self.reward_values then
    target = self.reward_class[reward]
    if not target then
      error(("%s:update: reward %g is not one of reward_values"):format(self.name, reward), 2)
    end
  end
  self.buffer:add(bbb.cat({ context, self.action_rows[action] }, 2), target)
  self.last_terms = agents.fit_buffer(self.net, self.elbo, self.optimizer, self.buffer, self)
end

--- The learned state, for checkpoints: scalars, {name = tensor}.
function Neural:state()
  local tensors = {}
  for k, v in pairs(self.net:state_dict()) do tensors["net." .. k] = v end
  for k, v in pairs(self.elbo:state_dict()) do tensors["elbo." .. k] = v end
  local ost, ots = self.optimizer:state_dict()
  for k, v in pairs(ots) do tensors["opt." .. k] = v end
  local bst, bts = self.buffer:state()
  for k, v in pairs(bts) do tensors["buffer." .. k] = v end
  local seed, counter = self.generator:state()
  return { optimizer = ost, buffer = bst, elbo_steps = self.elbo.steps,
           generator = { ("%d"):format(seed), ("%d"):format(counter) } }, tensors
end

local function prefixed(tensors, prefix)
  local out = {}
  for k, v in pairs(tensors) do
    if k:sub(1, #prefix) == prefix then out[k:sub(#prefix + 1)] = v end
  end
  return out
end

function Neural:set_state(st, tensors)
  self.net:load_state_dict(prefixed(tensors, "net."))
  self.elbo:load_state_dict(prefixed(tensors, "elbo."))
  self.optimizer:load_state_dict(st.optimizer, prefixed(tensors, "opt."))
  self.buffer:set_state(st.buffer, prefixed(tensors, "buffer."))
  self.elbo.steps = math.tointeger(st.elbo_steps) or 0
  self.generator:set_state(math.tointeger(tonumber(st.generator[1])), math.tointeger(tonumber(st.generator[2])))
end

--- BBB{context_dim = 117, hidden = {100, 100}, buffer = 4096, updates = 64,
--      batch = 64, lr = 1e-3, sigma = 1 (likelihood noise), learn_sigma = false,
--      prior = Gaussian{sigma = 0.1}, prior_in = nil (the input layer's prior,
--      else `prior`), rho_init = -3, kl_n = "size", decide_samples = 1,
--      sigma_final = nil, sigma_steps = nil, seed =}:
-- Thompson sampling: each decision compares the two actions under one
-- weight sample, or under the mean of decide_samples samples.
local BBB = setmetatable({}, { __index = Neural })
BBB.__index = BBB

function agents.BBB(o)
  local self
  self, o = neural(BBB, "BBB", o)
  -- rho -3 (posterior sd ~0.05 at the start) lets the first decisions
  -- explore; from the layer's default -5 one bad meal ends all eating. The
  -- prior N(0, 0.1^2): with the paper's scale mixture and the KL weighted by
  -- the buffer's size, the complexity term keeps the agent exploring almost
  -- uniformly for thousands of steps (doc/notebook/bandit.md has the regrets).
  -- prior_in: the input layer's own prior (a one-hot feature value's weight
  -- into a hidden unit), where given
  self.net = bbb.nn.bayes_mlp(self.sizes, { prior = o.prior or bbb.prior.Gaussian{ sigma = 0.1 },
    priors = o.prior_in and { o.prior_in } or nil, generator = self.generator, rho_init = o.rho_init or -3 })
  self.decide_samples = positive_int(o.decide_samples or 1, "BBB", "decide_samples")
  -- sigma_final, sigma_steps: the likelihood noise grows from sigma to
  -- sigma_final over the first sigma_steps transitions (fit_buffer); nil or
  -- false keeps it fixed
  if o.sigma_final then
    local f = o.sigma_final
    if type(f) ~= "number" or not (f > 0 and f < math.huge) then
      error(("BBB: sigma_final must be a finite number > 0, got %s"):format(tostring(f)), 2)
    end
    self.sigma_final = f
    self.sigma_steps = positive_int(o.sigma_steps, "BBB", "sigma_steps")
  end
  self:finish_init()
  return self
end

function BBB:decide(context)
  check_context(self, context)
  if self.decide_samples == 1 then return self:greedy(context) end  -- one forward, one weight sample
  local pass, eat = 0, 0
  for _ = 1, self.decide_samples do
    local v = self:predict_actions(context):totable()
    pass, eat = pass + v[1][1], eat + v[2][1]
  end
  return eat > pass and 2 or 1
end

--- EpsilonGreedy{epsilon = 0.05, ...same options as BBB}: an MLP of the same
-- shape; a random action with probability epsilon, else the greedy one.
local Eps = setmetatable({}, { __index = Neural })
Eps.__index = Eps

function agents.EpsilonGreedy(o)
  o = o or {}
  local eps = o.epsilon or 0.05
  if type(eps) ~= "number" or eps < 0 or eps > 1 then
    error(("EpsilonGreedy: epsilon must be in [0, 1], got %s"):format(tostring(eps)), 2)
  end
  local self
  self, o = neural(Eps, ("eps-greedy %g%%"):format(100 * eps), o)
  self.epsilon = eps
  self.net = bbb.nn.mlp(self.sizes, { generator = self.generator })
  self:finish_init()
  return self
end

function Eps:decide(context)
  check_context(self, context)
  if self.epsilon > 0 then
    local u = bbb.rand({ 2 }, 0, 1, self.generator):totable()
    if u[1] < self.epsilon then return u[2] < 0.5 and 1 or 2 end
  end
  return self:greedy(context)
end

--- Uniform{seed =}: pass or eat with probability 1/2.
local Uniform = {}
Uniform.__index = Uniform

function agents.Uniform(o)
  o = o or {}
  return setmetatable({ name = "uniform", context_dim = o.context_dim or 117,
    generator = o.generator or bbb.Generator(o.seed or 1) }, Uniform)
end

function Uniform:decide(context)
  check_context(self, context)
  return bbb.rand({ 1 }, 0, 1, self.generator):item() < 0.5 and 1 or 2
end

function Uniform:update(context, action, reward) check_transition(self, context, action, reward) end

function Uniform:state()
  local seed, counter = self.generator:state()
  return { generator = { ("%d"):format(seed), ("%d"):format(counter) } }, {}
end

function Uniform:set_state(st)
  self.generator:set_state(math.tointeger(tonumber(st.generator[1])), math.tointeger(tonumber(st.generator[2])))
end

agents.LinearTS = require "bbb.bandit.linear"

-- For agents defined in other files (bbb.bandit.dropout, bbb.bandit.neural_linear).
agents.Neural, agents.neural, agents.check_context, agents.positive_int = Neural, neural, check_context, positive_int

return agents

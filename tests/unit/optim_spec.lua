-- Optimizers refuse settings and steps that would silently wreck the
-- parameters: bad hyperparameters, schedules giving a negative rate, updates
-- that overflow; and they warn when the loss explodes.
local bbb = require "bbb"
local optim = bbb.optim

local function param(values)
  return bbb.tensor(values):requires_grad(true)
end

-- Sets p's gradient to g by a backward pass through sum(p * g).
local function set_grad(p, g)
  p:zero_grad()
  local s = (p * bbb.tensor(g)):sum()
  s:backward()
end

local errors_with = require("helpers").errors_with

describe("optimizer hyperparameters", function()
  local p = param { 1, 2 }
  it("are checked with messages naming the optimizer, the option and the value", function()
    errors_with(function() optim.RMSprop({ p }, { alpha = 5 }) end,
      "RMSprop: alpha must be a number in [0, 1), got 5")
    errors_with(function() optim.RMSprop({ p }, { alpha = 1 }) end, "RMSprop: alpha must be a number in [0, 1), got 1")
    errors_with(function() optim.Adam({ p }, { lr = math.huge }) end, "Adam: lr must be a finite number >= 0, got inf")
    errors_with(function() optim.Adam({ p }, { lr = 0 / 0 }) end, "Adam: lr must be a finite number >= 0, got")
    errors_with(function() optim.SGD({ p }, { lr = -0.1 }) end, "SGD: lr must be a finite number >= 0, got -0.1")
    errors_with(function() optim.Adam({ p }, { betas = "x" }) end,
      "Adam: betas must be a table of two numbers in [0, 1), got 'x'")
    errors_with(function() optim.Adam({ p }, { betas = { 0.9 } }) end, "Adam: beta2 must be a number in [0, 1), got nil")
    errors_with(function() optim.Adam({ p }, { betas = { "a", 0.9 } }) end, "Adam: beta1 must be a number in [0, 1), got 'a'")
    errors_with(function() optim.Adam({ p }, { betas = { 0.9, 1 } }) end, "Adam: beta2 must be a number in [0, 1), got 1")
    errors_with(function() optim.Adam({ p }, { eps = 0 }) end, "Adam: eps must be a finite number > 0, got 0")
    errors_with(function() optim.RMSprop({ p }, { eps = -1 }) end, "RMSprop: eps must be a finite number > 0, got -1")
    errors_with(function() optim.SGD({ p }, { momentum = math.huge }) end, "SGD: momentum must be a number in [0, 1), got inf")
    errors_with(function() optim.SGD({ p }, { clip_norm = 0 }) end, "SGD: clip_norm must be a finite number > 0, got 0")
    errors_with(function() optim.SGD({ p }, "fast") end, "SGD: options must be a table, got string")
    assert.are.equal(0, optim.RMSprop({ p }, { alpha = 0 }).alpha)
    assert.are.equal(0, optim.SGD({ p }, { lr = 0 }).lr)
  end)

  it("schedules refuse factors and epochs giving a negative or non-finite rate", function()
    local opt = optim.SGD({ p }, { lr = 0.1 })
    errors_with(function() optim.schedule.exponential(opt, -0.5) end,
      "schedule.exponential: gamma must be a finite number > 0, got -0.5")
    errors_with(function() optim.schedule.step(opt, 0, 0.5) end, "schedule.step: step_size must be a positive integer, got 0")
    errors_with(function() optim.schedule.cosine(opt, 10, -1) end, "schedule.cosine: eta_min must be a finite number >= 0, got -1")
    errors_with(function() optim.schedule.exponential({}, 0.5) end, "schedule.exponential: the first argument must be an optimizer")
    local s = optim.schedule.exponential(opt, 1e200)
    s:step()
    errors_with(function() s:step() end, "schedule.exponential: epoch 2 gives the learning rate inf")
    assert.are.equal(1, s.epoch)   -- unchanged by the failed step
  end)

  it("lr_scale multiplies the rate of the parameters its suffix names, and only theirs", function()
    local mu, rho = param { 1, 2 }, param { -5, -4 }
    local named = { { "1.weight_mu", mu }, { "1.weight_rho", rho } }
    local opt = optim.SGD(named, { lr = 0.1, lr_scale = { rho = 100 } })
    set_grad(mu, { 1, -2 })
    set_grad(rho, { 0.5, 0.25 })
    opt:step()
    assert.is_near(1 - 0.1, mu:get(1), 1e-6)
    assert.is_near(2 + 0.2, mu:get(2), 1e-6)
    assert.is_near(-5 - 0.1 * 100 * 0.5, rho:get(1), 1e-5)
    assert.is_near(-4 - 0.1 * 100 * 0.25, rho:get(2), 1e-5)
    -- Adam's step is lr-sized whatever the gradient: the scaled one is 100x
    local m2, r2 = param { 0 }, param { 0 }
    local adam = optim.Adam({ { "a_mu", m2 }, { "a_rho", r2 } }, { lr = 1e-3, lr_scale = { rho = 100 } })
    set_grad(m2, { 1 }); set_grad(r2, { 1 })
    adam:step()
    assert.is_near(-1e-3, m2:get(1), 1e-7)
    assert.is_near(-0.1, r2:get(1), 1e-5)
    errors_with(function() optim.SGD(named, { lr_scale = { rho = 0 } }) end,
      "SGD: lr_scale: rho must be a finite number > 0, got 0")
    errors_with(function() optim.SGD(named, { lr_scale = { rho = "x" } }) end,
      "SGD: lr_scale: rho must be a finite number > 0, got 'x'")
    errors_with(function() optim.Adam(named, { lr_scale = { sigma = 2 } }) end,
      "Adam: lr_scale.sigma matches no parameter")
    errors_with(function() optim.RMSprop(named, { lr_scale = 10 }) end,
      "RMSprop: lr_scale must be a table {suffix = factor}, got number")
    errors_with(function() optim.SGD(named, { lr_scale = { 10 } }) end,
      "SGD: lr_scale's keys must be parameter name suffixes such as 'rho', got 1")
  end)

  it("a learning rate set by hand to a bad value stops the step", function()
    local q = param { 1, 2 }
    local opt = optim.SGD({ q }, { lr = 0.1 })
    set_grad(q, { 1, 1 })
    opt.lr = -1
    errors_with(function() opt:step() end, "SGD: step 1: the learning rate is -1")
    assert.are.same({ 1, 2 }, q:totable())
  end)
end)

describe("optimizer steps that would overflow", function()
  local cases = {
    { "Adam", function(ps) return optim.Adam(ps, { lr = 1e38 }) end },
    { "RMSprop", function(ps) return optim.RMSprop(ps, { lr = 1e37 }) end },   -- steps of 10 lr
    { "SGD", function(ps) return optim.SGD(ps, { lr = 1e38, momentum = 0.9 }) end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " leaves every parameter and moment as it was and names the step", function()
      local a, b = param { 1, 2, 3 }, param { 3e38, -3e38 }
      local opt = c[2]({ { "a", a }, { "b", b } })
      set_grad(a, { 0.1, 0.1, 0.1 })
      set_grad(b, { 1, 1 })   -- b[2] = -3e38 - 1e38 overflows; b[1] and a stay finite
      local sd_before = {}
      local _, ts = opt:state_dict()
      for k, t in pairs(ts) do sd_before[k] = t:totable() end
      errors_with(function() opt:step() end,
        c[1] .. ": step 1: the update would make ")
      local ok, err = pcall(opt.step, opt)
      assert.truthy(err:find("of b NaN or infinite; the parameters are left as they were (likely cause:", 1, true), err)
      assert.are.same({ 1, 2, 3 }, a:totable())
      assert.are.same(bbb.tensor({ 3e38, -3e38 }):totable(), b:totable())
      assert.are.equal(0, opt.t)
      _, ts = opt:state_dict()
      for k, t in pairs(ts) do assert.are.same(sd_before[k], t:totable(), k) end
      -- and a sane step afterwards still works
      opt.lr = 1e-3
      b:zero_grad()
      opt:step()
      assert.are.equal(1, opt.t)
      assert.are_not.same({ 1, 2, 3 }, a:totable())
    end)
  end

  -- After a clean step the check uses the bound that step left: it must
  -- still refuse whatever would overflow.
  for _, c in ipairs(cases) do
    it(c[1] .. " still refuses an overflowing step after clean ones", function()
      local function fresh()
        local a, b = param { 1, 2, 3 }, param { 1, -3e38 }
        local opt = c[2]({ { "a", a }, { "b", b } })
        opt.lr = 1e-3
        for _ = 1, 3 do
          set_grad(a, { 0.1, 0.1, 0.1 }); set_grad(b, { 1, 1 })
          opt:step()
        end
        assert.are.equal(3, opt.t)
        return opt, b
      end
      local function refused(opt, b)
        local before = b:totable()
        errors_with(function() opt:step() end, c[1] .. ": step 4: the update would make ")
        assert.are.same(before, b:totable())
        assert.are.equal(3, opt.t)
      end
      -- a huge learning rate
      local opt, b = fresh()
      opt.lr = 1e38
      refused(opt, b)
      -- a huge gradient (Adam's and RMSprop's squares overflow)
      opt, b = fresh()
      opt.lr = 1
      set_grad(b, { 1, 3.3e38 })
      refused(opt, b)
      -- and a sane step goes through after all of it
      opt.lr = 1e-3
      set_grad(b, { 1, 1 })
      opt:step()
      assert.are.equal(4, opt.t)
    end)
  end

  it("SGD refuses a step on a parameter written in place since the last step", function()
    local a = param { 1, -2 }
    local opt = optim.SGD({ { "a", a } }, { lr = 1e-3, momentum = 0.9 })
    for _ = 1, 3 do set_grad(a, { 1, 1 }); opt:step() end
    -- the bound of the last step (|a| <= 2) would prove this step finite
    a[2] = -3.402e38
    opt.lr = 1e35
    set_grad(a, { 1, 1 })
    errors_with(function() opt:step() end, "SGD: step 4: the update would make 1 value of a NaN")
  end)

  it("the bound an update leaves holds the largest values it wrote", function()
    local core = bbb.core
    local p, g, m, v = bbb.tensor { 1, -5, 2 }, bbb.tensor { 0.5, -0.25, 4 }, bbb.zeros { 3 }, bbb.zeros { 3 }
    local bound = {}
    local h = { lr = 0.1, step = 1, gmax = 4, bound = bound }
    core.adam_update(p, g, m, v, h)
    local function maxabs(t)
      local r = 0
      for _, x in ipairs(t:totable()) do r = math.max(r, math.abs(x)) end
      return r
    end
    assert.is_true(bound.known)
    assert.are.equal(maxabs(p), bound.p)
    assert.are.equal(maxabs(m), bound.a)
    assert.are.equal(maxabs(v), bound.b)
    -- an infinity written (a NaN here: 0 weight decay times inf) shows in
    -- the bound, which then proves nothing
    p[2] = 1 / 0
    h.lr, h.step = 0, 2
    core.adam_update(p, g, m, v, h)
    assert.is_false(bound.p <= 3.4e38)
    h.lr, h.step, h.dry = 0.1, 3, true
    assert.are.equal(1, core.adam_update(p, g, m, v, h))
    -- a current bound is trusted without reading the data (shown by a lie) ...
    bound.p, bound.a, bound.b = 5, 1, 1
    assert.are.equal(0, core.adam_update(p, g, m, v, h))
    -- ... until a write makes it stale: then the data are read again
    p[1] = 1
    assert.are.equal(1, core.adam_update(p, g, m, v, h))
    -- the same for each moment buffer
    for _, buf in ipairs { m, v } do
      p:copy(bbb.tensor { 1, -5, 2 }); m:fill(0); v:fill(0)
      h.dry = false
      core.adam_update(p, g, m, v, h)
      h.dry = true
      assert.are.equal(0, core.adam_update(p, g, m, v, h))
      buf[3] = 1 / 0
      assert.are.equal(1, core.adam_update(p, g, m, v, h))
      buf[3] = 0
    end
    -- a NaN shows too
    local q, gq = bbb.tensor { 0 / 0 }, bbb.tensor { 1 }
    local bq = {}
    core.sgd_update(q, gq, nil, { lr = 0.1, gmax = 1, bound = bq })
    assert.is_true(bq.p ~= bq.p)
    assert.are.equal(1, core.sgd_update(q, gq, nil, { lr = 0.1, gmax = 1, bound = bq, dry = true }))
  end)

  -- The bound may only ever skip the count when the count would be 0: random
  -- hyperparameters and values over the whole float range, each kind.
  it("never proves finite a step the exact count refuses (3,000 random cases)", function()
    local core = bbb.core
    local gen = bbb.Generator(17)
    local u = bbb.rand({ 250007 }, 0, 1, gen):totable()
    local k = 0
    local function U() k = k + 1; return u[(k - 1) % #u + 1] end
    local function mag(lo, hi) return 10 ^ (lo + (hi - lo) * U()) end
    local function vec(n, lo, hi)
      local t = {}
      for i = 1, n do t[i] = (U() < 0.5 and -1 or 1) * mag(lo, hi) end
      return bbb.tensor(t)
    end
    local proved, refused = 0, 0
    for case = 1, 3000 do
      local kind = ({ "sgd", "adam", "rmsprop" })[case % 3 + 1]
      local n = 8
      local p, g0, g1 = vec(n, -30, 38.5), vec(n, -30, 20), vec(n, -30, 20)
      local m, v = bbb.zeros(n), bbb.zeros(n)
      local h = { lr = mag(-6, 39), weight_decay = U() < 0.5 and 0 or mag(-6, 2), momentum = U() < 0.3 and 0 or U(),
                  nesterov = U() < 0.5, beta1 = U() * 0.99, beta2 = U() * 0.999, alpha = U() * 0.99,
                  eps = mag(-10, 0), step = 1 }
      local function call(g, extra)
        local hh = {}
        for key, val in pairs(h) do hh[key] = val end
        for key, val in pairs(extra or {}) do hh[key] = val end
        if kind == "sgd" then return core.sgd_update(p, g, m, hh) end
        if kind == "adam" then return core.adam_update(p, g, m, v, hh) end
        return core.rmsprop_update(p, g, m, hh)
      end
      -- a first, applied update records the bound (skipped if it would overflow)
      local bound = {}
      if call(g0, { dry = true }) == 0 then
        call(g0, { bound = bound })
        h.step = 2
        local gmax = 0
        for _, x in ipairs(g1:totable()) do gmax = math.max(gmax, math.abs(x)) end
        local with_bound = call(g1, { dry = true, bound = bound, gmax = gmax })
        local exact = call(g1, { dry = true })
        if with_bound == 0 and exact > 0 then
          error(("case %d (%s): the bound proved a step the count refuses (%d values)"):format(case, kind, exact))
        end
        assert.are.equal(exact, with_bound == 0 and 0 or exact)
        if exact > 0 then refused = refused + 1 else proved = proved + 1 end
      end
    end
    -- both outcomes occur, so the property was exercised
    assert.is_true(proved > 100 and refused > 100, ("proved %d, refused %d"):format(proved, refused))
  end)

  it("Adam at lr = inf is refused before any step", function()
    errors_with(function() optim.Adam({ param { 1 } }, { lr = math.huge }) end, "Adam: lr must be a finite number")
  end)
end)

describe("the fused update binding", function()
  it("takes its hyperparameters as one table and checks them", function()
    local p, g, m, v = bbb.tensor { 1 }, bbb.tensor { 0.5 }, bbb.zeros { 1 }, bbb.zeros { 1 }
    bbb.core.adam_update(p, g, m, v, { lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, step = 1 })
    assert(math.abs(p:totable()[1] - 0.9) < 1e-6, p:totable()[1])
    assert.are.equal(0, bbb.core.adam_update(p, g, m, v, { lr = 0.1, step = 2, dry = true }))
    errors_with(function() bbb.core.adam_update(p, g, m, v, { lr = 0.1, beta1 = 1.5 }) end,
      "adam: beta1 must be in [0, 1), got 1.5")
    errors_with(function() bbb.core.adam_update(p, g, m, v, { lr = "x" }) end,
      "bbb.core.adam_update: argument 5 (options): lr must be a number, got string")
    errors_with(function() bbb.core.rmsprop_update(p, g, m, { lr = 0.1, alpha = 5 }) end,
      "rmsprop: alpha must be in [0, 1), got 5")
    errors_with(function() bbb.core.sgd_update(p, g, nil, { lr = -1 }) end, "sgd: lr must be finite and >= 0, got -1")
    errors_with(function() bbb.core.sgd_update(p, g, nil, {}) end, "sgd: lr must be finite and >= 0, got nan")
  end)
end)

describe("observe_loss", function()
  -- Captures what fn writes to stderr.
  local function stderr_of(fn)
    local real = io.stderr
    local lines = {}
    io.stderr = { write = function(_, ...) for _, s in ipairs { ... } do lines[#lines + 1] = s end end }
    local ok, err = pcall(fn)
    io.stderr = real
    assert(ok, err)
    return table.concat(lines)
  end

  it("warns once when the loss per example grows a thousandfold", function()
    local opt = optim.Adam({ param { 1 } }, { lr = 1e6 })
    local out = stderr_of(function()
      for _, v in ipairs { 2.3, 1.5, 40, 800 } do opt:observe_loss(v) end
    end)
    assert.are.equal("", out)
    out = stderr_of(function() opt:observe_loss(1e22); opt:observe_loss(1e30) end)
    assert.truthy(out:find("Adam: warning: at step 0 the loss per example is 1e+22, up from 1.5", 1, true), out)
    assert.truthy(out:find("learning rate 1e+06 too large?", 1, true), out)
    local _, n = out:gsub("warning", "")
    assert.are.equal(1, n)
  end)

  it("warns on a non-finite loss, and stays quiet for negative losses of normal size", function()
    local opt = optim.SGD({ param { 1 } })
    assert.are.equal("", stderr_of(function()
      for _, v in ipairs { -3, -5, -2.5, -40 } do opt:observe_loss(v) end
    end))
    assert.truthy(stderr_of(function() opt:observe_loss(0 / 0) end):find("SGD: warning: at step 0 the loss", 1, true))
    local opt2 = optim.SGD({ param { 1 } })
    assert.truthy(stderr_of(function() opt2:observe_loss(math.huge) end):find("SGD: warning", 1, true))
  end)

  it("is called by bbb.train.fit: a diverging run warns", function()
    local gen = bbb.Generator(4)
    local x = bbb.randn({ 64, 3 }, 0, 1, gen)
    local y = bbb.tensor((function()
      local t = {}
      for i = 1, 64 do t[i] = (i % 2) + 1 end
      return t
    end)())
    local net = bbb.nn.mlp({ 3, 16, 2 }, { generator = gen })
    local opt = optim.SGD(net, { lr = 1e4 })
    local ds = { x = x, y = y, n = 64, classes = { "a", "b" } }
    local out = stderr_of(function()
      pcall(bbb.train.fit, { model = net, optimizer = opt, data = ds,
        batch_size = 16, epochs = 3, progress = "off", quiet = true, generator = gen })
    end)
    assert.truthy(out:find("SGD: warning: at step", 1, true), out)
  end)
end)

-- The registry of C priors (BBB_PRIORS in src/bayes/bayes.h) as Lua sees
-- it: bbb.core.prior_kinds(), and bbb.prior's constructors, descriptions
-- and configs built from it. Every row is checked the same way, so a prior
-- added to the list is held to these checks without a line here: its fused
-- complexity term against prior_log_prob on the tape, and its log_prob's
-- gradient against central differences.
local bbb = require "bbb"
local core = require "bbb.core"

local function rel_close(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b))
end

-- A valid value for each parameter of a row: a scale, or a weight in (0, 1).
local function fields_of(k)
  local c = { kind = k.kind }
  for i, name in ipairs(k.params) do c[name] = k.rules[i] == "unit" and 0.3 or 0.5 + 0.2 * i end
  return c
end

describe("the C prior registry", function()
  local kinds = core.prior_kinds()

  it("lists the built-in priors, in the list's order, with their parameters", function()
    local seen = {}
    for i, k in ipairs(kinds) do
      seen[i] = ("%s %s %s %s"):format(k.kind, k.label, table.concat(k.params, ","),
        table.concat(k.rules, ","))
    end
    assert.are.same({ "gaussian Gaussian sigma scale",
      "mixture ScaleMixture pi,sigma1,sigma2 unit,scale,scale", "laplace Laplace b scale" },
      { seen[1], seen[2], seen[3] })
  end)

  it("names every kind when it refuses another", function()
    local names = {}
    for i, k in ipairs(kinds) do names[i] = ('"%s"'):format(k.kind) end
    local ok, err = pcall(core.prior_log_prob, { kind = "cauchy" }, bbb.zeros(2))
    assert.is_false(ok)
    assert.are.equal("bbb.core.prior_log_prob: argument 1 (prior): unknown kind \"cauchy\" (expected "
      .. table.concat(names, ", ") .. ' or "none")', err)
  end)

  it("checks the scales before the weight, whatever the order of the row", function()
    local function mixture(pi, sigma2)
      return function() core.check_prior({ kind = "mixture", pi = pi, sigma1 = 1, sigma2 = sigma2 }) end
    end
    assert.has_error(mixture(2, -1), "ScaleMixture prior: sigma2 must be positive and finite, got -1")
    assert.has_error(mixture("a", "x"),
      "bbb.core.check_prior: argument 1 (prior): field sigma2 must be a number, got string")
  end)

  for _, k in ipairs(kinds) do
    describe(k.kind, function()
      local c = fields_of(k)

      it("has a constructor, a description and a config from its row", function()
        assert.are.equal("function", type(bbb.prior[k.label]))
        local p = bbb.prior.from_config(c)
        assert.is_true(bbb.prior.is_fused(p))
        local parts = {}
        for i, name in ipairs(k.params) do parts[i] = ("%s=%g"):format(name, c[name]) end
        assert.are.equal(("%s{%s}"):format(k.label, table.concat(parts, ", ")), bbb.prior.describe(p))
        assert.are.same(c, bbb.prior.config(p))
        assert.are.same(c, bbb.prior.config(bbb.prior[k.label](c)))
      end)

      it("refuses a parameter out of its range, by the row's label and field", function()
        local bad = fields_of(k)
        bad[k.params[1]] = -1
        local ok, err = pcall(bbb.prior.from_config, bad)
        assert.is_false(ok)
        assert.truthy(err:find(k.label .. " prior: " .. k.params[1] .. " must be", 1, true), err)
      end)

      it("gives in the fused pass what prior_log_prob gives on the tape, and its gradients", function()
        local p = bbb.prior.from_config(c)
        local gen = bbb.Generator(5)
        local n = 3000   -- several chunks
        local mu0, rho0 = bbb.randn({ n }, 0, 0.4, gen), bbb.rand({ n }, -5, 1, gen)
        local eps, proj = bbb.randn({ n }, 0, 1, gen), bbb.randn({ n }, 0, 1, gen)
        local mu1, rho1 = mu0:clone():requires_grad(true), rho0:clone():requires_grad(true)
        local w1, kl = core.bayes_sample(mu1, rho1, p, nil, eps)
        ;((w1 * proj):sum() + kl * 0.5):backward()
        local mu2, rho2 = mu0:clone():requires_grad(true), rho0:clone():requires_grad(true)
        local w2, logq = core.bayes_sample(mu2, rho2, nil, nil, eps)
        local ref = logq - p:log_prob(w2)
        ;((w2 * proj):sum() + ref * 0.5):backward()
        assert.are.equal(0, (w1 - w2):abs():max():item())
        assert(rel_close(kl:item(), ref:item(), 1e-5), kl:item() .. " vs " .. ref:item())
        for _, pair in ipairs { { mu1.grad, mu2.grad }, { rho1.grad, rho2.grad } } do
          local d = (pair[1] - pair[2]):abs():max():item()
          local m = pair[2]:abs():max():item()
          assert.is_true(d <= 1e-4 * math.max(1, m), ("gradients differ by %g (largest %g)"):format(d, m))
        end
      end)

      it("differentiates log_prob", function()
        local p = bbb.prior.from_config(c)
        local w = bbb.rand({ 9 }, -2, 2, bbb.Generator(3)):requires_grad(true)
        local ok, report = bbb.testing.gradcheck(function(x) return p:log_prob(x) end, { w })
        assert(ok, report)
      end)
    end)
  end
end)

describe("bbb.core.sys.fnv1a, the hash that names prior files, grids and jobs", function()
  it("gives the published FNV-1a (32-bit) test vectors, over any bytes", function()
    local fnv1a = bbb.core.sys.fnv1a
    assert.same({ "811c9dc5", "e40c292c", "bf9cf968" }, { fnv1a(""), fnv1a("a"), fnv1a("foobar") })
    -- bytes above 127 and NUL count as themselves, as the Lua loop it replaced did
    local h = 0x811c9dc5
    for _, b in ipairs { 0, 255 } do h = ((h ~ b) * 0x01000193) & 0xffffffff end
    assert.equal(("%08x"):format(h), fnv1a("\0\255"))
  end)
end)

-- The public namespace: bbb holds the curated API; kernels, readers and
-- plumbing stay under bbb.core; benchmark floors live in bbb.bench.
local bbb = require "bbb"
local core = require "bbb.core"

describe("bbb's public namespace", function()
  it("keeps internals under bbb.core only", function()
    for _, k in ipairs{ "adam_update", "sgd_update", "rmsprop_update", "sqnorm", "bayes_sample",
                        "prior_log_prob", "check_prior", "load_idx", "default_generator",
                        "last_error", "Tensor" } do
      assert.is_nil(rawget(bbb, k), "bbb." .. k .. " is public")
      assert.is_not_nil(core[k], "bbb.core." .. k .. " is missing")
    end
  end)
  it("has no benchmark helpers, in bbb or bbb.core", function()
    for k in pairs(core) do
      assert.falsy(k:find("^bench"), "bbb.core." .. k)
    end
    local bench = require "bbb.bench"
    assert.are.equal("function", type(bench.sgemm))
    assert.are.equal("function", type(bench.softplus_libm))
  end)
  it("bbb.bench names the OpenBLAS kernels its floors run on", function()
    local name, env = require("bbb.bench").blas()
    assert.is_string(name)
    assert.are.equal(os.getenv("OPENBLAS_CORETYPE"), env)
    -- OpenBLAS honours the variable, so the name it reports is the one asked for
    if env then assert.are.equal(env:lower(), name:lower()) end
  end)
  it("every public function is the core's own", function()
    for k, v in pairs(bbb) do
      if core[k] ~= nil then assert.are.equal(core[k], v, k) end
    end
  end)
  it("is a screenful, not the whole core", function()
    local n = 0
    for _ in pairs(bbb) do n = n + 1 end
    local m = 0
    for _ in pairs(core) do m = m + 1 end
    assert.is_true(n < m, ("bbb has %d names, bbb.core %d"):format(n, m))
  end)
end)

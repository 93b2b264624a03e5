-- Bad input gives a Lua error with a message that names the op and the
-- offending shapes or values, and never brings the process down.
local bbb = require "bbb"
local core = require "bbb.core"

-- lua_pushfstring (and so luaL_error) does not know %g: a binding message
-- formatted with it is still raised, but its text becomes this. errors_with
-- fails on such a message, so a %g that slips into the binding is caught.
local LOST_FORMAT = "invalid option '%g' to 'lua_pushfstring'"

-- The essential part of a message, for texts with values we do not want to
-- pin to the last digit (NaN signs, %g of huge numbers).
local function errors_with(fn, ...)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error, got success")
  err = tostring(err)
  assert.falsy(err:find(LOST_FORMAT, 1, true), "the message was lost to a bad format: " .. err)
  for _, part in ipairs{...} do
    assert.truthy(err:find(part, 1, true), ("expected %q in the message %q"):format(part, err))
  end
end

describe("shape mismatches name the op and both shapes", function()
  it("broadcasting (2, 3) with (4)", function()
    assert.has_error(function() return bbb.zeros(2, 3) + bbb.zeros(4) end,
      "bbb.add: shapes (2, 3) and (4) cannot be broadcast")
    assert.has_error(function() return bbb.zeros(3):logaddexp(bbb.zeros(2)) end,
      "bbb.logaddexp: shapes (3) and (2) cannot be broadcast")
  end)
  it("matmul with different inner sizes, also when transposed", function()
    assert.has_error(function() return bbb.matmul(bbb.zeros(2, 3), bbb.zeros(4, 5)) end,
      "bbb.matmul: inner sizes differ: (2, 3) times (4, 5)")
    assert.has_error(function() return bbb.matmul(bbb.zeros(2, 3), bbb.zeros(4, 5), false, true) end,
      "bbb.matmul: inner sizes differ: (2, 3) times (4, 5)^T")
  end)
  it("matmul of a vector", function()
    assert.has_error(function() return bbb.matmul(bbb.zeros(3), bbb.zeros(3, 2)) end,
      "bbb.matmul: first operand must be 2-d, got (3)")
  end)
  it("linear with the wrong input width", function()
    assert.has_error(function() return bbb.linear(bbb.zeros(2, 3), bbb.zeros(5, 4)) end,
      "bbb.linear: input (2, 3) does not match weight (5, 4) (input width must equal weight columns)")
  end)
  it("linear with the wrong bias", function()
    assert.has_error(function() return bbb.linear(bbb.zeros(2, 3), bbb.zeros(5, 3), bbb.zeros(4)) end,
      "bbb.linear: bias (4) does not match weight (5, 3)")
  end)
  it("reshape to another element count", function()
    assert.has_error(function() return bbb.zeros(2, 3):reshape(4, 2) end,
      "bbb.reshape: cannot view (2, 3) (6 elements) as 8 elements")
    assert.has_error(function() return bbb.zeros(5):reshape(-1, 2) end,
      "bbb.reshape: argument 2 (sizes): cannot infer size 1: (5) has 5 elements, the other sizes give 2")
  end)
  it("cat of tensors whose other dimensions differ", function()
    assert.has_error(function() return bbb.cat({bbb.zeros(2, 3), bbb.zeros(2, 4)}) end,
      "bbb.cat: tensor 2 (2, 4) does not fit tensor 1 (2, 3) (all sizes but dimension 1 must agree)")
  end)
  it("nll with as many labels as rows required", function()
    assert.has_error(function() return bbb.nll(bbb.zeros(3, 4), bbb.tensor{1, 2}) end,
      "bbb.nll: 2 labels (2) for 3 rows of (3, 4)")
  end)
  it("log_softmax of a 0-d tensor", function()
    assert.has_error(function() return bbb.tensor(1):log_softmax() end,
      "bbb.log_softmax: needs at least 1 dimension, got ()")
  end)
  it("transpose of a vector", function()
    assert.has_error(function() return bbb.zeros(2):t() end,
      "bbb.transpose: needs a 2-d tensor, got (2)")
  end)
  it("copy, set_grad and row assignment of the wrong size", function()
    assert.has_error(function() return bbb.zeros(2):copy(bbb.zeros(3)) end,
      "bbb.copy: argument 2 (src): (3) has 3 elements, the destination (2) has 2")
    assert.has_error(function() return bbb.zeros(2):set_grad(bbb.zeros(3)) end,
      "bbb.set_grad: gradient (3) does not match tensor (2)")
    assert.has_error(function() local t = bbb.zeros(2, 2); t[1] = bbb.zeros(3) end,
      "bbb.Tensor.__newindex: argument 3 (value): row 1 of (2, 2) has 2 elements, the value (3) has 3")
  end)
  it("bayes_sample with mu and rho of different shapes", function()
    assert.has_error(function() return core.bayes_sample(bbb.zeros(2), bbb.zeros(3)) end,
      "bayes_sample: mu (2) and rho (3) differ in shape")
  end)
end)

describe("wrong types", function()
  it("a string or nil where a tensor is expected", function()
    assert.has_error(function() return bbb.zeros(2) + "a" end,
      "bbb.add: argument 2 (b): expected a tensor or a number, got the string \"a\"")
    assert.has_error(function() return bbb.exp(nil) end,
      "bbb.exp: argument 1 (x): expected a tensor, got nil")
    assert.has_error(function() return bbb.linear(bbb.zeros(1, 2), {}) end,
      "bbb.linear: argument 2 (W): expected a tensor, got table")
  end)
  it("ragged rows in a nested table", function()
    assert.has_error(function() return bbb.tensor{{1, 2}, {3}} end,
      "bbb.tensor: argument 1 (data): ragged table: a row at depth 2 has 1 entries, expected 2")
    assert.has_error(function() return bbb.tensor{{1, 2}, 3} end,
      "bbb.tensor: argument 1 (data): ragged table: expected a table at depth 2, got number")
  end)
  it("entries that are not numbers", function()
    assert.has_error(function() return bbb.tensor{1, "x", 3} end,
      "bbb.tensor: argument 1 (data): entry 2 at depth 1 is a string, not a number")
    assert.has_error(function() return bbb.tensor{{1, 2}, {3, true}} end,
      "bbb.tensor: argument 1 (data): entry 2 at depth 2 is a boolean, not a number")
  end)
  it("cat of something that is not a tensor", function()
    assert.has_error(function() return bbb.cat({bbb.zeros(2), 3}) end,
      "bbb.cat: argument 1 (tensors): entry 2 is a number, not a tensor")
  end)
  it("sizes that are not integers", function()
    assert.has_error(function() return bbb.zeros(2.5) end, "bbb.zeros: argument 1 (sizes): size 1 is 2.5, not an integer")
    assert.has_error(function() return bbb.ones{2, "a"} end, "bbb.ones: argument 1 (sizes): size 2 is the string \"a\", not an integer")
  end)
  it("an unknown nll reduction", function()
    assert.has_error(function() return bbb.nll(bbb.zeros(2, 3), bbb.tensor{1, 1}, "max") end,
      "bbb.nll: argument 3 (reduction): expected one of \"sum\", \"mean\", got \"max\"")
  end)
end)

describe("indices out of range", function()
  local t = bbb.zeros(4, 2)
  it("t[0] and t[5] on 4 rows", function()
    assert.has_error(function() return t[0] end, "bbb.Tensor.__index: argument 2 (index): expected 1..4 for a tensor (4, 2), got 0")
    assert.has_error(function() return t[5] end, "bbb.Tensor.__index: argument 2 (index): expected 1..4 for a tensor (4, 2), got 5")
  end)
  it("assignment to row 5 of 4", function()
    assert.has_error(function() t[5] = 1 end,
      "bbb.Tensor.__newindex: argument 2 (index): expected 1..4 for a tensor (4, 2), got 5")
  end)
  it("rows of a 0-d tensor", function()
    assert.has_error(function() return bbb.tensor(1)[1] end,
      "bbb.Tensor.__index: argument 2 (index): a 0-d tensor has no rows; use item()")
  end)
  it("a fractional index", function()
    assert.has_error(function() return t[1.5] end,
      "bbb.Tensor.__index: argument 2 (index): expected an integer, got 1.5")
  end)
  it("get and set", function()
    assert.has_error(function() return t:get(1, 3) end, "bbb.get: argument 3 (index): expected 1..2 in dimension 2, got 3")
    assert.has_error(function() return t:get(1) end, "bbb.get: argument 2 (indices): a 2-d tensor (4, 2) takes 2 indices, got 1")
    assert.has_error(function() return t:set(5, 1, 0) end, "bbb.set: argument 2 (index): expected 1..4 in dimension 1, got 5")
  end)
  it("narrow past the end, and on a missing dimension", function()
    assert.has_error(function() return bbb.zeros(4, 3):narrow(1, 3, 3) end,
      "bbb.narrow: rows 3..5 out of range 1..4 of dimension 1 of (4, 3)")
    assert.has_error(function() return bbb.zeros(4, 3):narrow(3, 1, 1) end,
      "bbb.narrow: argument 2 (dim): expected 1..2 or -2..-1 for a 2-d tensor (4, 3), got 3")
  end)
  it("index_select past the end", function()
    assert.has_error(function() return bbb.zeros(4, 3):index_select(bbb.tensor{1, 5}) end,
      "bbb.index_select: index 5 at position 2 out of range 1..4")
  end)
  it("a dimension out of range for sum, size and cat", function()
    assert.has_error(function() return bbb.zeros(4, 3):sum(3) end,
      "bbb.sum: argument 2 (dim): expected 1..2 or -2..-1 for a 2-d tensor (4, 3), got 3")
    assert.has_error(function() return bbb.zeros(4, 3):size(0) end,
      "bbb.size: argument 2 (dim): expected 1..2 or -2..-1 for a 2-d tensor (4, 3), got 0")
    assert.has_error(function() return bbb.tensor(1):mean(1) end,
      "bbb.mean: argument 2 (dim): a 0-d tensor has no dimension 1")
    assert.has_error(function() return bbb.cat({bbb.zeros(2)}, 2) end,
      "bbb.cat: argument 2 (dim): expected 1..1 or -1..-1 for a 1-d tensor (2), got 2")
  end)
  it("from_bytes past the end of the string", function()
    assert.has_error(function() return bbb.from_bytes("abc", 0, {4}) end,
      "bbb.from_bytes: argument 3 (sizes): 4 bytes at offset 0 exceed the 3 available")
  end)
end)

describe("seeds that are not finite integers", function()
  it("manual_seed(NaN)", function()
    errors_with(function() bbb.manual_seed(0 / 0) end, "bbb.manual_seed: argument 1 (seed): expected an integer, got ", "nan")
  end)
  it("Generator(math.huge)", function()
    errors_with(function() bbb.Generator(math.huge) end, "bbb.Generator: argument 1 (seed): expected an integer, got inf")
  end)
  it("Generator(1.5)", function()
    errors_with(function() bbb.Generator(1.5) end, "bbb.Generator: argument 1 (seed): expected an integer, got 1.5")
  end)
  it("a string seed", function()
    assert.has_error(function() bbb.Generator("x") end, "bbb.Generator: argument 1 (seed): expected an integer, got the string \"x\"")
  end)
end)

describe("negative sizes", function()
  it("zeros(-1, 2) and ones{2, -3}", function()
    assert.has_error(function() return bbb.zeros(-1, 2) end, "bbb.zeros: argument 1 (sizes): size 1 is negative (-1)")
    assert.has_error(function() return bbb.ones{2, -3} end, "bbb.ones: argument 1 (sizes): size 2 is negative (-3)")
  end)
  it("reshape with a negative size other than one -1", function()
    assert.has_error(function() return bbb.zeros(4):reshape(2, -2) end, "bbb.reshape: argument 3 (sizes): size 2 is negative (-2)")
  end)
  it("more dimensions than a tensor holds", function()
    assert.has_error(function() return bbb.zeros(1, 1, 1, 1, 1, 1, 1) end, "bbb.zeros: argument 1 (sizes): at most 6 sizes, got 7")
  end)
end)

describe("bad parameters", function()
  it("rand with lo >= hi", function()
    errors_with(function() return bbb.rand({2}, 1, 1) end, "bbb.rand: argument 3 (hi): expected a number > lo (1.0), got 1.0")
  end)
  it("randn with a negative std", function()
    errors_with(function() return bbb.randn({2}, 0, -1) end,
      "bbb.randn: argument 3 (std): expected a number >= 0, got -1.0")
  end)
  it("clamp with min > max", function()
    assert.has_error(function() return bbb.zeros(2):clamp(1, 0) end, "bbb.clamp: argument 3 (hi): expected a number >= lo (1.0), got 0.0")
  end)
  it("pow(inf)", function()
    errors_with(function() return bbb.zeros(2):pow(math.huge) end, "bbb.pow: argument 2 (p): expected a finite number, got inf")
  end)
  it("arange with step 0", function()
    errors_with(function() return bbb.arange(0, 1, 0) end, "bbb.arange: argument 3 (step): expected a non-zero number, got 0")
  end)
  it("linspace with no points", function()
    assert.has_error(function() return bbb.linspace(0, 1, 0) end, "bbb.linspace: argument 3 (n): expected an integer in 1..1099511627776, got 0")
  end)
  it("set_num_threads(0) and more threads than 8 per core", function()
    local cap = bbb.max_threads()
    local cores = tonumber(io.popen("getconf _NPROCESSORS_ONLN"):read("a"))
    assert.are.equal(math.min(1024, 8 * cores), cap)
    local msg = ("bbb.set_num_threads: need 1..%d threads (8 per core, %d cores), got "):format(cap, cores)
    assert.has_error(function() bbb.set_num_threads(0) end, msg .. "0")
    assert.has_error(function() bbb.set_num_threads(cap + 1) end, msg .. (cap + 1))
    assert.has_error(function() bbb.set_num_threads(1 << 40) end, msg .. (1 << 40))
    if cap < 1024 then
      assert.has_error(function() bbb.set_num_threads(1024) end, msg .. "1024")
    end
    local old = bbb.get_num_threads()
    bbb.set_num_threads(cap)
    assert.are.equal(cap, bbb.get_num_threads())
    bbb.set_num_threads(old)
  end)
  it("a generator argument that is not one", function()
    assert.has_error(function() return bbb.randn({2}, 0, 1, "x") end,
      "bbb.randn: argument 4 (gen): expected a bbb.Generator, got the string \"x\"")
  end)
end)

describe("autograd misuse", function()
  local function param() return bbb.tensor{1, 2}:requires_grad(true) end
  it("backward on a non-scalar without a seed", function()
    assert.has_error(function() (param() * 2):backward() end,
      "bbb.backward: tensor (2) is not a scalar; pass a seed gradient of the same shape")
  end)
  it("backward twice through a freed graph", function()
    local y = (param() * 2):sum()
    y:backward()
    assert.has_error(function() y:backward() end,
      "bbb.backward: the graph of this tensor was already freed by an earlier backward() "
      .. "(pass retain_graph = true to keep it)")
  end)
  it("a second backward through a shared subgraph the first one freed", function()
    local x = param()
    local y = x * 2
    local a, b = y:sum(), (y * 3):sum()
    a:backward()
    assert.has_error(function() b:backward() end,
      "bbb.backward: the graph of this tensor was already freed by an earlier backward() "
      .. "(pass retain_graph = true to keep it)")
    -- the first backward's gradient stands, the failed one added nothing
    assert.are.same({2, 2}, x.grad:totable())
  end)
  it("a second backward through a shared subgraph kept by retain_graph adds up", function()
    local x = param()
    local y = x * 2
    local a, b = y:sum(), (y * 3):sum()
    a:backward(nil, true)
    b:backward()
    assert.are.same({8, 8}, x.grad:totable())
  end)
  it("backward on a tensor that does not require grad", function()
    assert.has_error(function() bbb.zeros(2):sum():backward() end,
      "bbb.backward: tensor does not require grad (no input of the computation was marked with requires_grad)")
  end)
  it("a seed of the wrong shape", function()
    assert.has_error(function() (param() * 2):backward(bbb.zeros(3)) end,
      "bbb.backward: seed gradient (3) does not match tensor (2)")
  end)
  it("an output the graph saved, modified in place", function()
    local a = param() * 2
    local b = a:exp()
    b:fill(1)
    assert.has_error(function() b:sum():backward() end,
      "bbb.backward: the output of 'exp' was modified in place after it was used")
  end)
  it("an input the graph saved, modified in place", function()
    local w = param()
    local y = w:log()
    w:fill(3)
    assert.has_error(function() y:sum():backward() end,
      "bbb.backward: input 1 of 'log' was modified in place after it was used (version 1, expected 0)")
  end)
  it("requires_grad(false) on a computed tensor", function()
    assert.has_error(function() (param() * 2):requires_grad(false) end,
      "bbb.requires_grad: cannot turn off on a tensor computed by 'mul'; use detach()")
  end)
  it("labels out of range in nll", function()
    assert.has_error(function() return bbb.nll(bbb.zeros(2, 3), bbb.tensor{1, 4}) end,
      "bbb.nll: label 4 at row 2 is not a class in 1..3")
    assert.has_error(function() return bbb.nll(bbb.zeros(2, 3), bbb.tensor{0, 1}) end,
      "bbb.nll: label 0 at row 1 is not a class in 1..3")
  end)
end)

describe("tensor lifetime and scalars", function()
  it("a tensor used after its <close> scope ended", function()
    local kept
    do
      local t <close> = bbb.ones(2)
      kept = t
    end
    assert.has_error(function() return kept:sum() end, "bbb.sum: argument 1 (x): the tensor is closed")
    assert.has_error(function() return kept[1] end, "bbb.Tensor.__index: argument 1 (x): the tensor is closed")
    assert.has_error(function() return #kept end, "bbb.Tensor.__len: argument 1 (x): the tensor is closed")
    assert.are.equal("[bbb.Tensor (closed)]", tostring(kept))
    assert.is_false(bbb.is_tensor(kept))
  end)
  it("item() of a tensor with more than one element", function()
    assert.has_error(function() return bbb.zeros(2):item() end, "bbb.item: argument 1 (x): expected one element, the tensor (2) has 2")
    assert.has_error(function() return bbb.zeros(0):item() end, "bbb.item: argument 1 (x): expected one element, the tensor (0) has 0")
  end)
end)

describe("bad prior tables", function()
  local w = bbb.zeros(3)
  it("a mixture with pi outside (0, 1)", function()
    assert.has_error(function()
      return core.bayes_sample(w, w, {kind = "mixture", pi = 1.5, sigma1 = 1, sigma2 = 0.1})
    end, "ScaleMixture prior: pi must be in (0, 1), got 1.5")
  end)
  it("a mixture with sigma2 <= 0", function()
    assert.has_error(function()
      return core.prior_log_prob({kind = "mixture", pi = 0.5, sigma1 = 1, sigma2 = 0}, w)
    end, "ScaleMixture prior: sigma2 must be positive and finite, got 0")
  end)
  it("a Gaussian with sigma <= 0 or missing", function()
    assert.has_error(function() return core.prior_log_prob({kind = "gaussian", sigma = -1}, w) end,
      "Gaussian prior: sigma must be positive and finite, got -1")
    assert.has_error(function() return core.prior_log_prob({kind = "gaussian"}, w) end,
      "Gaussian prior: sigma must be positive and finite, got 0")
    assert.has_error(function() return core.prior_log_prob({kind = "gaussian", sigma = math.huge}, w) end,
      "Gaussian prior: sigma must be positive and finite, got inf")
  end)
  it("a Laplace with b = 0", function()
    assert.has_error(function() return core.prior_log_prob({kind = "laplace", b = 0}, w) end,
      "Laplace prior: b must be positive and finite, got 0")
  end)
  it("an unknown kind", function()
    assert.has_error(function() return core.prior_log_prob({kind = "cauchy"}, w) end,
      "bbb.core.prior_log_prob: argument 1 (prior): unknown kind \"cauchy\" (expected \"gaussian\", \"mixture\", \"laplace\" or \"none\")")
  end)
  it("no prior at all for prior_log_prob", function()
    assert.has_error(function() return core.prior_log_prob({kind = "none"}, w) end,
      "prior_log_prob: no prior given")
  end)
  it("a parameter that is not a number", function()
    errors_with(function() return core.prior_log_prob({kind = "gaussian", sigma = "x"}, w) end,
      "bbb.core.prior_log_prob: argument 1 (prior): field sigma must be a number, got string")
  end)
end)

describe("load_idx on bad files", function()
  local base = os.tmpname()
  local made = {}
  local function write(suffix, bytes)
    local path = base .. suffix
    local f = assert(io.open(path, "wb"))
    f:write(bytes)
    f:close()
    made[#made + 1] = path
    return path
  end
  teardown(function()
    for _, p in ipairs(made) do os.remove(p) end
    os.remove(base)
  end)

  it("a missing file", function()
    local path = base .. ".missing"
    assert.has_error(function() return core.load_idx(path) end,
      ("idx: cannot open '%s': No such file or directory"):format(path))
  end)
  it("a bad magic number", function()
    local path = write(".magic", "\0\0\9\1\0\0\0\2ab")
    assert.has_error(function() return core.load_idx(path) end,
      ("idx: '%s' is not an IDX file of unsigned bytes with 1 to 4 dimensions (magic 00 00 09 01)")
        :format(path))
  end)
  it("a file shorter than the magic", function()
    local path = write(".short", "\0\0")
    assert.has_error(function() return core.load_idx(path) end,
      ("idx: '%s' is too short for an IDX header (2 bytes)"):format(path))
  end)
  it("a file that ends inside its dimensions", function()
    local path = write(".header", "\0\0\8\2\0\0\0\3\0\0")
    assert.has_error(function() return core.load_idx(path) end,
      ("idx: '%s' ends inside its header"):format(path))
  end)
  it("a file with fewer data bytes than its header promises", function()
    local path = write(".trunc", "\0\0\8\2\0\0\0\3\0\0\0\2abc")
    assert.has_error(function() return core.load_idx(path) end,
      ("idx: '%s' declares 6 data bytes, so 18 bytes in all, but holds 15"):format(path))
  end)
  it("an intact file still loads", function()
    local path = write(".good", "\0\0\8\2\0\0\0\2\0\0\0\2\1\2\3\4")
    assert.are.same({{1, 2}, {3, 4}}, core.load_idx(path):totable())
  end)
end)

describe("the kind of a core error reaches Lua", function()
  local function kind_of(fn)
    local ok = pcall(fn)
    assert.is_false(ok)
    return (core.last_error())
  end
  it("a shape mismatch is a shape error", function()
    assert.are.equal("shape", kind_of(function() return bbb.zeros(2) + bbb.zeros(3) end))
  end)
  it("a size too large to hold is a shape error, not out of memory", function()
    assert.are.equal("shape", kind_of(function() return bbb.ones{2 ^ 30, 2 ^ 30} end))
    local _, msg = core.last_error()
    assert.falsy(msg:find("out of memory", 1, true), msg)
  end)
  it("an index out of range is an index error", function()
    assert.are.equal("index", kind_of(function() return bbb.zeros(3, 2):narrow(1, 3, 2) end))
  end)
  it("autograd misuse is a graph error", function()
    assert.are.equal("graph", kind_of(function() bbb.zeros(2):sum():backward() end))
  end)
end)

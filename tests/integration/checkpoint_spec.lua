-- Checkpoints: round trips, a reader that is not bbb's, hostile files, and
-- atomic writes under SIGKILL.
local bbb = require "bbb"
local cjson = require "cjson"

local build = os.getenv("BBB_BUILD") or "build"
local root = os.getenv("BBB_ROOT") or "."

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

local function max_diff(a, b) return (a - b):abs():max():item() end

local function write_bytes(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- A safetensors file made by hand: header table (encoded with cjson) + data.
local function handmade(path, header, data, raw_len)
  local h = type(header) == "string" and header or cjson.encode(header)
  write_bytes(path, string.pack("<I8", raw_len or #h) .. h .. (data or ""))
  return path
end

local function floats(...) return string.pack(("<" .. ("f"):rep(select("#", ...))), ...) end

local function net_and_opt()
  local gen = bbb.Generator(11)
  local net = bbb.nn.bayes_mlp({ 6, 5, 3 }, { prior = bbb.prior.ScaleMixture{ pi = 0.25 }, generator = gen })
  local opt = bbb.optim.Adam(net, { lr = 0.01 })
  local elbo = bbb.elbo.ELBO{ n_data = 20, batch_size = 10 }
  local x, y = bbb.randn({ 10, 6 }, 0, 1, gen), bbb.tensor{ 1, 2, 3, 1, 2, 3, 1, 2, 3, 1 }
  for _ = 1, 3 do
    opt:zero_grad()
    elbo:loss(net, x, y):backward()
    opt:step()
  end
  return net, opt, gen, x
end

describe("bbb.save / bbb.load", function()
  it("round-trips a model: the loaded one predicts exactly the same", function()
    local net, _, _, x = net_and_opt()
    local path = tmp .. "/model.safetensors"
    bbb.save(path, net)
    local m = bbb.load(path)
    assert.are.equal(tostring(net), tostring(m))
    assert.are.equal(0, max_diff(net:predict(x, { mode = "mean" }), m:predict(x, { mode = "mean" })))
    -- the same noise gives the same MC prediction
    for _, l in ipairs { net, m } do
      l:apply(function(layer) if layer.mode then layer.generator = bbb.Generator(5) end end)
    end
    assert.are.equal(0, max_diff(net:predict(x, { samples = 4 }), m:predict(x, { samples = 4 })))
    assert.is_false(m.training)
  end)

  it("round-trips plain and dropout MLPs", function()
    local net = bbb.nn.mlp({ 4, 7, 2 }, { dropout = 0.3, activation = bbb.nn.Tanh })
    local path = tmp .. "/mlp.safetensors"
    bbb.save(path, net)
    local m = bbb.load(path)
    assert.are.equal(tostring(net), tostring(m))
    local x = bbb.randn{ 3, 4 }
    assert.are.equal(0, max_diff(net:predict(x, { mode = "mean" }), m:predict(x, { mode = "mean" })))
  end)

  it("saves and restores optimizer moments, schedule position, ELBO step and generators", function()
    local net, opt, gen = net_and_opt()
    local sched = bbb.optim.schedule.exponential(opt, 0.5)
    sched:step()
    local elbo = bbb.elbo.ELBO{ n_data = 20, batch_size = 10 }
    elbo.steps = 7
    local path = tmp .. "/state.ckpt"
    bbb.save(path, { model = net, optimizer = opt, schedule = sched, elbo = elbo, generators = { g = gen },
                     state = { note = "x", value = 0.1 + 0.2 } })
    local draw = bbb.randn({ 5 }, 0, 1, gen)
    local m, info = bbb.load(path)
    local opt2 = bbb.optim.Adam(m, { lr = 0.01 })
    local sched2 = bbb.optim.schedule.exponential(opt2, 0.5)
    local elbo2 = bbb.elbo.ELBO{ n_data = 20, batch_size = 10 }
    local gen2 = bbb.Generator(999)
    bbb.checkpoint.restore(info, { optimizer = opt2, schedule = sched2, elbo = elbo2, generators = { g = gen2 } })
    assert.are.equal(opt.t, opt2.t)
    assert.are.equal(opt.lr, opt2.lr)
    assert.are.equal(1, sched2.epoch)
    assert.are.equal(7, elbo2.steps)
    assert.are.equal(0.1 + 0.2, info.meta.state.value)   -- doubles read back exactly
    for i, p in ipairs(opt.params) do
      assert.are.equal(0, max_diff(p.m, opt2.params[i].m))
      assert.are.equal(0, max_diff(p.v, opt2.params[i].v))
    end
    assert.are.equal(0, max_diff(draw, bbb.randn({ 5 }, 0, 1, gen2)))
  end)

  it("writes plain safetensors that an independent reader opens", function()
    local net = net_and_opt()
    local path = tmp .. "/plain.safetensors"
    bbb.save(path, net)
    -- the reader of the safetensors format, written from its description
    local s = read_bytes(path)
    local n = string.unpack("<I8", s)
    assert.are.equal(0, (8 + n) % 8)   -- data aligned
    local header = cjson.decode(s:sub(9, 8 + n))
    assert.are.equal("bbb", header.__metadata__.format)
    local data = s:sub(9 + n)
    local seen = 0
    for name, t in pairs(net:state_dict()) do
      local e = header["model." .. name]
      assert.are.equal("F32", e.dtype)
      assert.are.same(t:size(), e.shape)
      local b, en = e.data_offsets[1], e.data_offsets[2]
      assert.are.equal(4 * t:numel(), en - b)
      local values = t:reshape(-1):totable()
      for i = 1, #values do
        local v = string.unpack("<f", data, b + 4 * (i - 1) + 1)
        assert.are.equal(values[i], v)
      end
      seen = seen + 1
    end
    assert.are.equal(8, seen)
  end)

  it("reads a file written by hand (another tool) with no bbb metadata", function()
    local path = handmade(tmp .. "/hand.safetensors",
      { a = { dtype = "F32", shape = { 2, 2 }, data_offsets = { 0, 16 } },
        b = { dtype = "F32", shape = {}, data_offsets = { 16, 20 } } }, floats(1, 2, 3, 4, 5))
    local ts, meta = bbb.checkpoint.read(path)
    assert.are.same({ { 1, 2 }, { 3, 4 } }, ts.a:totable())
    assert.are.equal(5, ts.b:item())
    assert.are.same({}, meta)
  end)
end)

describe("the checkpoint loader trusts nothing", function()
  local good = { w = { dtype = "F32", shape = { 2 }, data_offsets = { 0, 8 } } }
  local cases = {
    { "a missing file", function() return tmp .. "/does-not-exist" end, "cannot open" },
    { "a directory", function() return tmp end, "is a directory" },
    { "an empty file", function() write_bytes(tmp .. "/e", ""); return tmp .. "/e" end, "too short for a safetensors header" },
    { "a header length beyond the file", function() return handmade(tmp .. "/h1", good, floats(1, 2), 1 << 40) end,
      "declares a 1099511627776-byte header" },
    { "a huge header length", function() return handmade(tmp .. "/h2", good, floats(1, 2), -1) end, "byte header" },
    { "a truncated file", function()
        local p = handmade(tmp .. "/t", good, floats(1, 2))
        local s = read_bytes(p)
        write_bytes(p, s:sub(1, #s - 3))
        return p
      end, "lie outside the 5 data bytes" },
    { "offsets out of range", function()
        return handmade(tmp .. "/o", { w = { dtype = "F32", shape = { 2 }, data_offsets = { 4, 12 } } }, floats(1, 2))
      end, "lie outside" },
    { "negative offsets", function()
        return handmade(tmp .. "/n", { w = { dtype = "F32", shape = { 2 }, data_offsets = { -8, 0 } } }, floats(1, 2))
      end, "must be a non-negative integer" },
    { "overlapping tensors", function()
        return handmade(tmp .. "/ov", { a = { dtype = "F32", shape = { 2 }, data_offsets = { 0, 8 } },
                                        b = { dtype = "F32", shape = { 1 }, data_offsets = { 4, 8 } } }, floats(1, 2))
      end, "overlap" },
    { "a shape that does not match the bytes", function()
        return handmade(tmp .. "/s", { w = { dtype = "F32", shape = { 3 }, data_offsets = { 0, 8 } } }, floats(1, 2))
      end, "shape 3 needs 12 bytes but data_offsets give 8" },
    { "a shape far beyond the file", function()
        return handmade(tmp .. "/s2", { w = { dtype = "F32", shape = { 1 << 30, 1 << 30 }, data_offsets = { 0, 8 } } },
          floats(1, 2))
      end, "needs more data than the file holds" },
    { "an unknown dtype", function()
        return handmade(tmp .. "/d", { w = { dtype = "F64", shape = { 1 }, data_offsets = { 0, 8 } } }, floats(1, 2))
      end, "dtype F64 is not supported" },
    { "a header that is not JSON", function() return handmade(tmp .. "/j", "{nope", floats(1, 2)) end, "header" },
    { "non-UTF-8 text", function() return handmade(tmp .. "/u", '{"w\255":1}', "") end, "not valid UTF-8" },
    { "deeply nested JSON", function()
        return handmade(tmp .. "/deep", ("["):rep(10000) .. ("]"):rep(10000), "")
      end, "nested" },
    { "metadata that is not a model", function()
        return handmade(tmp .. "/m", { __metadata__ = { format = "bbb",
          bbb = cjson.encode{ format_version = 1, model = { type = "Warp", n_in = 3 } } } }, "")
      end, "does not describe a model bbb can build: nn.build: config has an unknown layer type Warp" },
    { "a model whose sizes do not match its tensors", function()
        return handmade(tmp .. "/mm", {
          __metadata__ = { format = "bbb", bbb = cjson.encode{ format_version = 1,
            model = { type = "Linear", n_in = 3, n_out = 2, bias = false } } },
          ["model.weight"] = { dtype = "F32", shape = { 6 }, data_offsets = { 0, 24 } } },
          floats(1, 2, 3, 4, 5, 6))
      end, "load_state_dict: weight has size 6, the module's is 2x3" },
  }
  for _, c in ipairs(cases) do
    it("refuses " .. c[1], function()
      local path = c[2]()
      local ok, err = pcall(bbb.load, path)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(c[3], 1, true), ("expected %q in %q"):format(c[3], tostring(err)))
    end)
  end

  it("survives random corruption of a real checkpoint without crashing", function()
    local net = net_and_opt()
    local path = tmp .. "/fuzz.ckpt"
    bbb.save(path, net)
    local s = read_bytes(path)
    local g = bbb.Generator(3)
    local u = bbb.rand({ 600 }, 0, 1, g):totable()
    local refused = 0
    for k = 1, 200 do
      local pos = 1 + math.floor(u[3 * k - 2] * #s)
      local byte = math.floor(u[3 * k - 1] * 256)
      local cut = u[3 * k] < 0.3
      local bad = s:sub(1, pos - 1) .. string.char(byte) .. (cut and "" or s:sub(pos + 1))
      write_bytes(tmp .. "/fuzzed", bad)
      if not pcall(bbb.load, tmp .. "/fuzzed") then refused = refused + 1 end
    end
    assert.truthy(refused > 0)
  end)
end)

describe("atomic writes", function()
  it("leave the old or the new checkpoint complete when killed at any moment", function()
    local path = tmp .. "/atomic.ckpt"
    local bbblua = build .. "/bbblua"
    -- a writer that saves a 1.2M-float model with alternating contents forever
    local script = tmp .. "/writer.lua"
    write_bytes(script, ([[
      local a = bbb.nn.bayes_mlp({ 784, 400, 400, 10 })
      local path = %q
      local k = 0
      while true do
        k = k + 1
        for _, t in pairs(a:state_dict()) do t:fill(k) end
        bbb.save(path, a)
      end
    ]]):format(path))
    local g = bbb.Generator(8)
    local delays = bbb.rand({ 12 }, 0.05, 0.6, g):totable()
    local checked = 0
    for _, d in ipairs(delays) do
      os.execute(("cd %q && (%q %q & pid=$!; sleep %.3f; kill -9 $pid; wait $pid) 2>/dev/null")
        :format(root, bbblua, script, d))
      local ok, m = pcall(bbb.load, path)
      if io.open(path) then
        assert.is_true(ok, tostring(m))
        -- every tensor holds the same k: one complete write, not a mix
        local v
        for _, t in pairs(m:state_dict()) do
          local top = t:max():item()
          v = v or top
          assert.are.equal(v, top)
          assert.are.equal(0, (t - top):abs():max():item())
        end
        checked = checked + 1
      end
    end
    assert.truthy(checked >= 10, "the writer never produced a checkpoint")
    os.execute("rm -f " .. tmp .. "/atomic.ckpt.bbb-tmp.*")
  end)
end)

describe("saving over what is already there", function()
  local sys = require("bbb.core").sys
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(sys.mkdir_p(dir))
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  local net = function() return bbb.nn.Linear(2, 2) end

  it("refuses a FIFO, a symbolic link and a folder, and leaves them as they were", function()
    assert(os.execute(("mkfifo '%s/fifo' && ln -s target '%s/link' && mkdir '%s/folder'"):format(dir, dir, dir)))
    local f = assert(io.open(dir .. "/target", "w")); f:write("keep"); f:close()
    for name, what in pairs { fifo = "a FIFO", link = "a symbolic link", folder = "a folder" } do
      local ok, err = pcall(bbb.save, dir .. "/" .. name, net())
      assert.is_false(ok)
      assert.truthy(tostring(err):find("is " .. what .. ", not a regular file: refusing to replace it", 1, true), err)
    end
    assert.are.equal("fifo", sys.kind(dir .. "/fifo"))
    assert.are.equal("link", sys.kind(dir .. "/link"))
    local t = assert(io.open(dir .. "/target")); assert.are.equal("keep", t:read("a")); t:close()
  end)

  it("keeps the mode of the file it replaces", function()
    local path = dir .. "/m.ckpt"
    bbb.save(path, net())
    assert(os.execute(("chmod 600 '%s'"):format(path)))
    bbb.save(path, net())
    local p = io.popen(("stat -c %%a '%s'"):format(path))
    local mode = p:read("l")
    p:close()
    assert.are.equal("600", mode)
  end)

  it("removes the temporaries a killed save left for the same file, and only those", function()
    local dead = 4194000   -- a process id that no process has
    while sys.kill(dead, 0) do dead = dead - 1 end
    local stale = ("%s/m.ckpt.bbb-tmp.%d.AbC123"):format(dir, dead)
    local other = ("%s/n.ckpt.bbb-tmp.%d.AbC123"):format(dir, dead)
    for _, p in ipairs { stale, other } do local f = assert(io.open(p, "w")); f:close() end
    bbb.save(dir .. "/m.ckpt", net())
    assert.is_nil(sys.kind(stale), "the stale temporary of m.ckpt is still there")
    assert.are.equal("file", sys.kind(other), "another file's temporary was removed")
  end)
end)

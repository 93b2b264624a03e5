-- Bad input the binding and the readers once took silently, files that
-- blocked or were read torn, and a memory limit that made OpenBLAS spin:
-- each is now a clear error naming the function and the argument.
local bbb = require "bbb"
local core = require "bbb.core"
local helpers = require "helpers"

local function message(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. helpers.q(tmp))
teardown(function() os.execute("rm -rf " .. helpers.q(tmp)) end)

describe("sizes and values that used to pass", function()
  it("zeros('abc') and zeros(nil) are errors, not 0-d tensors", function()
    assert.are.equal('bbb.zeros: argument 1 (sizes): expected integer sizes or a table of them, got the string "abc"',
      message(function() return bbb.zeros("abc") end))
    assert.are.equal("bbb.zeros: argument 1 (sizes): expected integer sizes or a table of them, got nil",
      message(function() return bbb.zeros(nil) end))
    assert.are.equal('bbb.ones: argument 2 (sizes): size 2 is the string "x", not an integer',
      message(function() return bbb.ones(2, "x") end))
    assert.are.equal(0, bbb.zeros():dim())
  end)
  it("a value that overflows float32 is refused, inf itself is kept", function()
    assert.are.equal("bbb.tensor: argument 1 (data): entry 2 at depth 1 (1e+39) overflows float32",
      message(function() return bbb.tensor{1, 1e39} end))
    assert.truthy(message(function() return bbb.full({2}, -1e39) end)
      :find("bbb.full: argument 2 (value): -1e+39 overflows float32", 1, true))
    assert.are.equal(math.huge, bbb.tensor{math.huge}:totable()[1])
  end)
  it("softmax and log_softmax honour only the last dimension and refuse another", function()
    local x = bbb.randn({2, 3}, 0, 1, bbb.Generator(1))
    assert.are.same(x:softmax():totable(), x:softmax(2):totable())
    assert.are.same(x:log_softmax():totable(), x:log_softmax(-1):totable())
    assert.are.equal("bbb.softmax: argument 2 (dim): only the last dimension (2 or -1) is supported, got 1",
      message(function() return x:softmax(1) end))
  end)
  it("linspace and arange refuse NaN and infinite bounds", function()
    assert.truthy(message(function() return bbb.linspace(0 / 0, 1, 3) end)
      :find("bbb.linspace: argument 1 (a): expected a finite number, got ", 1, true))
    assert.are.equal("bbb.linspace: argument 2 (b): expected a finite number, got inf",
      message(function() return bbb.linspace(0, math.huge, 3) end))
  end)
  it("from_bytes refuses a bad offset and scale", function()
    assert.are.equal("bbb.from_bytes: argument 2 (offset): expected an integer in 0..3, got -1",
      message(function() return bbb.from_bytes("abc", -1, {1}) end))
    assert.are.equal("bbb.from_bytes: argument 2 (offset): expected an integer, got 0.5",
      message(function() return bbb.from_bytes("abc", 0.5, {1}) end))
    assert.truthy(message(function() return bbb.from_bytes("abc", 0, {1}, 0 / 0) end)
      :find("bbb.from_bytes: argument 4 (scale): expected a finite number, got ", 1, true))
    assert.are.equal("bbb.from_bytes: argument 4 (scale): 255 * 1e+300 overflows float32",
      message(function() return bbb.from_bytes("abc", 0, {1}, 1e300) end))
  end)
end)

-- A checkpoint file written by hand: header text, then float32 data.
local function write_st(path, header, floats)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack("<I8", #header), header)
  for _, v in ipairs(floats) do f:write(string.pack("<f", v)) end
  f:close()
end

describe("checkpoint reading", function()
  it("reads every tensor through the descriptor it opened, even when the file is replaced", function()
    local a, b = tmp .. "/a.st", tmp .. "/b.st"
    bbb.checkpoint.write(a, { w = bbb.tensor{1, 2} })
    bbb.checkpoint.write(b, { w = bbb.tensor{7, 8} })
    local reader <close> = core.st_open(a)
    local text, start = core.st_header(reader)
    assert(os.rename(b, a))   -- another run saves over it meanwhile
    local b0, e0 = text:match('"data_offsets":%[(%d+),(%d+)%]')
    local t = core.st_tensor(reader, "w", start, tonumber(b0), tonumber(e0), {2})
    assert.are.same({1, 2}, t:totable())
  end)
  it("refuses NaN and infinite values, naming the tensor", function()
    local p = tmp .. "/nan.st"
    write_st(p, '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', { 1, 0 / 0 })
    assert.truthy(message(function() return bbb.checkpoint.read(p) end)
      :find(("load: '%s': tensor w holds NaN at element 2 (of 2): bbb loads only finite values"):format(p), 1, true))
    write_st(p, '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', { -math.huge, 0 })
    assert.truthy(message(function() return bbb.checkpoint.read(p) end):find("tensor w holds -inf at element 1", 1, true))
  end)
  it("refuses strings where integers belong", function()
    local p = tmp .. "/str.st"
    write_st(p, '{"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}', { 1, 2 })
    assert.truthy(message(function() return bbb.checkpoint.read(p) end)
      :find("tensor w: shape[1] must be a non-negative integer, got 2", 1, true))
    write_st(p, '{"w":{"dtype":"F32","shape":[2],"data_offsets":["0",8]}}', { 1, 2 })
    assert.truthy(message(function() return bbb.checkpoint.read(p) end)
      :find("tensor w: data_offsets[1] must be a non-negative integer, got 0", 1, true))
  end)
  it("refuses a tensor named twice, and a key given twice inside an entry", function()
    local p = tmp .. "/dup.st"
    write_st(p, '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
      .. '"\\u0077":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', { 1, 2 })
    assert.are.equal(("load: '%s': the header names \"w\" twice"):format(p),
      message(function() return bbb.checkpoint.read(p) end))
    write_st(p, '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"data_offsets":[4,8]}}', { 1, 2 })
    assert.are.equal(("load: '%s': the header names \"data_offsets\" twice"):format(p),
      message(function() return bbb.checkpoint.read(p) end))
    -- a NUL where a value belongs once sent the key walk round forever
    write_st(p, '{"w":[\0]}', {})
    assert.truthy(message(function() return bbb.checkpoint.read(p) end):find(("load: '%s': header"):format(p), 1, true))
  end)
  it("bounds the model a configuration asks for by the weights in the file", function()
    local p = tmp .. "/big.st"
    local net = bbb.nn.Linear(2, 2)
    bbb.save(p, net)
    local f = assert(io.open(p, "rb"))
    local bytes = f:read("a")
    f:close()
    local n = string.unpack("<I8", bytes)
    local header = bytes:sub(9, 8 + n)
    local hostile = header:gsub('\\"n_in\\":2', '\\"n_in\\":4096'):gsub('\\"n_out\\":2', '\\"n_out\\":4096')
    assert.are_not.equal(header, hostile)
    f = assert(io.open(p, "wb"))
    f:write(string.pack("<I8", #hostile), hostile, bytes:sub(9 + n))
    f:close()
    local before = bbb.bytes_allocated()
    assert.truthy(message(function() return bbb.load(p) end)
      :find("the model configuration asks for more weights than the file's 6 model values", 1, true))
    assert.is_true(bbb.bytes_allocated() - before < 1 << 20)
  end)
end)

describe("inputs that are not regular files", function()
  local fifo = tmp .. "/fifo"
  os.execute("mkfifo " .. helpers.q(fifo))
  -- in a child with a deadline: the old readers blocked in open()
  local function child(code)
    return helpers.sh(("timeout 20 %q -e %s"):format(helpers.bbblua, helpers.q(code)))
  end
  it("a FIFO given to load, load_idx or the R reader is refused at once", function()
    local out, st = child(("local bbb = require 'bbb'; for _, f in ipairs{"
      .. "function() return bbb.load(%q) end, function() return bbb.core.load_idx(%q) end, "
      .. "function() return bbb.core.rdata_frame(%q) end} do print(select(2, pcall(f))) end")
      :format(fifo, fifo, fifo))
    assert.are.equal(0, st, out)
    helpers.has(out, ("load: '%s' is not a regular file (it is a fifo)"):format(fifo))
    helpers.has(out, ("idx: '%s' is not a regular file (it is a fifo)"):format(fifo))
    helpers.has(out, ("rdata: '%s' is not a regular file (it is a fifo)"):format(fifo))
  end)
  it("load_mnist with FIFOs for its files says so instead of blocking", function()
    local dir = tmp .. "/fifo-mnist"
    os.execute("mkdir -p " .. helpers.q(dir))
    for _, n in ipairs { "train-images-idx3-ubyte", "train-labels-idx1-ubyte" } do
      os.execute("mkfifo " .. helpers.q(dir .. "/" .. n))
    end
    local out, st = child(("local bbb = require 'bbb'; print(select(2, pcall(bbb.data.load_mnist, {root = %q})))"):format(dir))
    assert.are.equal(0, st, out)
    helpers.has(out, "is not a regular file (it is a fifo)")
  end)
end)

describe("load_mnist", function()
  local function idx(path, magic_dims, dims, bytes)
    local f = assert(io.open(path, "wb"))
    f:write(string.char(0, 0, 8, #dims))
    for _, d in ipairs(dims) do f:write(string.pack(">I4", d)) end
    f:write(bytes)
    f:close()
  end
  it("refuses a label outside 0..9 and a scale that overflows", function()
    local dir = tmp .. "/bad-mnist"
    os.execute("mkdir -p " .. helpers.q(dir))
    idx(dir .. "/train-images-idx3-ubyte", nil, { 2, 1, 1 }, "\1\2")
    idx(dir .. "/train-labels-idx1-ubyte", nil, { 2 }, "\3\200")
    assert.truthy(message(function() return bbb.data.load_mnist { root = dir } end)
      :find("train-labels-idx1-ubyte holds label 200 at item 2; MNIST labels are 0..9", 1, true))
    assert.truthy(message(function() return bbb.data.load_mnist { root = dir, scale = 1e300 } end)
      :find("load_mnist: scale must be a finite number with 255 * scale within float32", 1, true))
  end)
end)

describe("a memory limit", function()
  -- AddressSanitizer reserves terabytes of address space for its shadow
  -- memory, so under scripts/sanitize no ulimit -v leaves a program room
  if os.getenv("ASAN_OPTIONS") then
    pending("runs only without the sanitizers (scripts/sanitize sets ASAN_OPTIONS)")
    return
  end
  it("ends a GEMM that OpenBLAS could not make room for with an out-of-memory error", function()
    local out, st = helpers.sh(("ulimit -v 400000; timeout 60 %q -e %s"):format(helpers.bbblua, helpers.q(
      "local bbb = require 'bbb'; local a = bbb.ones(4000, 4000); print(bbb.matmul(a, a):sum():item())")))
    assert.are.equal(1, st, out)
    helpers.has(out, "bbb.matmul: out of memory")
  end)
  it("too small to start in stops at once with a clear message", function()
    local out, st = helpers.sh(("ulimit -v 100000; timeout 60 %q -e 'print(1)'"):format(helpers.bbblua))
    assert.are.equal(1, st, out)
    helpers.has(out, "out of memory: the address-space limit (ulimit -v) of 97 MiB is below")
  end)
end)

describe("optimizer and ELBO options", function()
  local w = bbb.zeros(2):requires_grad(true)
  it("SGD refuses momentum 1 and above", function()
    assert.truthy(message(function() return bbb.optim.SGD({ w }, { lr = 0.1, momentum = 1 }) end)
      :find("SGD: momentum must be a number in [0, 1), got 1", 1, true))
  end)
  it("an unknown option is an error naming it and the known ones", function()
    assert.truthy(message(function() return bbb.optim.SGD({ w }, { lr = 0.1, momentun = 0.9 }) end)
      :find("SGD: unknown option 'momentun' (known: clip_norm, lr, lr_scale, momentum, nesterov, weight_decay)", 1, true))
    assert.truthy(message(function() return bbb.optim.Adam({ w }, { lr = 0.1, beta1 = 0.5 }) end)
      :find("Adam: unknown option 'beta1' (known: betas, clip_norm, eps, lr, lr_scale, weight_decay)", 1, true))
  end)
  it("ELBO refuses an infinite or NaN kl_weight", function()
    for _, v in ipairs { math.huge, 0 / 0 } do
      assert.truthy(message(function() return bbb.elbo.ELBO { n_data = 10, batch_size = 5, kl_weight = v } end)
        :find('ELBO: kl_weight must be "uniform", "blundell" or a finite number >= 0, got', 1, true))
    end
  end)
end)

describe("input the scripts once took silently", function()
  it("transpose takes a 2-d tensor's own dims only", function()
    local t = bbb.randn { 2, 3 }
    assert.are.equal("bbb.transpose: argument 3 (dim): expected 1..2 or -2..-1 for a 2-d tensor (2, 3), got 5",
      message(function() return t:transpose(1, 5) end))
    assert.are.equal("bbb.transpose: argument 3 (dim2): must differ from dim1",
      message(function() return t:transpose(2, 2) end))
    assert.are.same({ 3, 2 }, t:transpose(2, 1):size())
  end)

  it("the scripts refuse bad settings before any work", function()
    local csv = tmp .. "/real.csv"
    local f = assert(io.open(csv, "w"))
    f:write("x,y\n")
    for i = 1, 60 do f:write(("%d,%.3f\n"):format(i, i * 0.37)) end
    f:close()
    local cases = {
      { "scripts/fit.lua --data " .. csv .. " --target y --task classification",
        "the target 'y' holds 60 distinct numbers: a quantity, not classes; use --task regression" },
      { "scripts/fit.lua --data " .. csv .. " --target y --val-fraction 0.9 --test-fraction 0.5",
        "--val-fraction 0.9 and --test-fraction 0.5 leave 3 of the 60 rows to train on (at least 15 needed)" },
      { "scripts/uci.lua --sets ''", "uci.lua: --sets: expected a comma-separated list, got ''" },
      { "scripts/prune.lua --save-fraction 1", "--save-fraction: number '1' is out of range: must be in [0, 1)" },
      { "scripts/figure2.lua foo", "figure2.lua: unexpected argument 'foo' (flags for mnist.lua go after --)" },
      { "scripts/prune.lua foo", "prune.lua: unexpected argument 'foo' (flags for mnist.lua go after --)" },
    }
    for _, c in ipairs(cases) do
      local status, out = helpers.run(c[1])
      assert.are.equal(2, status, c[1] .. "\n" .. out)
      helpers.has(out, c[2])
    end
  end)
end)

describe("one writer for every output", function()
  local function temporaries(dir)
    local p = assert(io.popen("ls -A " .. helpers.q(dir)))
    local n = 0
    for name in p:lines() do if name:find(".bbb-tmp.", 1, true) then n = n + 1 end end
    p:close()
    return n
  end

  it("past a file size limit, a save and a text write fail naming the file; the old file stays", function()
    local dir = tmp .. "/fsize"
    os.execute("mkdir -p " .. helpers.q(dir))
    helpers.write(dir .. "/old.txt", "the old text\n")
    bbb.save(dir .. "/old.ckpt", bbb.nn.Linear(3, 2))
    local before = helpers.read(dir .. "/old.ckpt")
    local code = ([[bbb.save(%q, bbb.nn.Linear(1000, 1000))]]):format(dir .. "/old.ckpt")
    local out, status = helpers.sh(("ulimit -f 50; %s -e %s"):format(helpers.q(helpers.bbblua), helpers.q(code)))
    assert.are.equal(1, status, out)
    helpers.has(out, "save: cannot write '" .. dir .. "/old.ckpt': File too large")
    assert.are.equal(before, helpers.read(dir .. "/old.ckpt"))
    code = ([[require("bbb.app.cli").write_file(%q, ("x"):rep(100000))]]):format(dir .. "/old.txt")
    out, status = helpers.sh(("ulimit -f 50; %s -e %s"):format(helpers.q(helpers.bbblua), helpers.q(code)))
    assert.are.equal(1, status, out)
    helpers.has(out, "cannot write '" .. dir .. "/old.txt': File too large")
    assert.are.equal("the old text\n", helpers.read(dir .. "/old.txt"))
    assert.are.equal(0, temporaries(dir))
  end)

  it("bbb.core.sys.write_file writes the pieces whole and refuses what is not a regular file", function()
    local path = tmp .. "/pieces.txt"
    assert.is_true(core.sys.write_file(path, { "a", "b", "c\n" }))
    assert.are.equal("abc\n", helpers.read(path))
    local ok, err = core.sys.write_file(tmp, "x")
    assert.is_nil(ok)
    assert.are.equal("write: '" .. tmp .. "' is a folder, not a regular file: refusing to replace it", err)
    assert.truthy(os.execute("mkfifo " .. helpers.q(tmp .. "/fifo_w")))
    ok, err = core.sys.write_file(tmp .. "/fifo_w", "x")
    assert.is_nil(ok)
    helpers.has(err, "is a FIFO, not a regular file")
  end)
end)

describe("NaN inputs", function()
  it("pass through ReLU as NaN, so a prediction from them is NaN and metrics refuse it", function()
    local y = bbb.tensor { 0 / 0, 2, -1, -0.0 }:relu():totable()
    assert.is_true(y[1] ~= y[1])
    assert.are.same({ 2, 0, 0 }, { y[2], y[3], y[4] })
    local net = bbb.nn.mlp({ 4, 5, 3 }, { generator = bbb.Generator(1) })
    local p = net:predict(bbb.tensor { { 0 / 0, 1, 2, 3 } }):totable()[1]
    for _, v in ipairs(p) do assert.is_true(v ~= v) end
    for _, m in ipairs { "accuracy", "nll" } do
      assert.are.equal(m .. ": row 1 holds NaN: the inputs or the model are not finite",
        message(function() return bbb.metrics[m](bbb.tensor { { 0 / 0, 0.5 } }, { 1 }) end))
    end
  end)
end)

describe("plots", function()
  it("are drawn into a temporary and renamed: a failed plot keeps the old figure and leaves nothing", function()
    local dir = tmp .. "/plots"
    os.execute("mkdir -p " .. helpers.q(dir))
    local code = ([[
      local xs = {}
      for i = 1, %d do xs[i] = math.sin(i / 7) * i end
      require("bbb.app.plot").lines{ file = %q, size = { 1600, 1200 }, series = { { y = xs, title = "noise" } } }]])
    local out, status = helpers.sh(("%s -e %s"):format(helpers.q(helpers.bbblua), helpers.q(code:format(20, dir .. "/f.png"))))
    assert.are.equal(0, status, out)
    local before = helpers.read(dir .. "/f.png")
    out, status = helpers.sh(("ulimit -f 16; %s -e %s"):format(helpers.q(helpers.bbblua),
      helpers.q(code:format(300, dir .. "/f.png"))))
    assert.are_not.equal(0, status, out)
    helpers.has(out, dir .. "/f.png")
    assert.are.equal(before, helpers.read(dir .. "/f.png"))
    local p = assert(io.popen("ls -A " .. helpers.q(dir)))
    assert.are.equal("f.png", p:read("a"):gsub("%s+$", ""))
    p:close()
  end)
end)

describe("output paths", function()
  it("are refused before any work when they name an input, another output, a FIFO or a link", function()
    local dir = tmp .. "/outs"
    os.execute("mkdir -p " .. helpers.q(dir))
    helpers.write(dir .. "/rows.csv", "x,y\n1,2\n3,4\n5,6\n")
    os.execute(("mkfifo %s && ln -s %s %s"):format(helpers.q(dir .. "/pipe.ckpt"), helpers.q(dir .. "/rows.csv"),
      helpers.q(dir .. "/link.ckpt")))
    local q = helpers.q
    local cases = {
      { ("scripts/fit.lua --data %s --target y --save %s"):format(q(dir .. "/rows.csv"), q(dir .. "/./rows.csv")),
        "--save and --data name the same file" },
      { ("scripts/predict.lua --model %s --data %s --out %s"):format(q(dir .. "/m.ckpt"), q(dir .. "/rows.csv"),
        q(dir .. "/../outs/rows.csv")), "--out and --data name the same file" },
      { ("scripts/mnist.lua --save %s --checkpoint %s"):format(q(dir .. "/x.ckpt"), q(dir .. "//x.ckpt")),
        "--checkpoint and --save name the same file" },
      { ("scripts/mnist.lua --save %s"):format(q(dir .. "/pipe.ckpt")), "is a FIFO, not a regular file" },
      { ("scripts/mnist.lua --save %s"):format(q(dir .. "/link.ckpt")), "is a symbolic link: name the file it points to" },
    }
    for _, c in ipairs(cases) do
      local status, out = helpers.run(c[1])
      assert.are.equal(2, status, c[1] .. "\n" .. out)
      helpers.has(out, c[2])
    end
    assert.are.equal("x,y\n1,2\n3,4\n5,6\n", helpers.read(dir .. "/rows.csv"))
  end)
end)

describe("signals", function()
  it("fit.lua ends on SIGTERM with 128 + 15 and says nothing was saved", function()
    local cmd = ("%s scripts/fit.lua --data data/r/MASS:Boston --target medv --epochs 100000 --patience 100000 "
      .. "--every 50 --save %s > %s 2>&1 & pid=$!; sleep 2; kill -TERM $pid; wait $pid; echo rc=$?")
      :format(helpers.q(helpers.bbblua), helpers.q(tmp .. "/sig.ckpt"), helpers.q(tmp .. "/sig.out"))
    local out = helpers.sh("cd " .. helpers.q(helpers.root) .. " && " .. cmd)
    assert.are.equal("143", out:match("rc=(%d+)"), out)
    helpers.has(helpers.read(tmp .. "/sig.out"), "fit.lua: interrupted in epoch ")
    assert.is_nil(helpers.read(tmp .. "/sig.ckpt"))
  end)
end)

describe("input paths", function()
  it("that are a FIFO or a device are refused without being opened", function()
    local fifo = tmp .. "/in_fifo"
    assert.truthy(os.execute("mkfifo " .. helpers.q(fifo)))
    local cases = {
      { "scripts/fit.lua --data /dev/zero --target y", "fit.lua: /dev/zero is a device, not a file" },
      { "scripts/fit.lua --data " .. fifo .. " --target y", "is a FIFO, not a file" },
      { "scripts/figure2.lua --from " .. fifo, "--from: " .. fifo .. " is a fifo, not a file" },
      { "scripts/mnist.lua --prior " .. fifo:gsub("in_fifo", "p.lua"), "does not exist" },
    }
    os.execute(("ln -s %s %s"):format(helpers.q(fifo), helpers.q(tmp .. "/q.lua")))
    cases[#cases + 1] = { "scripts/mnist.lua --prior " .. tmp .. "/q.lua", "is a fifo, not a file" }
    for _, c in ipairs(cases) do
      local out, status = helpers.sh(("cd %s && timeout 20 %s %s"):format(helpers.q(helpers.root),
        helpers.q(helpers.bbblua), c[1]))
      assert.are.equal(2, status, c[1] .. "\n" .. out)
      helpers.has(out, c[2])
    end
  end)
end)

describe("signals to a program with workers", function()
  it("bandit.lua on SIGTERM stops its workers with it and exits 128 + 15", function()
    local out_dir = tmp .. "/bsig"
    local cmd = ("%s scripts/bandit.lua --agents eps0,eps1 --steps 3000 --jobs 2 --no-plot --out %s > %s 2>&1 & "
      .. "pid=$!; sleep 3; kill -TERM $pid; wait $pid; echo rc=$?; sleep 1; "
      .. "echo left=$(env -u LD_PRELOAD ps -eo args | grep -F -- %s | grep -v grep | wc -l)")   -- ps under a sanitizer's preload can hang
      :format(helpers.q(helpers.bbblua), helpers.q(out_dir), helpers.q(tmp .. "/bsig.out"), helpers.q(out_dir))
    local out = helpers.sh("cd " .. helpers.q(helpers.root) .. " && " .. cmd)
    assert.are.equal("143", out:match("rc=(%d+)"), out)
    assert.are.equal("0", out:match("left=(%d+)"), out)
    helpers.has(helpers.read(tmp .. "/bsig.out"), "bandit.lua: interrupted; 2 running worker(s) stopped with it")
  end)
end)

describe("figure2.lua", function()
  it("fails, with no figure, when a net's mnist run fails", function()
    local dir = tmp .. "/f2fail"
    local status, out = helpers.run(("scripts/figure2.lua --units 8 --methods sgd --epochs 1 --limit 300 --val 100 "
      .. "--test-limit 100 --threads 1 --dir %s -- --activation nope"):format(helpers.q(dir)))
    assert.are.equal(2, status, out)
    helpers.has(out, "mnist.lua: --activation: expected one of relu, sigmoid, tanh, got 'nope'")
    assert.is_nil(helpers.read(dir .. "/figure2-8.png"))
  end)
end)

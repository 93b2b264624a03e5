-- End-to-end smoke runs of every script and example on tiny settings,
-- through the real interpreter.
local bbb = require "bbb"
local helpers = require "helpers"
local run, ok = helpers.run, helpers.ok

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

-- the JSON a run wrote (--summary, --json)
local function decoded(path)
  local f = assert(io.open(path))
  local t = require("cjson").decode(f:read("a"))
  f:close()
  return t
end

-- the layers of the model saved at path, containers left out, in order
local function layers_of(path)
  local list = {}
  bbb.load(path):apply(function(m) if m.__name ~= "Sequential" then list[#list + 1] = m end end)
  return list
end

-- the first layer of kind name in list, with its position
local function first(list, name)
  for i, m in ipairs(list) do if m.__name == name then return m, i end end
end

describe("scripts", function()
  it("every script answers --help", function()
    for _, s in ipairs{ "mnist", "regression", "plot_run", "bench_core", "bench_bbb" } do
      ok("scripts/" .. s .. ".lua --help", "Usage:")
    end
  end)
  it("mnist.lua trains and reports both test accuracies", function()
    local out = ok("scripts/mnist.lua --epochs 2 --limit 3000 --test-limit 300 --hidden 32 --lr 0.005 --test-samples 3 --summary "
      .. tmp .. "/log.json")
    local log = decoded(tmp .. "/log.json")
    assert.are.equal(2, #log.epochs)
    for e, rec in ipairs(log.epochs) do assert.are.equal(e, rec.epoch, out) end
    assert.are.equal(3, log.args.test_samples)
    assert.truthy(log.test_acc_mean > 0.5 and log.test_acc_mean <= 1, out)
    assert.truthy(log.test_acc_mc > 0.5 and log.test_acc_mc <= 1, out)   -- chance is 10%
  end)
  it("mnist.lua --no-test reads no test image and reports on the validation images", function()
    local out = ok("scripts/mnist.lua --no-test --val 300 --epochs 1 --limit 1500 --hidden 16 --lr 0.005 "
      .. "--test-samples 2 --summary " .. tmp .. "/notest.json")
    local s = decoded(tmp .. "/notest.json")
    assert.are.equal(0, s.images.test, out)
    assert.are.equal(300, s.images.val, out)
    assert.is_nil(s.test_acc_mean, out)
    assert.is_nil(s.epochs[1].test_acc, out)
    assert.truthy(s.val_acc_mc > 0.3 and s.val_acc_mc <= 1, out)   -- chance is 10%
    assert.are.equal(s.epochs[1].val_acc, s.val_acc_mean, out)
  end)
  it("mnist.lua --no-test is refused without --val, and with a test flag, before any work", function()
    local status, err = run("scripts/mnist.lua --no-test --epochs 1")
    assert.are.equal(2, status, err)
    assert.truthy(err:find("--no-test needs --val", 1, true), err)
    status, err = run("scripts/mnist.lua --no-test --val 100 --test-limit 10 --epochs 1")
    assert.are.equal(2, status, err)
    -- grid.lua checks its runs' flags before the first: --no-test refuses a test flag after --
    status, err = run("scripts/grid.lua --no-test --val 100 --limit 300 --epochs 1 --results " .. tmp
      .. "/nt.jsonl -- --test-limit 10")
    assert.are.equal(2, status, err)
    assert.is_nil(io.open(tmp .. "/nt.jsonl"), err)
  end)
  it("mnist.lua --preset s4 plots seed 004's four curves and reports its table beside ours", function()
    local png, sum = tmp .. "/s4-curves.png", tmp .. "/s4.json"
    ok("scripts/mnist.lua --preset s4 --epochs 1 --batch 12 --limit 600 --test-limit 200 --hidden 16 "
      .. "--test-samples 2 --curves " .. png .. " --summary " .. sum)
    local s = decoded(sum)
    assert.are.equal("s4", s.args.preset)
    assert.is_near(0.12, s.args.kl_weight, 1e-12)
    -- beta = kl weight / batch; the table: train and test, ours and the seed's
    local t = s.seed
    assert.is_near(0.01, t.beta, 1e-12)
    assert.are.equal(600, t.train_n)
    assert.are.equal(2840.97729, t.seed_kl)
    assert.truthy(t.kl > 0)
    local want = { train = { accuracy = 0.987, elbo = -2.88892, log_likelihood = -0.04794 },
                   test = { accuracy = 0.979, elbo = -2.91372, log_likelihood = -0.07274 } }
    assert.are.equal(2, #t.rows)
    for i, set in ipairs { "train", "test" } do
      local row = t.rows[i]
      assert.are.equal(set, row.set)
      assert.are.same(want[set], row.seed)
      assert.truthy(row.accuracy >= 0 and row.accuracy <= 1 and row.log_likelihood < 0)
      assert.is_near(row.log_likelihood - t.beta * t.kl, row.elbo, 1e-9 * math.abs(row.elbo))
    end
    assert.are.equal(s.test_acc_mean, t.rows[2].accuracy)
    local f = assert(io.open(png, "rb"))
    assert.are.equal("\137PNG", f:read(4))
    f:close()
  end)
  it("plot_run.lua draws the curves of a run and the posterior of its checkpoint", function()
    ok("scripts/mnist.lua --epochs 2 --limit 600 --test-limit 200 --hidden 16 --val 100 --test-samples 2 --log "
      .. tmp .. "/pr.jsonl --save " .. tmp .. "/pr.st")
    local n = 0
    for _ in io.lines(tmp .. "/pr.jsonl") do n = n + 1 end
    assert.are.equal(2, n)   -- one record per epoch
    local log = io.open(tmp .. "/pr.jsonl", "a")
    log:write('{"epoch": 3, "broken\n')   -- a run killed while writing
    log:close()
    local out = ok("scripts/plot_run.lua " .. tmp .. "/pr.jsonl " .. tmp .. "/pr.st --out " .. tmp .. "/pr/run",
      "skipping line 3")
    for _, k in ipairs { "loss", "accuracy", "mu", "sigma", "snr" } do
      local f = assert(io.open(tmp .. "/pr/run-" .. k .. ".png", "rb"), out)
      assert.are.equal("\137PNG", f:read(4))
      f:close()
    end
    local status, err = run("scripts/plot_run.lua " .. tmp .. "/missing.jsonl")
    assert.are_not.equal(0, status)
    assert.truthy(err:find("cannot open", 1, true), err)
  end)
  -- run `mnist.lua flags` -> its summary, and the layers of the model it saved
  local function trained(name, flags)
    local sum, model = ("%s/%s.json"):format(tmp, name), ("%s/%s.st"):format(tmp, name)
    local out = ok(("scripts/mnist.lua %s --summary %s --save %s"):format(flags, sum, model))
    local s = decoded(sum)
    assert.are.equal(1, #s.epochs, out)
    for _, k in ipairs { "test_acc_mean", "test_acc_mc" } do
      assert.truthy(s[k] >= 0 and s[k] <= 1, k .. "\n" .. out)
    end
    return s, layers_of(model)
  end

  it("mnist.lua runs the other estimators, priors and Fashion-MNIST", function()
    local small = " --epochs 1 --limit 256 --test-limit 100 --hidden 16 --test-samples 2"
    local _, l = trained("local", "--estimator local --prior gaussian --optim sgd --lr 0.05" .. small)
    assert.are.equal("local", l[1].estimator)
    assert.are.equal("gaussian", l[1].prior.kind)
    _, l = trained("flipout", "--estimator flipout --prior laplace --kl-weight blundell --samples 2" .. small)
    assert.are.equal("flipout", l[1].estimator)
    assert.are.equal("laplace", l[1].prior.kind)
    local s = trained("fashion", "--dataset fashion --optim rmsprop" .. small)
    assert.are.equal("fashion", s.args.dataset)
    assert.are.same({ train = 256, test = 100 }, s.images)
  end)
  it("mnist.lua trains the LeNet-style CNNs: Bayesian, plain and with dropout", function()
    local small = " --epochs 1 --limit 128 --test-limit 50 --test-samples 2 --threads 1"
    local _, l = trained("cnn", "--model cnn --estimator local" .. small)
    local conv = first(l, "BayesConv2d")
    assert.are.same({ 1, 16, { 5, 5 }, { 2, 2 } }, { conv.in_channels, conv.out_channels, conv.kernel, conv.padding })
    assert.are.equal("local", conv.estimator)
    _, l = trained("cnn_plain", "--model cnn-plain" .. small)
    assert.is_nil(first(l, "BayesConv2d"))
    local _, i = first(l, "Conv2d")
    local second = first({ table.unpack(l, i + 1) }, "Conv2d")
    assert.are.same({ 16, 32, { 5, 5 }, { 0, 0 } }, { second.in_channels, second.out_channels, second.kernel, second.padding })
    _, l = trained("cnn_small", "--model cnn --channels 4,6 --hidden 16" .. small)
    local _, j = first(l, "BayesConv2d")
    second = first({ table.unpack(l, j + 1) }, "BayesConv2d")
    assert.are.same({ 4, 6, { 5, 5 } }, { second.in_channels, second.out_channels, second.kernel })
    local dense = first(l, "BayesLinear")
    assert.are.same({ 150, 16 }, { dense.n_in, dense.n_out })
    local s
    s, l = trained("cnn_dropout", "--model cnn-dropout --dataset fashion" .. small)
    assert.are.equal("fashion", s.args.dataset)
    assert.are.equal(0.5, assert(first(l, "Dropout"), "no dropout layer").p)
  end)
  it("mnist.lua refuses bad options with a message", function()
    local status, out = run("scripts/mnist.lua --hidden 0")
    assert.are_not.equal(0, status)
    assert.truthy(out:find("--hidden: integer '0' is out of range: must be in [1, 65536]", 1, true), out)
    status, out = run("scripts/mnist.lua --epochs 1 --limit 64 --pi 1.5")
    assert.are_not.equal(0, status)
    assert.truthy(out:find("--pi: number '1.5' is out of range: must be in (0, 1)", 1, true), out)
  end)
  it("the benchmarks run and print their ratios", function()
    ok("scripts/bench_core.lua --reps 3", "matmul", "softplus", "vector math", "sigmoid", "OpenBLAS kernels")
    local path = os.tmpname() .. ".json"
    local out = ok("scripts/bench_bbb.lua --steps 2 --infer-samples 1 --infer-images 1000 --json " .. path)
    local f = assert(io.open(path))
    local b = require("bbb.json").decode(f:read("a"))
    f:close()
    os.remove(path)
    -- the PyTorch rows when python3 (PATH or /usr/bin) has torch, one line saying why not otherwise
    local torch = helpers.sh("(python3 -c 'import torch' || /usr/bin/python3 -c 'import torch') 2>/dev/null && echo yes") == "yes\n"
    assert.truthy(out:find(torch and "torch BBB/bbb" or "PyTorch comparison skipped", 1, true), out)
    -- each network: its step, its GEMMs, inference; the floor of its own passes at least the GEMMs
    for _, name in ipairs { "784-1200-1200-10", "784-400-400-10" } do
      local n = b.networks[name]
      assert.is_true(n.step_ms > 0 and n.gemm_ms > 0 and n.infer_s > 0 and n.infer_gemm_s > 0, name)
      local p = n.passes
      assert.is_true(p.draws_ms > 0 and p.sample_ms > 0 and p.adam_ms > 0, name)
      assert.is_near(n.gemm_ms + p.draws_ms + p.sample_ms + p.adam_ms, p.floor_ms, 1e-9)
      assert.is_true(n.plain.step_ms > 0 and n.dropout.step_ms > 0, name)
    end
    -- the other estimators on the big net, each with its own floor at least its GEMMs
    for _, est in ipairs { "local", "flipout" } do
      local e = b.networks["784-1200-1200-10"].estimators[est]
      assert.is_true(e.step_ms > 0 and e.floor_ms >= e.gemm_ms, est)
    end
    for _, est in ipairs { "weight", "local", "flipout" } do assert.is_true(b.lenet[est].step_ms > 0, est) end
    if torch then assert.truthy(out:find("784-1200-1200-10: 10x needs a step of at most", 1, true), out) end
  end)
end)

describe("the shell scripts", function()
  it("answer --help at once, without installing, building or fuzzing anything", function()
    for _, s in ipairs { "bootstrap", "sanitize", "fuzz" } do
      -- without a sanitizer's preloaded runtime, which reports sed's and bash's own leaks
      local out, status = helpers.sh(("cd %s && env -u LD_PRELOAD timeout 10 scripts/%s --help"):format(helpers.q(helpers.root), s))
      assert.are.equal(0, status, out)
      assert.truthy(out:find("scripts/" .. s, 1, true), out)
      assert.falsy(out:find("Building", 1, true) or out:find("installing", 1, true), out)
    end
  end)
end)

describe("examples", function()
  it("single_weight.lua prints the known ELBO terms", function()
    ok("examples/single_weight.lua", "w        4.556052", "loss     82.7472", "dL/dmu   53.4528")
  end)
  it("custom_prior.lua trains with Lua priors", function()
    ok("examples/custom_prior.lua", "student_t w = 2.0", "horseshoe w = 2.0")
  end)
  it("training_loop.lua fits the curve by hand and is less sure outside the data", function()
    local out = ok("examples/training_loop.lua", "step 1500", "x =  3.0")
    local inside = tonumber(out:match("x =  0%.0  prediction%s+%S+ %+%- (%S+)"))
    local outside = tonumber(out:match("x =  3%.0  prediction%s+%S+ %+%- (%S+)"))
    assert.truthy(inside and outside and outside > inside, out)
  end)
  it("predict_saved.lua loads the saved model and finds the far point the most uncertain in its weights", function()
    local out = ok("examples/predict_saved.lua", "trained 150 epochs")
    local mi = {}
    for v in out:gmatch("mutual information (%S+) nats") do mi[#mi + 1] = tonumber(v) end
    assert.are.equal(3, #mi, out)
    assert.truthy(mi[3] > mi[1], out)
  end)
  it("bayesian_cnn.lua turns a plain CNN Bayesian and reports accuracy and AUROC before and after", function()
    local out = ok("examples/bayesian_cnn.lua - 1 1000", "plain CNN", "Bayesian twin, before training",
      "Bayesian twin, 1 epoch of BBB")
    local acc = {}
    for v in out:gmatch("accuracy (%S+)%%") do acc[#acc + 1] = tonumber(v) end
    assert.are.equal(3, #acc, out)
    for _, a in ipairs(acc) do assert.truthy(a > 50, out) end   -- trained, not chance
    -- the twin starts where the plain network is: sigma is small next to mu
    assert.truthy(math.abs(acc[2] - acc[1]) < 5, out)
    local mi = out:match("before training.-by mutual information (%S+)")
    assert.truthy(tonumber(mi), out)
  end)
  -- An untrained model saved by a script of one line (code: what follows
  -- bbb's require, saving to arg[1]); returns its path.
  local function untrained(name, code)
    local model, maker = tmp .. "/" .. name .. ".st", tmp .. "/make_" .. name .. ".lua"
    local f = assert(io.open(maker, "w"))
    f:write('local bbb = require "bbb"; ', code)
    f:close()
    ok(maker .. " " .. model)
    return model
  end

  it("ood_pixels.lua scores a saved MLP against Fashion-MNIST as it is, without MNIST's unlit pixels, dimmed", function()
    local model = untrained("mlp_ood", "bbb.manual_seed(5); bbb.save(arg[1], bbb.nn.bayes_mlp{ 784, 12, 10 })")
    local out = ok("examples/ood_pixels.lua " .. model .. " 3 300", "pixels never lit by the 60000 MNIST training images: ")
    -- MNIST's 28 x 28 images leave some border pixels dark in every training image
    local dark = tonumber(out:match("training images: (%d+) of 784"))
    assert.truthy(dark > 0 and dark < 784, out)
    local n = 0
    for a in out:gmatch("AUROC by MI, [^\n]-(%d%.%d+)\n") do
      n = n + 1
      assert.truthy(tonumber(a) >= 0 and tonumber(a) <= 1, out)
    end
    assert.are.equal(3, n, out)
  end)

  it("cnn_eval.lua scores a saved CNN by both predictions and by the ELBO", function()
    local model = untrained("lenet", "bbb.manual_seed(3); bbb.save(arg[1], bbb.nn.lenet{ channels = { 4, 8 }, hidden = { 16 } })")
    local out = ok("examples/cnn_eval.lua " .. model .. " mnist", "acc_mc")
    local r = require("cjson").decode(out:match("{.*}"))
    for _, k in ipairs { "acc_mc", "acc_mean" } do assert.truthy(r[k] >= 0 and r[k] <= 1, out) end
    for _, k in ipairs { "nll_mc", "nll_mean", "train_nll_per_example", "complexity_per_example" } do
      assert.truthy(r[k] > 0, out)
    end
    -- an untrained net: near chance, and the ELBO is the sum of its two terms
    assert.truthy(r.acc_mean < 0.5, out)
    assert.truthy(math.abs(r.elbo_per_example + r.train_nll_per_example + r.complexity_per_example) < 1e-9, out)
  end)
  it("bandit_by_hand.lua drives two agents step by step", function()
    ok("examples/bandit_by_hand.lua", "Bayes by Backprop  after 300 mushrooms", "greedy             after 300 mushrooms")
  end)
end)

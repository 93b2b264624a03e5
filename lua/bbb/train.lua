--- bbb.train: the one training loop. Scripts call it with their model, data
-- and callbacks instead of writing their own:
--
--   local result = bbb.train.fit{
--     model = net, elbo = elbo, optimizer = opt, schedule = sched,
--     data = train_set, val = val_set, test = test_set, batch_size = 128,
--     epochs = 30, generator = gen, log = "run.jsonl", checkpoint = "run.ckpt",
--   }
--
-- Per epoch it prints one line (or feeds a progress bar with an ETA for the
-- whole run on a terminal), appends a JSON line to the log and flushes it,
-- and writes a checkpoint every `checkpoint_every` epochs. The first Ctrl-C
-- finishes the current step, writes a checkpoint and returns with status
-- "interrupted"; a second one stops the process at once. A run resumed from
-- a checkpoint ends with the same weights and numbers, bit for bit, as one
-- that was never stopped (same seed and thread count).
local bbb = require "bbb"
local core = require "bbb.core"
local json = require "bbb.json"
local checkpoint = require "bbb.checkpoint"

local train = {}

local clock = core.clock or os.clock

local function fail(msg, ...) error(msg:format(...), 0) end

--- accuracy(model, ds [, {samples = n, batch_size = 1000}]) -> fraction right,
-- with posterior means by default (samples = n: an MC ensemble).
-- @usage
--   local ds = { x = bbb.randn(20, 4), y = bbb.ones(20), n = 20 }
--   local acc = bbb.train.accuracy(bbb.nn.bayes_mlp({ 4, 8, 3 }), ds, { samples = 5 })
--   assert(acc >= 0 and acc <= 1)
function train.accuracy(model, ds, opts)
  opts = opts or {}
  local correct = 0
  local pred = opts.samples and { samples = opts.samples } or { mode = "mean" }
  for _, xb, yb in bbb.data.batches(ds, opts.batch_size or 1000) do
    local p = model:predict(xb, pred)
    correct = correct + bbb.metrics.accuracy(p, yb) * xb:size(1)
  end
  return correct / ds.n
end

--- split_validation(ds, n) -> train part, validation part: the last n
-- examples are held out (never shuffled into training).
-- @usage
--   local ds = { x = bbb.randn(20, 4), y = bbb.ones(20), n = 20 }
--   local tr, val = bbb.train.split_validation(ds, 5)
--   assert(tr.n == 15 and val.n == 5)
function train.split_validation(ds, n)
  if math.type(n) ~= "integer" or n < 1 or n >= ds.n then
    error(("validation size must be an integer in 1..%d (the training set has %d), got %s")
      :format(ds.n - 1, ds.n, tostring(n)), 2)
  end
  return bbb.data.split(ds, ds.n - n)
end

-- Opens the run log for appending, locked (flock) so that two runs never
-- write one log. A resumed run appends too (the file may hold other runs'
-- records): the epochs after its checkpoint that the stopped run logged
-- come again, and a reader takes the last record of each epoch. Returns
-- the file and the lock.
local function open_log(path)
  if not path then return nil end
  local lock, lerr = core.sys.lock(path)
  if not lock then fail("train: log %s", lerr) end
  local f, err = io.open(path, "a")
  if not f then fail("train: cannot write the log %s: %s", path, err) end
  return f, lock
end

-- Locks the checkpoint against a second run writing it. The checkpoint is
-- replaced by a rename at each save, so the lock sits on a file of its own
-- beside it (".NAME.lock"), removed when the run ends.
local function lock_checkpoint(path)
  if not path then return nil end
  local dir, base = path:match("^(.*/)([^/]*)$")
  local lock_path = (dir or "") .. "." .. (base or path) .. ".lock"
  local lock, err = core.sys.lock(lock_path)
  if not lock then fail("train: checkpoint %s: another run is writing it (%s)", path, err) end
  return { lock = lock, path = lock_path }
end

local function unlock_checkpoint(l)
  if not l then return end
  os.remove(l.path)
  l.lock:release()
end

local function write_log(f, path, rec)
  if not f then return end
  local ok, err = f:write(json.encode(rec), "\n")
  if ok then ok, err = f:flush() end
  if not ok then fail("train: cannot write the log %s: %s", path, tostring(err)) end
end

local function default_line(rec)
  local parts = { ("epoch %2d"):format(rec.epoch) }
  if rec.elbo_per_example then
    parts[#parts + 1] = ("-elbo/ex %.4f"):format(rec.elbo_per_example)
  end
  if rec.complexity_total and rec.complexity_total ~= 0 then
    parts[#parts + 1] = ("complexity %.1f (%.4f/ex)"):format(rec.complexity_total, rec.complexity_per_example)
  end
  parts[#parts + 1] = ("nll/ex %.4f"):format(rec.nll_per_example)
  if rec.train_acc then parts[#parts + 1] = ("train %.2f%%"):format(100 * rec.train_acc) end
  if rec.val_acc then parts[#parts + 1] = ("val %.2f%%"):format(100 * rec.val_acc) end
  if rec.test_acc then parts[#parts + 1] = ("test %.2f%%"):format(100 * rec.test_acc) end
  parts[#parts + 1] = ("lr %.3g"):format(rec.lr)
  parts[#parts + 1] = ("%.1f s"):format(rec.seconds)
  return table.concat(parts, "  ")
end

local REQUIRED = { "model", "optimizer", "data", "batch_size", "epochs" }

local function check_opts(o)
  if type(o) ~= "table" then fail("train.fit: expects a table of options, got %s", type(o)) end
  for _, k in ipairs(REQUIRED) do
    if o[k] == nil then fail("train.fit: option %s is required", k) end
  end
  if math.type(o.epochs) ~= "integer" or o.epochs < 0 then
    fail("train.fit: epochs must be a non-negative integer, got %s", tostring(o.epochs))
  end
  if math.type(o.batch_size) ~= "integer" or o.batch_size < 1 then
    fail("train.fit: batch_size must be a positive integer, got %s", tostring(o.batch_size))
  end
  local every = o.checkpoint_every or 1
  if math.type(every) ~= "integer" or every < 1 then
    fail("train.fit: checkpoint_every must be a positive integer, got %s", tostring(every))
  end
end

-- Data-parallel training (opts.dist = bbb.dist under mpirun): every rank
-- draws the same order, takes a disjoint shard of each global batch, and the
-- gradients are summed over ranks in one flat all-reduce, so every rank
-- applies the same step. Rank 0 alone prints, logs and writes checkpoints.
local function data_parallel(dist)
  if not dist or dist.size() == 1 then
    return { n = 1, rank = 0, lead = true }
  end
  local n, rank = dist.size(), dist.rank()
  local par = { n = n, rank = rank, lead = rank == 0, dist = dist }
  -- rows of the global batch this rank takes (nil when it gets none)
  function par.shard(xb, yb)
    local B = xb:size(1)
    local per = (B + n - 1) // n
    local first = rank * per
    local len = math.min(per, B - first)
    if len <= 0 then return nil end
    return xb:narrow(1, first + 1, len), yb and yb:narrow(1, first + 1, len), B
  end
  -- sums every gradient over ranks; the pending Ctrl-C count rides along
  function par.reduce_grads(opt, pending)
    local grads = {}
    for _, p in ipairs(opt.params) do
      if not p.t.grad then p.t:set_grad(bbb.zeros_like(p.t)) end
      grads[#grads + 1] = p.t.grad
    end
    return dist.allreduce_flat(grads, pending)
  end
  function par.reduce_sums(sums)
    local keys = { "loss", "nll", "complexity", "correct", "n" }
    local v = {}
    for i, k in ipairs(keys) do v[i] = sums[k] end
    local r = dist.allreduce_numbers(v)
    local out = { seconds = sums.seconds }
    for i, k in ipairs(keys) do out[k] = r[i] end
    return out
  end
  -- every rank's generator states, for a checkpoint that resumes each rank
  function par.gather_generators(gens)
    local out, names = {}, {}
    for name in pairs(gens) do names[#names + 1] = name end
    table.sort(names)   -- collectives in the same order on every rank
    for _, name in ipairs(names) do
      local g = gens[name]
      local seed, counter = g:state()
      local seeds, counters = dist.allgather_number(seed), dist.allgather_number(counter)
      out[name] = {}
      for r = 1, n do
        out[name][r] = { seed = ("%d"):format(math.tointeger(seeds[r])),
                         counter = ("%d"):format(math.tointeger(counters[r])) }
      end
    end
    return out
  end
  function par.broadcast_parameters(model)
    for _, p in ipairs(model:parameters()) do dist.broadcast(p, 0) end
  end
  return par
end

-- Everything a checkpoint of this run holds.
local function snapshot(o, gens, pos, history)
  return {
    model = o.model, optimizer = o.optimizer, schedule = o.schedule, elbo = o.elbo,
    generators = gens, args = o.args,
    state = {
      epoch = pos.epoch, batch = pos.batch, sums = pos.sums, history = history,
      wall = pos.wall, kind = "train",
    },
    tensors = pos.batch > 0 and { order = pos.order } or nil,
  }
end

-- Collective under data parallelism (every rank gathers its generators),
-- but only rank 0 writes.
local function save(o, par, path, gens, pos, history)
  local t0 = clock()
  local snap = snapshot(o, gens, pos, history)
  if par.n > 1 then
    snap.state.rank_generators = par.gather_generators(gens)
    snap.state.ranks = par.n
    snap.state.sums = pos.sums and par.reduce_sums(pos.sums)
  end
  if par.lead then checkpoint.save(path, snap) end
  return clock() - t0
end

--- fit(opts) -> {history = {epoch records}, status = "done" | "interrupted" | "stopped",
--               checkpoint = path written last (or nil), epoch, batch,
--               signal = the signal that interrupted it (2, 15 or 1)}
-- opts:
--   model, optimizer, data (a bbb.data set), batch_size, epochs: required
--   elbo        the loss (a bbb.elbo.ELBO; without a Bayesian layer it is
--               the plain NLL); default: a categorical ELBO over data
--   schedule    a bbb.optim.schedule, stepped once per epoch
--   val, test   data sets evaluated after every epoch (accuracy)
--   evaluate    function(model, ds, name) -> {figures}: replaces accuracy
--   generator   shuffles the training data (and is saved in checkpoints)
--   generators  {name = Generator} more generators to save and restore
--   log         JSONL path: one record per epoch, flushed
--   checkpoint  path written every checkpoint_every epochs, at the end, and
--               on Ctrl-C, SIGTERM or SIGHUP; interrupt_checkpoint: the path
--               (or a function giving it) for those when no checkpoint is set
--   resume      the info from bbb.load of a checkpoint of this run
--   args        a table saved with the checkpoints (the script's flags)
--   on_epoch    function(rec, ctx): adds figures to the epoch record;
--               returning "stop" ends the run after this epoch (status
--               "stopped": early stopping)
--   on_step     function(i, terms, ctx)
--   augment     function(xb, epoch, i) -> the minibatch to train on (e.g. the
--               images moved by bbb.data.shift); its randomness must come
--               from (epoch, i) alone, so a resumed run draws the same
--   print       function(rec) -> line (default: every figure); quiet = true
--   progress    "bar" | "lines" | "off" (default: bar on a terminal)
--   dist        bbb.dist under mpirun: data-parallel training (see above)
-- @usage
--   local g = bbb.Generator(1)
--   local labels = {}
--   for i = 1, 256 do labels[i] = i % 3 + 1 end
--   local ds = { x = bbb.randn({ 256, 4 }, 0, 1, g), y = bbb.tensor(labels), n = 256 }
--   local net = bbb.nn.bayes_mlp({ 4, 16, 3 }, { generator = g })
--   local res = bbb.train.fit{ model = net, optimizer = bbb.optim.Adam(net, { lr = 1e-2 }), data = ds,
--     batch_size = 64, epochs = 2, generator = g, quiet = true, progress = "off" }
--   assert(res.status == "done" and #res.history == 2)
function train.fit(o)
  local ok, res = pcall(function()
    check_opts(o)
    return train.run(o)
  end)
  if not ok then error(res, 2) end
  return res
end

-- The run's state: what the named steps below share.
local function new_run(o)
  local ds = o.data
  local r = {
    o = o, model = o.model, opt = o.optimizer, ds = ds,
    elbo = o.elbo or bbb.elbo.ELBO{ n_data = ds.n, batch_size = o.batch_size },
    n_batches = bbb.data.num_batches(ds.n, o.batch_size),
    every = o.checkpoint_every or 1,
    par = data_parallel(o.dist),
    pos = { epoch = 0, batch = 0, sums = nil, order = nil, wall = 0 },
    history = {}, steps_done = 0,
  }
  o.elbo = r.elbo
  r.gen = o.generator or core.default_generator
  r.gens = { shuffle = r.gen }
  for name, g in pairs(o.generators or {}) do r.gens[name] = g end
  return r
end

-- Puts the run where the checkpoint o.resume left it: optimizer, schedule,
-- ELBO, generators (each rank's own under MPI), position and history.
local function restore(r)
  local o, par, pos = r.o, r.par, r.pos
  local st = o.resume.meta and o.resume.meta.state
  if type(st) ~= "table" or st.kind ~= "train" then
    fail("train: the checkpoint holds no training state")
  end
  checkpoint.restore(o.resume, { optimizer = r.opt, schedule = o.schedule, elbo = r.elbo, generators = r.gens })
  pos.epoch, pos.batch = math.tointeger(st.epoch), math.tointeger(st.batch)
  pos.sums, pos.wall = st.sums, st.wall or 0
  r.history = st.history or {}
  if par.n > 1 or st.ranks then
    local ranks = math.tointeger(st.ranks) or 1
    if ranks ~= par.n then
      fail("train: the checkpoint was written by a run on %d rank(s); resume it with %d", ranks, ranks)
    end
    for name, g in pairs(r.gens) do
      local e = st.rank_generators and st.rank_generators[name] and st.rank_generators[name][par.rank + 1]
      if not e then fail("train: the checkpoint holds no state of generator %s for rank %d", name, par.rank) end
      g:set_state(math.tointeger(tonumber(e.seed)), math.tointeger(tonumber(e.counter)))
    end
    -- the saved sums are the whole job's: rank 0 carries them
    if pos.sums and not par.lead then
      pos.sums = { loss = 0, nll = 0, complexity = 0, correct = 0, n = 0, seconds = pos.sums.seconds }
    end
  end
  if pos.batch > 0 then
    pos.order = o.resume.tensors.extra.order
    if not pos.order then fail("train: the checkpoint stops inside an epoch but holds no data order") end
  end
  r.model:train()
end

-- Sample the weights, forward, the ELBO and its backward pass for one
-- minibatch (this rank's shard of it under MPI); returns the ELBO's terms
-- and, under MPI, the job's count of pending signals.
local function forward_backward(r, i, xb, yb)
  local par, opt = r.par, r.opt
  if par.n == 1 then
    local loss, terms = r.elbo:loss(r.model, xb, yb, { batch = i, step = opt.t + 1 })
    loss:backward()
    return terms
  end
  local xl, yl, B = par.shard(xb, yb)
  local terms
  if xl then
    local loss
    loss, terms = r.elbo:loss(r.model, xl, yl, { batch = i, step = opt.t + 1, examples = B, kl_share = 1 / par.n })
    loss:backward()
  else   -- an empty shard still joins the reduction, with zeros
    terms = r.elbo:skip()
  end
  -- a signal seen by any rank stops every rank after the same step
  return terms, par.reduce_grads(opt, core.sigint_pending())
end

-- Adds one minibatch's terms to the epoch's sums.
local function record_step(r, terms, B)
  local sums = r.pos.sums
  sums.loss = sums.loss + terms.nll_sum + terms.weighted_complexity
  sums.nll = sums.nll + terms.nll_sum
  sums.complexity = sums.complexity + terms.weighted_complexity
  sums.correct = sums.correct + (terms.correct or 0)
  sums.n = sums.n + B
  if r.opt.observe_loss and B > 0 then   -- warns once when the loss per example explodes
    r.opt:observe_loss((terms.nll_sum + terms.weighted_complexity) / B)
  end
end

-- Accuracy (or o.evaluate's figures) on the validation and test sets.
local function evaluate(r, rec)
  local o = r.o
  bbb.no_grad(function()
    for _, part in ipairs { { "val", o.val }, { "test", o.test } } do
      if part[2] then
        if o.evaluate then
          for k, v in pairs(o.evaluate(r.model, part[2], part[1])) do rec[part[1] .. "_" .. k] = v end
        else
          rec[part[1] .. "_acc"] = train.accuracy(r.model, part[2])
        end
      end
    end
  end)
end

-- The epoch's record from its sums, evaluated, logged, checkpointed, printed;
-- returns "stopped" when on_epoch asks to stop.
local function end_epoch(r, epoch, sums, t0)
  local o, pos = r.o, r.pos
  if r.par.n > 1 then sums = r.par.reduce_sums(sums) end
  if o.schedule then o.schedule:step() end
  local train_seconds = sums.seconds + (clock() - t0)   -- this process's share
  local rec = {
    epoch = epoch, elbo_per_example = sums.loss / sums.n, nll_per_example = sums.nll / sums.n,
    complexity_total = sums.complexity, complexity_per_example = sums.complexity / sums.n,
    lr = r.opt.lr, train_seconds = train_seconds,
  }
  if r.elbo.likelihood == "categorical" then rec.train_acc = sums.correct / sums.n end
  local t_eval = clock()
  evaluate(r, rec)
  local stop = o.on_epoch and o.on_epoch(rec, { epoch = epoch, model = r.model }) == "stop"
  r.model:train()
  rec.seconds, rec.eval_seconds = train_seconds, clock() - t_eval
  pos.epoch, pos.batch, pos.sums, pos.order = epoch, 0, nil, nil
  rec.wall = clock() - r.wall0
  pos.wall = rec.wall
  r.history[#r.history + 1] = rec
  write_log(r.log, o.log, rec)
  if o.checkpoint and (epoch % r.every == 0 or epoch == o.epochs) then
    rec.checkpoint_seconds = save(o, r.par, o.checkpoint, r.gens, pos, r.history)
    r.last_ckpt = o.checkpoint
  end
  if not r.quiet then
    r.bar:clear()
    print(r.line(rec))
    io.stdout:flush()
  end
  return stop and "stopped" or nil
end

-- Saves the state after a signal (at the step just finished).
local function checkpoint_now(r, t0)
  local o, pos = r.o, r.pos
  pos.sums.seconds = pos.sums.seconds + (clock() - t0)
  pos.wall = clock() - r.wall0
  r.bar:clear()
  local path = o.checkpoint or o.interrupt_checkpoint
  if type(path) == "function" then path = path() end
  if path then
    save(o, r.par, path, r.gens, pos, r.history)
    r.last_ckpt = path
  end
end

-- One epoch: draw the minibatches in this epoch's order and step on each.
-- Returns "interrupted" when a signal arrived (after its step is saved),
-- "stopped" when on_epoch asked to stop.
local function run_epoch(r, epoch)
  local o, pos, opt = r.o, r.pos, r.opt
  local t0 = clock()
  r.model:train()
  if pos.batch == 0 then
    pos.order = bbb.data.permutation(r.ds.n, r.gen)
    pos.sums = { loss = 0, nll = 0, complexity = 0, correct = 0, n = 0, seconds = 0 }
  end
  r.bar.label = ("epoch %d/%d"):format(epoch, o.epochs)
  for i, xb, yb in bbb.data.batches(r.ds, o.batch_size, { order = pos.order, start = pos.batch }) do
    opt:zero_grad()
    if o.augment then xb = o.augment(xb, epoch, i) end
    local terms, pending = forward_backward(r, i, xb, yb)
    opt:step()
    record_step(r, terms, terms.examples)
    pos.batch = i
    r.steps_done = r.steps_done + 1
    if o.on_step then o.on_step(i, terms, { epoch = epoch, model = r.model }) end
    r.bar:update(r.steps_done, ("nll %.4f"):format(terms.nll))
    pending = pending or core.sigint_pending()
    if pending > 0 and (i < r.n_batches or epoch < o.epochs) then
      checkpoint_now(r, t0)
      return "interrupted"
    end
  end
  return end_epoch(r, epoch, pos.sums, t0)
end

--- run(opts) -> result: fit's loop itself, with opts already checked and
-- errors not rewritten (bbb.train.fit is the entry point).
function train.run(o)
  local r = new_run(o)
  if r.par.n > 1 then r.par.broadcast_parameters(r.model) end
  if o.resume then restore(r) end
  local par, pos = r.par, r.pos
  if par.lead then
    r.log, r.log_lock = open_log(o.log)
    r.ckpt_lock = lock_checkpoint(o.checkpoint)
  end
  r.quiet, r.line = o.quiet or not par.lead, o.print or default_line
  local remaining = (o.epochs - pos.epoch) * r.n_batches - pos.batch
  -- a bar on a terminal unless told otherwise; other ranks stay silent
  r.bar = bbb.progress.new{ total = math.max(remaining, 0),
    mode = par.lead and (o.progress or bbb.progress.mode) or "off" }
  r.wall0 = clock() - pos.wall
  core.sigint_trap(true)
  local ok, status = pcall(function()
    for epoch = pos.epoch + 1, o.epochs do
      local ended = run_epoch(r, epoch)
      if ended then
        if ended == "stopped" then r.bar:finish() end
        return ended
      end
    end
    r.bar:finish()
    return "done"
  end)
  local signal = core.interrupt_signal()
  core.sigint_trap(false)
  local closed, cerr = true, nil
  if r.log then closed, cerr = r.log:close() end
  if r.log_lock then r.log_lock:release() end
  unlock_checkpoint(r.ckpt_lock)
  if not ok then error(status, 0) end
  if not closed then fail("train: cannot write the log %s: %s", o.log, tostring(cerr)) end
  return { history = r.history, status = status, epoch = pos.epoch, batch = pos.batch,
           checkpoint = r.last_ckpt, signal = status == "interrupted" and signal or nil }
end

return train

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
function train.split_validation(ds, n)
  if math.type(n) ~= "integer" or n < 1 or n >= ds.n then
    error(("validation size must be an integer in 1..%d (the training set has %d), got %s")
      :format(ds.n - 1, ds.n, tostring(n)), 2)
  end
  return bbb.data.split(ds, ds.n - n)
end

-- Opens the run log: a resumed run rewrites it from the checkpoint's history
-- first, so records after the checkpoint (from the run that was stopped)
-- do not appear twice.
local function open_log(path, history)
  if not path then return nil end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "w")
  if not f then fail("train: cannot write the log %s: %s", path, err) end
  for _, rec in ipairs(history) do f:write(json.encode(rec), "\n") end
  assert(f:close())
  local ok, rerr = os.rename(tmp, path)
  if not ok then fail("train: cannot write the log %s: %s", path, rerr) end
  f, err = io.open(path, "a")
  if not f then fail("train: cannot write the log %s: %s", path, err) end
  return f
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
--               checkpoint = path written last (or nil), epoch, batch}
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
--               on Ctrl-C; interrupt_checkpoint: the path for Ctrl-C when
--               no checkpoint path is set
--   resume      the info from bbb.load of a checkpoint of this run
--   args        a table saved with the checkpoints (the script's flags)
--   on_epoch    function(rec, ctx): adds figures to the epoch record;
--               returning "stop" ends the run after this epoch (status
--               "stopped": early stopping)
--   on_step     function(i, terms, ctx)
--   print       function(rec) -> line (default: every figure); quiet = true
--   progress    "bar" | "lines" | "off" (default: bar on a terminal)
--   dist        bbb.dist under mpirun: data-parallel training (see above)
function train.fit(o)
  local ok, res = pcall(function()
    check_opts(o)
    return train.run(o)
  end)
  if not ok then error(res, 2) end
  return res
end

function train.run(o)
  local model, opt, ds = o.model, o.optimizer, o.data
  local elbo = o.elbo or bbb.elbo.ELBO{ n_data = ds.n, batch_size = o.batch_size }
  o.elbo = elbo
  local gen = o.generator or core.default_generator
  local gens = { shuffle = gen }
  for name, g in pairs(o.generators or {}) do gens[name] = g end
  local n_batches = bbb.data.num_batches(ds.n, o.batch_size)
  local every = o.checkpoint_every or 1

  local par = data_parallel(o.dist)
  local pos = { epoch = 0, batch = 0, sums = nil, order = nil, wall = 0 }
  local history = {}
  if par.n > 1 then par.broadcast_parameters(model) end
  if o.resume then
    local st = o.resume.meta and o.resume.meta.state
    if type(st) ~= "table" or st.kind ~= "train" then
      fail("train: the checkpoint holds no training state")
    end
    checkpoint.restore(o.resume, { optimizer = opt, schedule = o.schedule, elbo = elbo, generators = gens })
    pos.epoch, pos.batch = math.tointeger(st.epoch), math.tointeger(st.batch)
    pos.sums, pos.wall = st.sums, st.wall or 0
    history = st.history or {}
    if par.n > 1 or st.ranks then
      local ranks = math.tointeger(st.ranks) or 1
      if ranks ~= par.n then
        fail("train: the checkpoint was written by a run on %d rank(s); resume it with %d", ranks, ranks)
      end
      for name, g in pairs(gens) do
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
    model:train()
  end

  local log = par.lead and open_log(o.log, history) or nil
  local quiet, line = o.quiet or not par.lead, o.print or default_line
  local remaining = (o.epochs - pos.epoch) * n_batches - pos.batch
  local bar = bbb.progress.new{ total = math.max(remaining, 0), mode = par.lead and o.progress or "off" }
  local steps_done = 0
  local last_ckpt
  local wall0 = clock() - pos.wall
  core.sigint_trap(true)
  local result = { history = history, status = "done" }

  local function finish(status)
    core.sigint_trap(false)
    if log then log:close() end
    result.status, result.epoch, result.batch, result.checkpoint = status, pos.epoch, pos.batch, last_ckpt
    return result
  end

  local ok, err = pcall(function()
    for epoch = pos.epoch + 1, o.epochs do
      local t0 = clock()
      model:train()
      if pos.batch == 0 then
        pos.order = bbb.data.permutation(ds.n, gen)
        pos.sums = { loss = 0, nll = 0, complexity = 0, correct = 0, n = 0, seconds = 0 }
      end
      local sums = pos.sums
      bar.label = ("epoch %d/%d"):format(epoch, o.epochs)
      for i, xb, yb in bbb.data.batches(ds, o.batch_size, { order = pos.order, start = pos.batch }) do
        opt:zero_grad()
        local terms, pending
        if par.n == 1 then
          local loss
          loss, terms = elbo:loss(model, xb, yb, { batch = i, step = opt.t + 1 })
          loss:backward()
        else
          local xl, yl, B = par.shard(xb, yb)
          if xl then
            local loss
            loss, terms = elbo:loss(model, xl, yl, { batch = i, step = opt.t + 1, examples = B,
                                                     kl_share = 1 / par.n })
            loss:backward()
          else   -- an empty shard still joins the reduction, with zeros
            elbo.steps = elbo.steps + 1
            terms = { nll_sum = 0, kl_weight = 0, complexity = 0, correct = 0, nll = 0 }
          end
          terms.examples = xl and xl:size(1) or 0
          -- a Ctrl-C seen by any rank stops every rank after the same step
          pending = par.reduce_grads(opt, core.sigint_pending())
        end
        opt:step()
        sums.loss = sums.loss + terms.nll_sum + terms.kl_weight * terms.complexity
        sums.nll = sums.nll + terms.nll_sum
        sums.complexity = sums.complexity + terms.kl_weight * terms.complexity
        sums.correct = sums.correct + (terms.correct or 0)
        local B = terms.examples or xb:size(1)
        sums.n = sums.n + B
        if opt.observe_loss and B > 0 then   -- warns once when the loss per example explodes
          opt:observe_loss((terms.nll_sum + terms.kl_weight * terms.complexity) / B)
        end
        pos.batch = i
        steps_done = steps_done + 1
        if o.on_step then o.on_step(i, terms, { epoch = epoch, model = model }) end
        bar:update(steps_done, ("nll %.4f"):format(terms.nll))
        pending = pending or core.sigint_pending()
        if pending > 0 and (i < n_batches or epoch < o.epochs) then
          sums.seconds = sums.seconds + (clock() - t0)
          pos.wall = clock() - wall0
          bar:clear()
          local path = o.checkpoint or o.interrupt_checkpoint
          if path then
            save(o, par, path, gens, pos, history)
            last_ckpt = path
          end
          return "interrupted"
        end
      end
      if par.n > 1 then sums = par.reduce_sums(sums) end
      if o.schedule then o.schedule:step() end
      local train_seconds = sums.seconds + (clock() - t0)   -- this process's share
      local rec = {
        epoch = epoch, elbo_per_example = sums.loss / sums.n, nll_per_example = sums.nll / sums.n,
        complexity_total = sums.complexity, complexity_per_example = sums.complexity / sums.n,
        lr = opt.lr, train_seconds = train_seconds,
      }
      if elbo.likelihood == "categorical" then rec.train_acc = sums.correct / sums.n end
      local t_eval = clock()
      bbb.no_grad(function()
        for _, part in ipairs { { "val", o.val }, { "test", o.test } } do
          if part[2] then
            if o.evaluate then
              for k, v in pairs(o.evaluate(model, part[2], part[1])) do rec[part[1] .. "_" .. k] = v end
            else
              rec[part[1] .. "_acc"] = train.accuracy(model, part[2])
            end
          end
        end
      end)
      local stop = o.on_epoch and o.on_epoch(rec, { epoch = epoch, model = model }) == "stop"
      model:train()
      rec.seconds, rec.eval_seconds = train_seconds, clock() - t_eval
      pos.epoch, pos.batch, pos.sums, pos.order = epoch, 0, nil, nil
      rec.wall = clock() - wall0
      pos.wall = rec.wall
      history[#history + 1] = rec
      write_log(log, o.log, rec)
      if o.checkpoint and (epoch % every == 0 or epoch == o.epochs) then
        rec.checkpoint_seconds = save(o, par, o.checkpoint, gens, pos, history)
        last_ckpt = o.checkpoint
      end
      if not quiet then
        bar:clear()
        print(line(rec))
        io.stdout:flush()
      end
      if stop then bar:finish(); return "stopped" end
    end
    bar:finish()
    return "done"
  end)
  if not ok then
    core.sigint_trap(false)
    if log then log:close() end
    error(err, 0)
  end
  return finish(err)
end

return train

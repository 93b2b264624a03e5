--- bbb.app.tabular.train: fitting a model (bbb.app.tabular.model) to its
-- training rows, with early stopping on the validation log-likelihood that
-- bbb.app.tabular.score computes. An ensemble's members train one after
-- another, or each in a worker process of its own (member_job): the last
-- part in the order, as it needs both the others.
local bbb = require "bbb"
local model = require "bbb.app.tabular.model"
local scoring = require "bbb.app.tabular.score"

local M = {}

local function clone_state(m, elbo)
  local sd = {}
  for k, v in pairs(m.net:state_dict()) do sd[k] = v:clone() end
  return { sd = sd, sigma = (elbo.likelihood == "gaussian" or elbo.likelihood == "student-t") and elbo:sigma() or 1 }
end

--- train(model, tr, va, {epochs = 1000, batch = 32, lr = 0.01, samples = 1,
--        patience = 100, weight_decay = 0, val_samples = 20, generator, quiet,
--        every = 0 (print every n epochs), kl_weight = "uniform" (each
--        minibatch's complexity weight, as bbb.elbo.ELBO takes it: "uniform"
--        gives the ELBO, a number below 1 / batches a tempered posterior)})
-- -> {best_epoch, epochs, best_ll, status, signal (when status is "interrupted")}
-- tr and va hold raw rows. Trains through bbb.train.fit and keeps the
-- weights of the epoch with the best validation log-likelihood. An
-- ensemble's members train one after another, each stopping on its own;
-- its best_epoch is their median, best_ll the ensemble's on va.
function M.train(m, tr, va, o)
  if m.kind == "ensemble" then return M.train_ensemble(m, tr, va, o) end
  return M.train_one(m, tr, va, o)
end

-- The seed of one member's generator, drawn from the run's.
local function member_seed(g)
  return math.floor(bbb.rand({ 1 }, 0, 1, g):item() * 2 ^ 31)
end

-- o without what cannot leave the process (the generator), as JSON.
local function portable(o)
  local out = {}
  for k, v in pairs(o) do
    if type(v) == "number" or type(v) == "string" or type(v) == "boolean" then out[k] = v end
  end
  return out
end

-- A member of an ensemble as a model of its own (sharing the preprocessing).
local function member(m, i)
  return { net = m.members[i], kind = "mlp", task = m.task, prep = m.prep, noise = m.noise, df = m.df,
           noise_sigma = m.member_sigma[i] }
end

-- x as a checkpoint holds it (finite values only): its missing cells as 0,
-- and a mask of them (nil when none is missing); with_missing undoes it.
local function finite_part(x)
  local rows, any = x:totable(), false
  local mask = {}
  for i, r in ipairs(rows) do
    mask[i] = {}
    for j, v in ipairs(r) do
      if v ~= v then r[j], mask[i][j], any = 0, 1, true else mask[i][j] = 0 end
    end
  end
  if not any then return x, nil end
  return bbb.tensor(rows), bbb.tensor(mask)
end

local function with_missing(x, mask)
  if not mask then return x end
  local rows, m = x:totable(), mask:totable()
  for i, r in ipairs(rows) do
    for j in ipairs(r) do if m[i][j] == 1 then r[j] = 0 / 0 end end
  end
  return bbb.tensor(rows)
end

-- Trains the members in o.jobs processes at once: the model and the rows
-- go to a temporary folder, each worker (bbblua -e, member_job) trains one
-- member there and writes its weights back. -> each member's
-- {sigma, best_epoch, epochs}, its weights loaded into m.members.
local function train_members_apart(m, tr, va, o, seeds)
  local sys = require "bbb.app.sys"
  -- a fresh folder only this user can enter, its files readable by no one else
  local dir = assert(sys.mkdtemp("bbb-ensemble-"))
  local files = { dir .. "/model.ckpt", dir .. "/rows.ckpt" }
  local function clean()
    for _, f in ipairs(files) do os.remove(f) end
    os.remove(dir)
  end
  local mask = sys.umask(tonumber("077", 8))
  local ok, res = pcall(function()
    model.save(files[1], m)
    local opts = portable(o)
    opts.threads = math.max(1, bbb.get_num_threads() // o.jobs)
    local rows = { tr_y = tr.y, va_y = va and va.y }
    rows.tr_x, rows.tr_missing = finite_part(tr.x)
    if va then rows.va_x, rows.va_missing = finite_part(va.x) end
    bbb.checkpoint.write(files[2], rows, { options = opts, seeds = seeds })
    local tasks = {}
    for i = 1, #m.members do
      tasks[i] = { stdout = "/dev/null", argv = sys.bbblua_argv("-e",
        ("require('bbb.app.tabular.train').member_job(%q, %d, %d)"):format(dir, i, sys.pid())) }
      files[#files + 1] = ("%s/member%d.ckpt"):format(dir, i)
    end
    local ran = require("bbb.app.jobs").run(tasks, { jobs = o.jobs, on_stop = clean })
    local out = {}
    for i, r in ipairs(ran) do
      if not r.ok then error(("ensemble member %d: its worker ended with %s %s"):format(i, r.how, tostring(r.code)), 0) end
      local sd, meta = bbb.checkpoint.read(files[2 + i])
      m.members[i]:load_state_dict(sd)
      out[i] = meta
    end
    return out
  end)
  sys.umask(mask)
  clean()
  if not ok then error(res, 0) end
  return res
end

-- Removes what train_members_apart put in dir and dir itself: a worker's
-- task when the parent died without cleaning up (SIGKILL leaves it no say).
local function remove_job_folder(dir, members)
  os.remove(dir .. "/model.ckpt")
  os.remove(dir .. "/rows.ckpt")
  for k = 1, members do os.remove(("%s/member%d.ckpt"):format(dir, k)) end
  os.remove(dir)
end

--- member_job(folder, i, parent): trains member i of the ensemble that
-- train_ensemble left in folder and writes its weights there; what each
-- worker process runs. Exits the process: 0 when done, 1 on an error,
-- 128 + the signal when stopped. parent is the process that started it:
-- once that is gone (the worker gets SIGTERM then) the worker removes the
-- folder, so no rows are left behind.
function M.member_job(dir, i, parent)
  local sys = require "bbb.app.sys"
  sys.umask(tonumber("077", 8))
  local members = 0
  local function orphan() return parent ~= nil and sys.ppid() ~= parent end
  local ok, err = pcall(function()
    local m = model.load(dir .. "/model.ckpt")
    local t, meta = bbb.checkpoint.read(dir .. "/rows.ckpt")
    members = #meta.seeds
    local o = meta.options
    for k, v in pairs(o) do o[k] = math.tointeger(v) or v end   -- JSON gives 32 back as 32.0
    o.progress, o.every = "off", 0
    bbb.set_num_threads(o.threads)
    o.generator = bbb.Generator(meta.seeds[i])
    local tr = { x = with_missing(t.tr_x, t.tr_missing), y = t.tr_y, n = t.tr_x:size(1) }
    local va = t.va_x and { x = with_missing(t.va_x, t.va_missing), y = t.va_y, n = t.va_x:size(1) }
    local one = member(m, i)
    if orphan() then return "orphan" end
    local info = M.train_one(one, tr, va, o)
    if info.status == "interrupted" then return info.signal or 2 end
    bbb.checkpoint.write(("%s/member%d.ckpt"):format(dir, i), one.net:state_dict(),
      { sigma = one.noise_sigma, best_epoch = info.best_epoch, epochs = info.epochs })
  end)
  if orphan() then
    remove_job_folder(dir, members)
    os.exit(128 + 15)
  end
  if not ok then
    io.stderr:write(("ensemble member %d: %s\n"):format(i, tostring(err)))
    os.exit(1)
  end
  if err ~= nil then os.exit(128 + err) end
  os.exit(0)
end

-- Each member trains with a generator of its own, seeded from the run's up
-- front: the members come out the same one after another (o.jobs 1) as in
-- o.jobs processes at once.
function M.train_ensemble(m, tr, va, o)
  local seeds = {}
  for i = 1, #m.members do seeds[i] = member_seed(o.generator or bbb.Generator(1)) end
  local apart = (o.jobs or 1) > 1 and train_members_apart(m, tr, va, o, seeds)
  local epochs, total = {}, 0
  for i = 1, #m.members do
    local info = apart and apart[i]
    if not info then
      local one, oi = member(m, i), portable(o)
      oi.generator = bbb.Generator(seeds[i])
      info = M.train_one(one, tr, va, oi)
      if info.status == "interrupted" then return info end
      info.sigma = one.noise_sigma
    end
    m.member_sigma[i], epochs[i], total = info.sigma, info.best_epoch, total + info.epochs
  end
  table.sort(epochs)
  local info = { best_epoch = epochs[(#epochs + 1) // 2], epochs = total, status = "done", best_ll = -math.huge }
  if va then info.best_ll = bbb.no_grad(function() return scoring.score(m, va).ll end) end
  return info
end

function M.train_one(m, tr, va, o)
  local x, y = model.inputs(m, tr.x), model.targets(m, tr.y)
  local train_set = { x = x, y = y, n = tr.n }
  local reg = m.task == "regression"
  local n_batches = bbb.data.num_batches(tr.n, o.batch or 32)
  local hetero = m.noise == "hetero"
  local elbo = bbb.elbo.ELBO { n_data = tr.n, batch_size = o.batch or 32,
    likelihood = hetero and "heteroscedastic" or m.df and "student-t" or reg and "gaussian" or "categorical", df = m.df,
    learn_sigma = reg and not hetero, sigma = hetero and model.HETERO_FLOOR or 0.5,
    samples = m.kind == "bbb" and (o.samples or 1) or 1,
    kl_weight = o.kl_weight or "uniform" }
  local params = m.net:named_parameters()
  for _, p in ipairs(elbo:named_parameters()) do params[#params + 1] = p end
  local opt = bbb.optim.Adam(params, { lr = o.lr or 0.01, weight_decay = o.weight_decay or 0 })
  local best = { ll = -math.huge, epoch = 0 }
  local every = o.every or 0
  -- the validation score is noisy (MC draws, few rows): the choice of epoch
  -- and the patience go by its moving average, and never before min_epochs
  local smooth, min_epochs = nil, o.min_epochs or 0
  local res = bbb.train.fit {
    model = m.net, optimizer = opt, elbo = elbo, data = train_set, batch_size = o.batch or 32,
    epochs = o.epochs or 1000, generator = o.generator, quiet = true, progress = o.progress or "off",
    on_epoch = function(rec, ctx)
      if not va then
        best.state, best.epoch = nil, ctx.epoch
        return
      end
      m.noise_sigma = reg and elbo:sigma() or 1
      local s = bbb.no_grad(function() return scoring.score(m, va, o.val_samples or 20) end)
      rec.val_ll = s.ll
      smooth = smooth and (0.8 * smooth + 0.2 * s.ll) or s.ll
      if smooth > best.ll then best.ll, best.epoch, best.state = smooth, ctx.epoch, clone_state(m, elbo) end
      if every > 0 and ctx.epoch % every == 0 then
        print(("  epoch %4d  nll/ex %.4f  val ll %.4f  %s %.4f  best %.4f (epoch %d)"):format(ctx.epoch,
          rec.nll_per_example, s.ll, reg and "val rmse" or "val acc", reg and s.rmse or s.accuracy, best.ll, best.epoch))
        io.stdout:flush()
      end
      if ctx.epoch >= min_epochs and ctx.epoch - best.epoch >= (o.patience or 100) then return "stop" end
    end,
  }
  if best.state then
    m.net:load_state_dict(best.state.sd)
    m.noise_sigma = best.state.sigma
  else
    m.noise_sigma = reg and elbo:sigma() or 1
  end
  m.net:evaluate()
  return { best_epoch = best.epoch, epochs = #res.history, best_ll = best.ll, status = res.status, signal = res.signal }
end

return M

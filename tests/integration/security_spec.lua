-- Hostile inputs that must never run anything: plot file names and texts that
-- gnuplot would read as commands, and modules planted in the working folder.
local root = os.getenv("BBB_ROOT") or "."
local build = os.getenv("BBB_BUILD") or "build"
if root:sub(1, 1) ~= "/" then root = os.getenv("PWD") .. "/" .. root end
if build:sub(1, 1) ~= "/" then build = os.getenv("PWD") .. "/" .. build end
local bbblua = build .. "/bbblua"

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function fresh_dir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. sh_quote(dir)))
  return dir
end

-- Runs bbblua with `args` inside `dir`; returns the exit status and output.
local function run_in(dir, args)
  local cmd = ("cd %s && %s %s 2>&1; echo \"exit=$?\""):format(sh_quote(dir), sh_quote(bbblua), args)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return tonumber(out:match("exit=(%d+)%s*$")), out
end

-- Every entry of `dir` (names only), so a spec can assert nothing appeared.
local function entries(dir)
  local p = assert(io.popen("ls -A " .. sh_quote(dir)))
  local list = {}
  for name in p:lines() do list[#list + 1] = name end
  p:close()
  table.sort(list)
  return table.concat(list, " | ")
end

local PIPE = "|touch pwned;cat>/dev/null;.png"

describe("plot file names and texts", function()
  local dirs = {}
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("rm -rf " .. sh_quote(d)) end
  end)
  local function sandbox()
    local d = fresh_dir()
    dirs[#dirs + 1] = d
    return d
  end

  it("regression.lua --out '|cmd' runs nothing and creates no folder", function()
    local dir = sandbox()
    local status, out = run_in(dir, ("%s --task toy --steps 5 --test-samples 3 --out %s")
      :format(sh_quote(root .. "/scripts/regression.lua"), sh_quote(PIPE)))
    assert.are_not.equal(0, status, out)
    assert.truthy(out:find("which gnuplot runs as a command", 1, true), out)
    assert.are.equal("", entries(dir), "the working folder must stay empty")
  end)

  it("plot.lines, histogram and panels refuse a pipe name before creating anything", function()
    local dir = sandbox()
    for _, fn in ipairs { "lines", "histogram", "panels" } do
      local code = ("local plot = require 'bbb.app.plot'; plot.%s{file = %q, series = {{y = {1, 2, 3}, values = {1, 2, 3}}}}"):format(fn, PIPE)
      local status, out = run_in(dir, "-e " .. sh_quote(code))
      assert.are_not.equal(0, status, out)
      assert.truthy(out:find("plot." .. fn .. ": file '" .. PIPE .. "' starts with '|'", 1, true), out)
    end
    assert.are.equal("", entries(dir))
  end)

  it("a relative name is a plain file, even one gnuplot could misread", function()
    local dir = sandbox()
    local status, out = run_in(dir, "-e " .. sh_quote([[local plot = require "bbb.app.plot"; plot.lines{file = "a |b.png", series = {{y = {1, 2}}}}]]))
    assert.are.equal(0, status, out)
    assert.are.equal("a |b.png", entries(dir))
  end)

  it("texts with a newline cannot start a gnuplot command", function()
    local dir = sandbox()
    local payloads = { 'x\nsystem("touch pwned")\n', "x\nsystem('touch pwned')", "x\r\nsystem(\"touch pwned\") #" }
    for _, p in ipairs(payloads) do
      local code = ([[
        local p = %q
        local plot = require "bbb.app.plot"
        plot.lines{file = "ok.svg", title = p, xlabel = p, ylabel = p,
          series = {{y = {1, 2, 3}, title = p}}, bands = {{x = {1, 2}, lo = {0, 0}, hi = {1, 1}, title = p}}}
        plot.histogram{file = "h.svg", title = p, series = {{values = {1, 2, 2}, title = p}}}
        io.write(plot.terminal{title = p, series = {{y = {1, 2, 3}, title = p}}})
        plot.lines{file = "t.svg", title = {p, p}, caption = {p, p}, series = {{y = {1, 2}}},
          shade = {{lo = 1, hi = 2, title = p}}, bands = {{x = {1, 2}, lo = {0, 0}, hi = {1, 1}, edges = true}}}
        plot.panels{file = "m.svg", page_title = {p, p}, panels = {{title = {p, p}, series = {{y = {1, 2}, title = p}},
          shade = {{lo = 1, hi = 2, title = p}}}, {title = p, series = {{y = {2, 1}}}}}}
        local ok, err = pcall(plot.lines, {file = "c.svg", series = {{y = {1, 2}, color = p}}})
        print(ok, err)]]):format(p)
      local status, out = run_in(dir, "-e " .. sh_quote(code))
      assert.is_nil(io.open(dir .. "/pwned"), "a command ran through a plot text")
      assert.are.equal(0, status, out)
      local f = assert(io.open(dir .. "/ok.svg"))
      local svg = f:read("a")
      f:close()
      assert.truthy(svg:find("system(", 1, true), "the text itself is drawn")
      for _, name in ipairs { "t.svg", "m.svg" } do
        local g = assert(io.open(dir .. "/" .. name), name)
        assert.truthy(g:read("a"):find("system(", 1, true), name)
        g:close()
      end
    end
    assert.is_nil(entries(dir):find("pwned", 1, true), entries(dir))
  end)
end)

describe("lazy submodules", function()
  it("load only from bbb's own tree, never from ./bbb/ of the working folder", function()
    local names = { "nn", "metrics", "checkpoint", "train", "prior", "optim" }
    local dir = fresh_dir()
    assert(os.execute("mkdir -p " .. sh_quote(dir .. "/bbb/nn")))
    for _, name in ipairs(names) do
      for _, file in ipairs { name .. ".lua", name .. "/init.lua" } do
        local f = io.open(dir .. "/bbb/" .. file, "w")
        if f then
          f:write(("io.open(%q, 'w'):close() return {planted = true}\n"):format(dir .. "/ran_" .. name))
          f:close()
        end
      end
    end
    local code = [[
      local bbb = require "bbb"
      for _, k in ipairs{"nn", "metrics", "checkpoint", "train", "prior", "optim"} do
        local ok, m = pcall(function() return bbb[k] end)
        print(k, ok, ok and tostring(m.planted) or m)
      end
      print("require", require("bbb.nn").planted, bbb.nn.BayesLinear ~= nil)]]
    -- bbblua, and the stock interpreter with "./" first in package.path
    local stock = ("lua5.4 -e %s -e %s"):format(
      sh_quote(("package.path = './?.lua;./?/init.lua;%s/lua/?.lua;%s/lua/?/init.lua;' .. package.path")
        :format(root, root)),
      sh_quote(("package.cpath = '%s/?.so;' .. package.cpath"):format(build)))
    local outs = {}
    for _, cmd in ipairs { sh_quote(bbblua) .. " -e " .. sh_quote(code), stock .. " -e " .. sh_quote(code) } do
      local p = assert(io.popen(("cd %s && %s 2>&1; echo \"exit=$?\""):format(sh_quote(dir), cmd)))
      outs[#outs + 1] = p:read("a")
      p:close()
    end
    os.execute("rm -rf " .. sh_quote(dir .. "/bbb"))
    local ran = entries(dir)
    os.execute("rm -rf " .. sh_quote(dir))
    assert.are.equal("", ran, "a planted module ran:\n" .. table.concat(outs, "\n"))
    for _, out in ipairs(outs) do
      assert.truthy(out:find("exit=0", 1, true), out)
      for _, k in ipairs(names) do
        assert.truthy(out:find(k .. "\ttrue\tnil", 1, true), out)
      end
      assert.truthy(out:find("require\tnil\ttrue", 1, true), out)
    end
  end)
end)

describe("no shell between user text and a process", function()
  -- A path that a shell would read as commands, in three spellings.
  local EVIL = { "x'; touch pwned; '", "x$(touch pwned)", "x`touch pwned`" }

  it("no script or library module hands a command line to a shell", function()
    local found = {}
    for _, dir in ipairs { "scripts", "lua/bbb", "lua/bbb/nn", "lua/bbb/bandit", "lua/bbb/data",
                           "lua/bbb/app", "lua/bbb/app/experiments" } do
      local p = assert(io.popen("ls " .. sh_quote(root .. "/" .. dir)))
      for name in p:lines() do
        if name:find("%.lua$") then
          local f = assert(io.open(root .. "/" .. dir .. "/" .. name))
          local n = 0
          for line in f:lines() do
            n = n + 1
            if line:find("os%.execute") or line:find("io%.popen") then
              found[#found + 1] = ("%s/%s:%d: %s"):format(dir, name, n, line)
            end
          end
          f:close()
        end
      end
      p:close()
    end
    assert.are.equal("", table.concat(found, "\n"))
  end)

  it("bandit.lua --out and --data holding shell syntax run nothing", function()
    local dir = fresh_dir()
    for _, evil in ipairs(EVIL) do
      local status, out = run_in(dir, ("%s --agents eps0 --steps 20 --updates 1 --batch 4 --no-plot --out %s --data %s")
        :format(sh_quote(root .. "/scripts/bandit.lua"), sh_quote(evil),
          sh_quote(root .. "/data/mushroom/Mushroom.rda")))
      assert.are.equal(0, status, out)
      assert.is_nil(io.open(dir .. "/pwned"), "a command ran through --out: " .. out)
      local status2, out2 = run_in(dir, ("%s --agents eps0 --steps 20 --updates 1 --batch 4 --no-plot --data %s")
        :format(sh_quote(root .. "/scripts/bandit.lua"), sh_quote(evil)))
      assert.are.equal(2, status2, out2)
      assert.is_nil(io.open(dir .. "/pwned"), "a command ran through --data: " .. out2)
    end
    local status, out = run_in(dir, ("%s --steps 5 --out %s"):format(sh_quote(root .. "/scripts/bandit.lua"),
      sh_quote("a\nb")))
    assert.are.equal(2, status, out)
    assert.truthy(out:find("--out: folder name 'a?b' holds a control character", 1, true), out)
    local status3, out3 = run_in(dir, ("%s --steps 5 --out ''"):format(sh_quote(root .. "/scripts/bandit.lua")))
    assert.are.equal(2, status3, out3)
    assert.truthy(out3:find("--out: expected a folder name, got ''", 1, true), out3)
    os.execute("rm -rf " .. sh_quote(dir))
  end)

  it("grid.lua passes mnist flags as words, never as shell text", function()
    local dir = fresh_dir()
    local status, out = run_in(dir, ("%s --epochs 1 --limit 64 --val 32 --lr 1e-3 --pi 0.5 --log-sigma1 0 "
      .. "--log-sigma2 6 --samples 1 --jobs 1 --results g.jsonl -- --test-limit %s"):format(
      sh_quote(root .. "/scripts/grid.lua"), sh_quote(EVIL[2])))
    -- the runs' flags are parsed once before the first run: mnist.lua's own
    -- check sees the text as a value (and names it), no shell ever does
    assert.are.equal(2, status, out)
    assert.is_nil(io.open(dir .. "/pwned"), "a command ran through a grid flag: " .. out)
    assert.truthy(out:find("--test-limit", 1, true) and out:find("touch pwned", 1, true), out)
    os.execute("rm -rf " .. sh_quote(dir))
  end)

  it("grid.lua stops with a clear error when its results folder cannot be made", function()
    local dir = fresh_dir()
    local f = assert(io.open(dir .. "/file", "w"))
    f:close()
    local status, out = run_in(dir, ("%s --results file/sub/g.jsonl"):format(sh_quote(root .. "/scripts/grid.lua")))
    assert.are_not.equal(0, status, out)
    assert.truthy(out:find("file", 1, true), out)
    os.execute("rm -rf " .. sh_quote(dir))
  end)
end)

describe("modules planted in the working folder", function()
  local function plant(dir)
    assert(os.execute("mkdir -p " .. sh_quote(dir .. "/bbb")))
    for _, file in ipairs { "cjson.lua", "argparse.lua", "bbb/dist_mpi.lua" } do
      local f = assert(io.open(dir .. "/" .. file, "w"))
      f:write(("io.open(%q, 'w'):close() return {}\n"):format(dir .. "/ran_" .. file:gsub("/", "_")))
      f:close()
    end
  end

  it("never shadow cjson, argparse or bbb.dist_mpi when a script starts", function()
    local dir = fresh_dir()
    plant(dir)
    local status, out = run_in(dir, sh_quote(root .. "/scripts/bandit.lua") .. " --help")
    assert.are.equal(0, status, out)
    local code = [[print(require("cjson").encode{1}, require("argparse") ~= nil, bbb.dist.available)]]
    local status2, out2 = run_in(dir, "-e " .. sh_quote(code))
    assert.are.equal(0, status2, out2)
    assert.truthy(out2:find("[1]\ttrue\tfalse", 1, true), out2)
    local ran = {}
    for _, f in ipairs { "ran_cjson.lua", "ran_argparse.lua", "ran_bbb_dist_mpi.lua" } do
      if io.open(dir .. "/" .. f) then ran[#ran + 1] = f end
    end
    os.execute("rm -rf " .. sh_quote(dir))
    assert.are.equal("", table.concat(ran, " "))
  end)

  it("never shadow bbb.dist_mpi under mpirun", function()
    if not os.execute("command -v mpirun >/dev/null 2>&1") then
      pending("mpirun not installed")
      return
    end
    local f = io.open(build .. "/bbb/dist_mpi.so")
    if not f then pending("this build has no MPI") return end
    f:close()
    local dir = fresh_dir()
    plant(dir)
    local cmd = ("cd %s && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun "
      .. "--oversubscribe -np 1 %s -e %s 2>&1"):format(sh_quote(dir), sh_quote(bbblua),
      sh_quote("print('mpi', bbb.dist.available, bbb.dist.size())"))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    local ran = io.open(dir .. "/ran_bbb_dist_mpi.lua") ~= nil
    os.execute("rm -rf " .. sh_quote(dir))
    assert.is_false(ran, out)
    assert.truthy(out:find("mpi\ttrue\t1", 1, true), out)
  end)
end)

describe("opening a saved model never runs code its metadata names", function()
  -- A model whose Lua prior names EVIL.lua: running that file leaves `ran`
  -- in the sandbox. Every loader must refuse the model before touching it.
  local dir
  local EVIL_TEXT = "io.open(%q, 'w'):close()\n"
    .. "return { name = 'evil', log_prob = function(_, w) return (w * w):sum() * -0.5 end }\n"
  local function make_model(path, file, args)
    local code = ([[
      local p = { name = "evil", file = %q, log_prob = function(_, w) return (w * w):sum() * -0.5 end }
      local net = bbb.nn.bayes_mlp({784, 8, 10}, { prior = p })
      bbb.save(%q, { model = net, args = %s })]]):format(file, path, args or "nil")
    local status, out = run_in(dir, "-e " .. sh_quote(code))
    assert.are.equal(0, status, out)
  end
  local function nothing_ran(out)
    assert.is_nil(io.open(dir .. "/ran"), "the prior file named by the model ran:\n" .. out)
  end

  setup(function()
    dir = fresh_dir()
    local f = assert(io.open(dir .. "/evil.lua", "w"))
    f:write(EVIL_TEXT:format(dir .. "/ran"))
    f:close()
    os.execute(("cp %s %s"):format(sh_quote(dir .. "/evil.lua"), sh_quote(dir .. "/prior.lua")))
    make_model("abs.ckpt", dir .. "/evil.lua")
    make_model("rel.ckpt", "prior.lua")
  end)
  teardown(function() os.execute("rm -rf " .. sh_quote(dir)) end)

  it("bbb.load refuses, for an absolute and a relative file, and says how to pass the prior", function()
    for _, ck in ipairs { "abs.ckpt", "rel.ckpt" } do
      local status, out = run_in(dir, "-e " .. sh_quote(("bbb.load(%q)"):format(ck)))
      nothing_ran(out)
      assert.are.equal(1, status, out)
      assert.truthy(out:find("opening a model never runs code it names", 1, true), out)
    end
  end)

  it("bbb.load takes the prior the caller gives, and refuses one whose hash differs", function()
    local code = [[
      local given = { name = "mine", log_prob = function(_, w) return (w * w):sum() * -0.5 end }
      local net = bbb.load("abs.ckpt", { prior = given })
      print("loaded", net ~= nil)]]
    local status, out = run_in(dir, "-e " .. sh_quote(code))
    nothing_ran(out)
    assert.are.equal(0, status, out)
    assert.truthy(out:find("loaded\ttrue", 1, true), out)
    local hashed = [[
      local p = { name = "h", file = "a.lua", file_hash = "00000000",
        log_prob = function(_, w) return (w * w):sum() * -0.5 end }
      bbb.save("h.ckpt", bbb.nn.bayes_mlp({2, 2}, { prior = p }))
      local q = { name = "h", file = "b.lua", file_hash = "11111111",
        log_prob = function(_, w) return (w * w):sum() * -0.5 end }
      print(pcall(bbb.load, "h.ckpt", { prior = q }))]]
    status, out = run_in(dir, "-e " .. sh_quote(hashed))
    assert.are.equal(0, status, out)
    assert.truthy(out:find("false", 1, true) and out:find("is not the one the model was trained with", 1, true), out)
  end)

  it("predict.lua, prune.lua, ood.lua and plot_run.lua refuse it before any work", function()
    local f = assert(io.open(dir .. "/run.jsonl", "w"))
    f:write('{"epoch": 1, "elbo_per_example": 1.0, "train_acc": 0.5}\n')
    f:close()
    local cmds = {
      "predict.lua --model abs.ckpt --data " .. sh_quote(root .. "/data/r/MASS:Boston"),
      "prune.lua --from abs.ckpt --out p/run --no-plot",
      "ood.lua --from-bbb abs.ckpt --limit 100 --test-limit 50 --out o",
      "plot_run.lua run.jsonl abs.ckpt --out pr",
    }
    for _, c in ipairs(cmds) do
      local status, out = run_in(dir, sh_quote(root .. "/scripts/") .. c)
      nothing_ran(out)
      assert.are_not.equal(0, status, c .. "\n" .. out)
      assert.truthy(out:find("never runs code", 1, true), c .. "\n" .. out)
    end
  end)

  it("prune.lua and plot_run.lua load it with --prior FILE from the command line", function()
    local g = assert(io.open(dir .. "/good.lua", "w"))
    g:write("return { name = 'good', log_prob = function(_, w) return (w * w):sum() * -0.5 end }\n")
    g:close()
    local status, out = run_in(dir, sh_quote(root .. "/scripts/plot_run.lua") .. " run.jsonl abs.ckpt --out pr --prior good.lua")
    nothing_ran(out)
    assert.are.equal(0, status, out)
    local status2, out2 = run_in(dir, sh_quote(root .. "/scripts/plot_run.lua") .. " run.jsonl abs.ckpt --out pr --prior run.jsonl")
    assert.are_not.equal(0, status2, out2)
    assert.truthy(out2:find("'run.jsonl' is not a .lua file", 1, true), out2)
    local status3, out3 = run_in(dir, sh_quote(root .. "/scripts/prune.lua")
      .. " --from abs.ckpt --prior good.lua --fractions 0.5 --test-limit 50 --test-samples 2 --out p/run --no-plot")
    nothing_ran(out3)
    assert.are.equal(0, status3, out3)
  end)

  it("mnist.lua --resume never runs the prior file its checkpoint names", function()
    make_model("resume.ckpt", dir .. "/evil.lua", ('{ prior = %q, prior_hash = "00000000" }'):format(dir .. "/evil.lua"))
    local status, out = run_in(dir, sh_quote(root .. "/scripts/mnist.lua") .. " --resume resume.ckpt --limit 100")
    nothing_ran(out)
    assert.are.equal(2, status, out)
    assert.truthy(out:find("never runs", 1, true), out)
    -- a model with C priors whose saved flags name a Lua file: refused too
    local code = [[
      bbb.save("c.ckpt", { model = bbb.nn.bayes_mlp({784, 8, 10}), args = { prior = "evil.lua" } })]]
    run_in(dir, "-e " .. sh_quote(code))
    status, out = run_in(dir, sh_quote(root .. "/scripts/mnist.lua") .. " --resume c.ckpt --limit 100")
    nothing_ran(out)
    assert.are.equal(2, status, out)
    assert.truthy(out:find("give it again with --prior FILE", 1, true), out)
  end)

  it("figure2.lua --from never runs the prior of a checkpoint its JSON names", function()
    local j = assert(io.open(dir .. "/rows.json", "w"))
    j:write(('{"rows": [{"units": 8, "method": "bbb-mixture", "chosen": "lr=0.001 samples=1 pi=0.5 '
      .. 'log_sigma1=0 log_sigma2=6", "checkpoint": %q}]}'):format(dir .. "/abs.ckpt"))
    j:close()
    local status, out = run_in(dir, sh_quote(root .. "/scripts/figure2.lua")
      .. " --from rows.json --units 8 --methods bbb --epochs 1 --round 1 --val 100 --limit 300"
      .. " --test-limit 100 --threads 1 --dir f2")
    nothing_ran(out)
    assert.truthy(out:find("cannot be read", 1, true), out)
    assert.are.equal(0, status, out)
  end)
end)

-- A table for fit.lua: y = x1 - x2 + noise, n rows.
local function small_table(path, n)
  local lines = { "x1,x2,y" }
  for i = 1, n do
    local a, b = math.sin(i * 1.7), math.cos(i * 0.9)
    lines[#lines + 1] = ("%.4f,%.4f,%.4f"):format(a, b, a - b + 0.1 * math.sin(i * 13.1))
  end
  local f = assert(io.open(path, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end

-- Starts `bbblua args` in the background inside dir with TMPDIR=tmp; -> its pid.
local function start_fit(dir, tmp, args)
  local cmd = ("cd %s && TMPDIR=%s %s %s >%s 2>&1 & echo $!"):format(sh_quote(dir), sh_quote(tmp), sh_quote(bbblua),
    args, sh_quote(dir .. "/fit.log"))
  local p = assert(io.popen(cmd))
  local pid = tonumber(p:read("a"):match("%d+"))
  p:close()
  return pid
end

local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

describe("the ensemble's worker folder", function()
  local ensemble = sh_quote(root .. "/scripts/fit.lua") .. " --data table.csv --target y --model ensemble --members 4 --threads 2 --tune off --epochs 400 "
    .. "--min-epochs 400 --every 0 --save model.ckpt"

  it("is made fresh by mkdtemp, mode 0700 with files 0600, and removed at the end", function()
    local dir = fresh_dir()
    local tmp = dir .. "/tmp"
    assert(os.execute("mkdir " .. sh_quote(tmp)))
    small_table(dir .. "/table.csv", 400)
    local pid = start_fit(dir, tmp, ensemble)
    -- watch the folder as another process would, until the fit ends
    local seen = {}
    while alive(pid) do
      local p = assert(io.popen(("stat -c '%%a %%F %%n' %s/bbb-ensemble-* %s/bbb-ensemble-*/* 2>/dev/null")
        :format(sh_quote(tmp), sh_quote(tmp))))
      for line in p:lines() do seen[#seen + 1] = line end
      p:close()
    end
    local left = entries(tmp)
    local log = io.open(dir .. "/fit.log"):read("a")
    local saved = io.open(dir .. "/model.ckpt") ~= nil
    os.execute("rm -rf " .. sh_quote(dir))
    assert.is_true(saved, log)
    assert.is_true(#seen > 0, "the watcher never saw the folder")
    for _, line in ipairs(seen) do
      local mode, kind = line:match("^(%d+) ([%a ]+) ")
      if kind == "directory" then assert.are.equal("700", mode, line)
      else assert.are.equal("600", mode, line) end
    end
    assert.are.equal("", left, "the folder must be gone")
  end)

  it("goes, with every worker, when the parent is killed by SIGKILL", function()
    local dir = fresh_dir()
    local tmp = dir .. "/tmp"
    assert(os.execute("mkdir " .. sh_quote(tmp)))
    small_table(dir .. "/table.csv", 400)
    local pid = start_fit(dir, tmp, ensemble:gsub("--epochs 400 %-%-min%-epochs 400", "--epochs 100000 --min-epochs 100000"))
    local function workers()
      local p = assert(io.popen("pgrep -f " .. sh_quote("[m]ember_job.*" .. tmp)))
      local n = 0
      for _ in p:lines() do n = n + 1 end
      p:close()
      return n
    end
    for _ = 1, 600 do
      if workers() == 2 then break end
      os.execute("sleep 0.05")
    end
    local before = workers()
    os.execute("kill -9 " .. pid)
    for _ = 1, 200 do
      if workers() == 0 and entries(tmp) == "" then break end
      os.execute("sleep 0.05")
    end
    local after, left = workers(), entries(tmp)
    os.execute("pkill -9 -f " .. sh_quote("[m]ember_job.*" .. tmp) .. " 2>/dev/null")
    os.execute("rm -rf " .. sh_quote(dir))
    assert.are.equal(2, before, "two workers ran")
    assert.are.equal(0, after, "no worker outlives its parent")
    assert.are.equal("", left, "the workers leave no folder behind")
  end)
end)

describe("module names", function()
  it("under bbb. resolve only in the installed library, never in ./bbb/ of the working folder", function()
    local dir = fresh_dir()
    assert(os.execute("mkdir -p " .. sh_quote(dir .. "/bbb")))
    local f = assert(io.open(dir .. "/bbb/cli.lua", "w"))
    f:write(("io.open(%q, 'w'):close() return {}\n"):format(dir .. "/ran"))
    f:close()
    local status, out = run_in(dir, "-e " .. sh_quote("print(pcall(require, 'bbb.cli'))"))
    local ran = io.open(dir .. "/ran") ~= nil
    os.execute("rm -rf " .. sh_quote(dir))
    assert.are.equal(0, status, out)
    assert.is_false(ran, "the planted bbb/cli.lua ran")
    assert.truthy(out:find("false\tmodule 'bbb.cli' is not part of bbb", 1, true), out)
  end)

  it("a script's own require never looks in the working folder", function()
    local dir = fresh_dir()
    local f = assert(io.open(dir .. "/helper.lua", "w"))
    f:write(("io.open(%q, 'w'):close() return {}\n"):format(dir .. "/ran"))
    f:close()
    local status, out = run_in(dir, "-e " .. sh_quote("print(pcall(require, 'helper')); print(package.path:find('./?', 1, true))"))
    local ran = io.open(dir .. "/ran") ~= nil
    os.execute("rm -rf " .. sh_quote(dir))
    assert.are.equal(0, status, out)
    assert.is_false(ran, "the working folder's helper.lua ran")
    assert.truthy(out:find("false\tmodule 'helper' not found", 1, true), out)
    assert.truthy(out:find("\nnil\n", 1, true), out)
  end)
end)

--- Outputs in the way of the user's files: every file output of every script
-- given as a symbolic link to a file, as another name (hard link) of an
-- input, and as the input itself. Each must be refused before any work, and
-- the file behind it must come out as it went in.
return function(t)
  local S = dofile(t.here .. "/tests/battery/scripts.lua")
  local n = 0
  -- The inputs each script reads, as flag -> fixture; outputs given as one
  -- of these (by any name) would replace the input.
  local INPUTS = {
    fit = { ["--data"] = "fx/small.csv" }, predict = { ["--data"] = "fx/small.csv", ["--model"] = "fx/model.ckpt" },
    prune = { ["--from"] = "fx/mnist.ckpt" }, uci = {}, mnist = {}, ood = {}, regression = {}, grid = {},
    table1 = {}, bandit = {}, figure2 = {}, plot_run = {}, bandit_ablation = {}, bandit_inspect = {},
  }
  local function precious(path, text)
    return function() return t.read(t.work .. "/" .. path) == text end
  end
  for _, script in ipairs(S.script_names()) do
    for _, f in ipairs(S.flags_of(script)) do
      if f.kind == "output" then
        n = n + 1
        local target, link = ("keep%d.txt"):format(n), ("link%d.out"):format(n)
        local text = "precious " .. n
        t.case(("%s --%s a symlink to a file"):format(script, f.flag),
          S.argv(t, script, { ["--" .. f.flag] = true }, { "--" .. f.flag, link }), precious(target, text),
          { refuse = true, prep = function()
            t.write(t.work .. "/" .. target, text)
            t.sh { "ln", "-sf", target, t.work .. "/" .. link }
          end })
        for flag, fixture in pairs(INPUTS[script]) do
          for _, alias in ipairs { "same", "hard link" } do
            n = n + 1
            local copy, name = ("in%d.dat"):format(n), ("alias%d.dat"):format(n)
            local out = alias == "same" and copy or name
            t.case(("%s --%s naming %s (%s)"):format(script, f.flag, flag, alias),
              S.argv(t, script, { ["--" .. f.flag] = true, [flag] = true }, { flag, copy, "--" .. f.flag, out }),
              function() return t.read(t.work .. "/" .. copy) == t.read(t.work .. "/" .. fixture) end,
              { refuse = true, prep = function()
                t.sh { "cp", fixture, copy }
                if alias ~= "same" then t.sh { "ln", "-f", copy, name } end
              end })
          end
        end
      end
    end
  end
end

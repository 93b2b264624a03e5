--- Bad values for every flag of every script: each must be refused with a
-- clear message before any work.
return function(t)
  local S = dofile(t.here .. "/tests/battery/scripts.lua")
  for _, script in ipairs(S.script_names()) do
    for _, f in ipairs(S.flags_of(script)) do
      for _, value in ipairs(S.KINDS[f.kind]) do
        t.case(("%s --%s %q"):format(script, f.flag, value), S.argv(t, script, { ["--" .. f.flag] = true }, { "--" .. f.flag, value }))
      end
    end
  end
end

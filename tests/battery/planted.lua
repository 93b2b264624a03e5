--- Saved models whose metadata names a Lua prior file that the battery
-- planted (fx/evil.lua, which writes the PWNED marker when run), by an
-- absolute path, by a relative one and as a file in the working folder,
-- with and without a hash. Opening such a model by any loader must refuse
-- it (the prior must come from the user for this run) and run nothing.
local json = require "bbb.json"

-- The checkpoint at path with every prior in its metadata replaced by a Lua
-- prior naming `file` (and `hash`, when given).
local function planted(text, file, hash)
  local n = string.unpack("<I8", text)
  local header = json.decode(text:sub(9, 8 + n))
  local lua_prior = hash and ('{"kind":"lua","file":%q,"hash":%q}'):format(file, hash)
    or ('{"kind":"lua","file":%q}'):format(file)
  local meta = header.__metadata__
  meta.bbb = meta.bbb:gsub('"prior":{[^}]*}', function() return '"prior":' .. lua_prior end)
    :gsub('"prior":"[^"]*"', function() return ('"prior":%q'):format(file) end)
  local h = json.encode(header)
  return string.pack("<I8", #h) .. h .. text:sub(9 + n)
end

return function(t)
  t.write(t.work .. "/evil.lua", t.read(t.fx .. "/evil.lua"))
  local files = { t.fx .. "/evil.lua", "evil.lua", "fx/evil.lua" }
  local k = 0
  local function plant(source, file, hash)
    k = k + 1
    local path = ("planted%d.ckpt"):format(k)
    return path, function()
      t.write(t.work .. "/" .. path, planted(assert(t.read(t.work .. "/" .. source), source), file, hash))
    end
  end
  local B, S = t.bbblua, t.S
  for _, file in ipairs(files) do
    for _, hash in ipairs { false, true } do
      local h = hash and ("0"):rep(64) or nil
      local tag = ("%s%s"):format(file:find("^/") and "absolute path" or file, hash and ", with a hash" or "")
      for _, source in ipairs { "fx/mnist.ckpt", "fx/run.ckpt", "fx/model.ckpt" } do
        local path, prep = plant(source, file, h)
        t.case(("bbb.load of %s naming %s"):format(source, tag), t.lua(("bbb.load(%q)"):format(path)), "refuse", { prep = prep })
      end
      local path, prep = plant("fx/model.ckpt", file, h)
      t.case("predict --model naming " .. tag, { B, S .. "predict.lua", "--model", path, "--data", "fx/small.csv",
        "--out", path .. ".csv" }, "refuse", { prep = prep })
      path, prep = plant("fx/mnist.ckpt", file, h)
      t.case("prune --from naming " .. tag, { B, S .. "prune.lua", "--from", path, "--test-limit", "50", "--no-plot",
        "--out", path .. ".p" }, "refuse", { prep = prep })
      path, prep = plant("fx/mnist.ckpt", file, h)
      t.case("ood --from-bbb naming " .. tag, { B, S .. "ood.lua", "--from-bbb", path, "--limit", "200",
        "--test-limit", "100", "--epochs", "1", "--base-epochs", "1", "--hidden", "8", "--base-hidden", "8",
        "--out", path .. ".o" }, "refuse", { prep = prep })
      path, prep = plant("fx/run.ckpt", file, h)
      t.case("plot_run naming " .. tag, { B, S .. "plot_run.lua", "fx/run.jsonl", path, "--out", path .. ".plot" },
        "refuse", { prep = prep })
      path, prep = plant("fx/run.ckpt", file, h)
      t.case("mnist --resume naming " .. tag, { B, S .. "mnist.lua", "--resume", path, "--epochs", "2" }, "refuse",
        { prep = prep })
    end
  end
end

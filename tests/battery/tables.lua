--- Tables a careless user brings to fit.lua and predict.lua. Those that hold
-- a mistake must be refused with a message naming it; the odd but valid ones
-- (quotes, CRLF, a byte-order mark, an empty last line) must be read.
local GOOD = "y,a,b\n1,2,3\n2,3,4\n3,4,5\n4,5,7\n5,6,8\n6,7,8\n7,8,10\n8,9,11\n9,10,12\n10,11,14\n"
  .. ("11,12,13\n12,13,15\n13,14,16\n14,15,16\n15,16,18\n"):rep(4)

local function rows(n, fmt)
  local t = { "y,a,b" }
  for i = 1, n do t[#t + 1] = fmt(i) end
  return table.concat(t, "\n") .. "\n"
end

-- name -> text, must be refused by fit.lua --target y
local BAD = {
  ["empty file"] = "",
  ["header only"] = "y,a,b\n",
  ["no target column"] = GOOD:gsub("^y,", "z,"),
  ["duplicate column names"] = GOOD:gsub("^y,a,b", "y,a,a"),
  ["a row too long"] = GOOD .. "1,2,3,4\n",
  ["a row too short"] = GOOD .. "1,2\n",
  ["a text cell in a numeric column (first row)"] = GOOD:gsub("\n1,2,3\n", "\n1,2x,3\n"),
  ["a text cell in a numeric column (last row)"] = GOOD:gsub("15,16,18\n$", "15,16x,18\n"),
  ["nan in the target"] = GOOD:gsub("\n5,6,8\n", "\nnan,6,8\n"),
  ["inf in a feature"] = GOOD:gsub("\n5,6,8\n", "\n5,inf,8\n"),
  ["1e39 in a feature"] = GOOD:gsub("\n5,6,8\n", "\n5,1e39,8\n"),
  ["a missing target"] = GOOD:gsub("\n5,6,8\n", "\n,6,8\n"),
  ["a constant target"] = rows(20, function(i) return ("3,%d,%d"):format(i, i * 2 % 7) end),
  ["one row"] = "y,a,b\n1,2,3\n",
  ["a zero byte"] = GOOD:gsub("\n5,6,8\n", "\n5,6\0,8\n"),
  ["an unclosed quote"] = GOOD:gsub("\n5,6,8\n", '\n5,"6,8\n'),
  ["a thousands separator"] = GOOD:gsub("\n5,6,8\n", '\n5,"1,234",8\n'),
  ["only the target column"] = "y\n1\n2\n3\n4\n5\n6\n7\n8\n",
  ["an empty header name"] = GOOD:gsub("^y,a,b", "y,,b"),
  ["binary garbage"] = ("\0\1\2\255"):rep(300),
}

-- name -> text, must be read: fit.lua must succeed
local ODD = {
  ["CRLF line ends"] = GOOD:gsub("\n", "\r\n"),
  ["a byte-order mark"] = "\239\187\191" .. GOOD,
  ["quoted cells"] = GOOD:gsub("\n5,6,8\n", '\n"5","6","8"\n'),
  ["a missing final newline"] = GOOD:sub(1, -2),
  ["spaces around cells"] = GOOD:gsub("\n5,6,8\n", "\n 5 , 6 , 8 \n"),
  ["negative and exponent numbers"] = GOOD:gsub("\n5,6,8\n", "\n-5e0,6.0E0,+8\n"),
}

return function(t)
  t.write(t.fx .. "/abc.csv", GOOD)
  t.case("fixture: fit on columns y, a, b", { t.bbblua, t.S .. "fit.lua", "--data", "fx/abc.csv", "--target", "y",
    "--epochs", "2", "--threads", "1", "--save", "fx/abc.ckpt" }, "ok", { serial = true })
  local k = 0
  local function add(name, text, check)
    k = k + 1
    local file = ("tbl%d.csv"):format(k)
    local prep = function() t.write(t.work .. "/" .. file, text) end
    -- fit.lua leaves out rows without a target, saying how many
    t.case("fit: " .. name, { t.bbblua, t.S .. "fit.lua", "--data", file, "--target", "y", "--epochs", "2",
      "--threads", "1", "--save", file .. ".ckpt" }, name == "a missing target" and "robust" or check, { prep = prep })
    if check == "refuse" then
      -- predict reads no target: a table whose mistake is in the target, or
      -- that holds one row, may be read
      local target_only = name:find("target") or name == "one row"
      t.case("predict: " .. name, { t.bbblua, t.S .. "predict.lua", "--model", "fx/abc.ckpt", "--data", file,
        "--out", file .. ".out", "--threads", "1" }, target_only and "robust" or "refuse", { prep = prep })
      -- uci.lua leaves out rows with a missing cell, saying how many
      t.case("uci: " .. name, { t.bbblua, t.S .. "uci.lua", "--sets", file .. ":y", "--splits", "1", "--epochs", "2",
        "--methods", "mlp", "--threads", "1", "--out", file .. ".uci" }, name:find("missing") and "robust" or "refuse",
        { prep = prep })
      -- the reader may take a degenerate table (one row, a constant target)
      -- that the scripts refuse to train on
      t.case("read_csv: " .. name, t.lua(("bbb.data.read_csv(%q, {target = 'y'})"):format(file)), "robust", { prep = prep })
    end
  end
  local names = {}
  for name in pairs(BAD) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do add(name, BAD[name], "refuse") end
  names = {}
  for name in pairs(ODD) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do add(name, ODD[name], "ok") end
end

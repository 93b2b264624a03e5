--- INT, TERM, HUP and QUIT to every script that runs long, two seconds after
-- its first output: each must end promptly with 128 + N and leave no process behind.
local LONG = {
  mnist = { "--limit", "300", "--test-limit", "100", "--hidden", "8", "--threads", "1", "--epochs", "100000" },
  fit = { "--data", "fx/small.csv", "--target", "y", "--epochs", "100000", "--patience", "100000", "--threads", "1" },
  regression = { "--task", "toy", "--steps", "100000", "--no-mlp", "--threads", "1" },
  ood = { "--limit", "300", "--test-limit", "100", "--hidden", "8", "--base-hidden", "8", "--epochs", "100000", "--threads", "1" },
  grid = { "--epochs", "100000", "--limit", "300", "--val", "50", "--hidden", "8", "--jobs", "2", "--lr", "0.001,0.002",
    "--pi", "0.25", "--log-sigma1", "0", "--log-sigma2", "6", "--samples", "1" },
  uci = { "--sets", "fx/small.csv:y", "--splits", "5", "--epochs", "100000", "--methods", "mlp", "--patience", "100000", "--threads", "1" },
  bandit = { "--steps", "10000000", "--repeats", "2", "--jobs", "2", "--agents", "eps5", "--no-plot" },
  figure2 = { "--epochs", "100000", "--limit", "300", "--test-limit", "100", "--threads", "1", "--units", "8", "--round", "50000", "--val", "50" },
  table1 = { "--epochs", "100000", "--limit", "300", "--threads", "1", "--jobs", "1", "--methods", "sgd" },
}
local SIGNALS = { INT = 2, TERM = 15, HUP = 1, QUIT = 3 }

return function(t)
  local scripts, k = {}, 0
  for name in pairs(LONG) do scripts[#scripts + 1] = name end
  table.sort(scripts)
  for _, script in ipairs(scripts) do
    for _, sig in ipairs { "INT", "TERM", "HUP", "QUIT" } do
      k = k + 1
      -- every output of the case goes under its own folder, so a process
      -- left running is found by that name
      local dir = ("sig%d_%s"):format(k, script)
      local argv = { t.bbblua, t.S .. script .. ".lua" }
      for _, w in ipairs(LONG[script]) do argv[#argv + 1] = w end
      local out_flag = ({ grid = "--results", figure2 = "--dir", fit = "--save", table1 = "--out", uci = "--out" })[script]
        or (script == "mnist" and "--log") or "--out"
      argv[#argv + 1] = out_flag
      argv[#argv + 1] = dir .. "/" .. (script == "grid" and "g.jsonl" or script == "table1" and "t.json" or script == "mnist" and "x.jsonl" or script == "regression" and "x.png" or "x")
      local n = SIGNALS[sig]
      t.case(("%s ends on SIG%s with %d"):format(script, sig, 128 + n), argv, nil,
        { expect_exit = 128 + n, signal = n, after_output = true, delay = 2, timeout = 60, serial = true, leftover = function()
          return t.leftover()
        end })
    end
  end
end

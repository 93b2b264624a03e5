--- Corrupted files for every reader: checkpoints (bbb.load, predict --model,
-- prune --from), tables (fit --data), IDX images, R data and JSON logs, each
-- cut short, overwritten in places or grown with garbage. A corrupted file
-- may still read (a flipped byte in the weights is a valid file), so each
-- case may succeed; it must never crash or hang, and a refusal must be clear.
local N_CUT, N_FLIP, N_GROW = 25, 40, 5

-- A deterministic generator, so the same files are made for every build.
local function rng(seed)
  local s = seed
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    return s % n + 1
  end
end

local function mutations(text, seed)
  local r, list = rng(seed), {}
  local len = #text
  for i = 1, N_CUT do
    -- cuts: the first bytes one by one (headers), then anywhere
    local at = i <= 12 and (i - 1) * math.max(1, len // 200) or r(len) - 1
    list[#list + 1] = { "cut at " .. at, text:sub(1, at) }
  end
  for i = 1, N_FLIP do
    -- headers hold the sizes and offsets: most flips go there
    local span = i % 2 == 0 and math.min(len, 256) or len
    local at, width = r(span), r(8)
    local bytes = {}
    for k = 1, width do bytes[k] = string.char(({ 0, 255, 127, 128, 48, 123, 34, 10 })[r(8)]) end
    list[#list + 1] = { ("%d bytes set at %d"):format(width, at), text:sub(1, at - 1) .. table.concat(bytes) .. text:sub(at + width) }
  end
  for i = 1, N_GROW do
    list[#list + 1] = { "grown by " .. i * 1000, text .. ("\255\0garbage"):rep(i * 100) }
  end
  return list
end

return function(t)
  local readers = {
    { name = "bbb.load", source = "fx/mnist.ckpt", ext = ".ckpt", argv = function(f) return t.lua(("bbb.load(%q)"):format(f)) end },
    { name = "predict --model", source = "fx/model.ckpt", ext = ".ckpt", argv = function(f)
      return { t.bbblua, t.S .. "predict.lua", "--model", f, "--data", "fx/small.csv", "--out", f .. ".csv", "--threads", "1" }
    end },
    { name = "fit --data", source = "fx/small.csv", ext = ".csv", argv = function(f)
      return { t.bbblua, t.S .. "fit.lua", "--data", f, "--target", "y", "--epochs", "1", "--threads", "1" }
    end },
    { name = "predict --data", source = "fx/small.csv", ext = ".csv", argv = function(f)
      return { t.bbblua, t.S .. "predict.lua", "--model", "fx/model.ckpt", "--data", f, "--out", f .. ".out.csv", "--threads", "1" }
    end },
    { name = "load_idx labels", source = "data/mnist/t10k-labels-idx1-ubyte", ext = ".idx", head = 2008, argv = function(f)
      return t.lua(("bbb.core.load_idx(%q, 1, 1, -1)"):format(f))
    end },
    { name = "load_idx images", source = "data/mnist/t10k-images-idx3-ubyte", ext = ".idx", head = 16 + 784 * 4, argv = function(f)
      return t.lua(("bbb.core.load_idx(%q, 1 / 126, 0, -1)"):format(f))
    end },
    { name = "load_r", source = "data/r/mlbench/Glass.rda", ext = "/Glass.rda", argv = function(f)
      return t.lua(("bbb.data.load_r(%q, 'Glass')"):format(f:match("^(.*)/")))
    end },
    { name = "plot_run log", source = "fx/run.jsonl", ext = ".jsonl", argv = function(f)
      return { t.bbblua, t.S .. "plot_run.lua", f, "--out", f .. ".plot" }
    end },
    { name = "prune --from", source = "fx/mnist.ckpt", ext = ".ckpt", argv = function(f)
      return { t.bbblua, t.S .. "prune.lua", "--from", f, "--test-limit", "50", "--no-plot", "--threads", "1", "--out", f .. ".p" }
    end },
  }
  for k, r in ipairs(readers) do
    local list
    for i = 1, N_CUT + N_FLIP + N_GROW do
      local path = ("mut/%d_%d%s"):format(k, i, r.ext)
      t.case(("%s of a corrupted file (%d)"):format(r.name, i), r.argv(path), "robust", { prep = function()
        -- fixtures are trained by the first cases, so the copies are made here
        if not list then
          local text = assert(t.read(t.work .. "/" .. r.source), r.source)
          if r.head then
            -- an IDX header's count must match the data kept
            local n = (#text >= r.head) and ((r.head - (r.ext == ".idx" and r.head > 3000 and 16 or 8)) //
              (r.head > 3000 and 784 or 1)) or 0
            text = text:sub(1, 4) .. string.pack(">I4", n) .. text:sub(9, r.head)
          end
          list = mutations(text, 1000 + k)
        end
        t.sh { "mkdir", "-p", t.work .. "/" .. path:match("^(.*)/") }
        t.write(t.work .. "/" .. path, list[i][2])
      end })
    end
  end
end

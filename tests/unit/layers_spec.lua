-- The layers of src/ (DESIGN.md, "Layers, visible in the folders") and the
-- rule that keeps them so, read from the #include lines of every file under
-- src/engine, src/bayes and src/io: the engine includes nothing of bayes, io
-- or the binding, nor Lua's headers; bayes nothing of io or the binding; io
-- nothing of bayes or the binding. The tensor sits below autograd, so
-- tensor.c and tensor.h reach no autograd.h, not even through another
-- header. A broken rule fails naming the file and the line.
local h = require "helpers"

-- the layers each checked layer may include
local may = {
  engine = { engine = true },
  bayes = { engine = true, bayes = true },
  io = { engine = true, io = true },
}
local may_text = {
  engine = "the engine includes only engine headers",
  bayes = "bayes includes only engine and bayes headers",
  io = "io includes only engine and io headers",
}
local layer_name = { engine = "the engine", bayes = "bayes", io = "io" }
local lua_headers = { ["lua.h"] = true, ["lauxlib.h"] = true, ["lualib.h"] = true,
                      ["luaconf.h"] = true }

--- normalize(path) -> path without "." and ".." steps
local function normalize(path)
  local parts = {}
  for p in path:gmatch("[^/]+") do
    if p == ".." then table.remove(parts) elseif p ~= "." then parts[#parts + 1] = p end
  end
  return table.concat(parts, "/")
end

local function exists(root, path)
  local f = io.open(root .. "/" .. path)
  if f then f:close() end
  return f ~= nil
end

--- includes(root, file) -> the #include lines of file (relative to root):
-- { line, text, name, quoted, target }, target being the file under src/
-- the compiler finds for it (a quoted name beside the including file first,
-- then from src/, the include path), nil for a header from outside.
local function includes(root, file)
  local list, n = {}, 0
  for text in io.lines(root .. "/" .. file) do
    n = n + 1
    local open, name = text:match('^%s*#%s*include%s*([<"])([^>"]+)')
    if open then
      local beside = normalize(file:match("^(.*)/") .. "/" .. name)
      local from_src = normalize("src/" .. name)
      local target = open == '"' and exists(root, beside) and beside
        or exists(root, from_src) and from_src or nil
      list[#list + 1] = { line = n, text = text, name = name, quoted = open == '"', target = target }
    end
  end
  return list
end

local function layer_of(path) return path and path:match("^src/([^/]+)/") end

--- layer_violations(root, files) -> "file:line: text (why)" for every
-- include that breaks the rule
local function layer_violations(root, files)
  local bad = {}
  for _, file in ipairs(files) do
    local layer = layer_of(file)
    for _, inc in ipairs(includes(root, file)) do
      local why
      if lua_headers[inc.name:match("[^/]+$")] then
        why = layer_name[layer] .. " never includes Lua's headers"
      elseif inc.quoted and not inc.target then
        why = "no such header beside it or under src/"
      elseif inc.target and not may[layer][layer_of(inc.target)] then
        why = may_text[layer]
      end
      if why then bad[#bad + 1] = ("%s:%d: %s (%s)"):format(file, inc.line, inc.text, why) end
    end
  end
  return bad
end

--- path_to(root, file, goal) -> the include lines by which file reaches
-- goal, directly or through other headers, or nil when it does not
local function path_to(root, file, goal, seen)
  seen = seen or {}
  if seen[file] then return nil end
  seen[file] = true
  for _, inc in ipairs(includes(root, file)) do
    local step = ("%s:%d: %s"):format(file, inc.line, inc.text)
    if inc.target == goal then return { step } end
    local rest = inc.target and path_to(root, inc.target, goal, seen)
    if rest then
      table.insert(rest, 1, step)
      return rest
    end
  end
end

--- sources(root) -> every .c and .h under src/engine, src/bayes and src/io
local function sources(root)
  -- without LD_PRELOAD: under scripts/sanitize, find and sort would report their own leaks
  local out, status = h.sh(("env -u LD_PRELOAD sh -c %s")
    :format(h.q(("cd %s && find src/engine src/bayes src/io -name '*.[ch]' | sort"):format(h.q(root)))))
  assert.are.equal(0, status, out)
  local files = {}
  for f in out:gmatch("[^\n]+") do files[#files + 1] = f end
  return files
end

describe("src's layers", function()
  local files = sources(h.root)

  it("has files in each layer (the scan sees them)", function()
    local per = {}
    for _, f in ipairs(files) do per[layer_of(f)] = (per[layer_of(f)] or 0) + 1 end
    for layer in pairs(may) do assert.is_true((per[layer] or 0) > 0, "no files in src/" .. layer) end
    assert.is_true(exists(h.root, "src/engine/tensor.c") and exists(h.root, "src/engine/autograd.h"))
  end)

  it("engine, bayes and io include only the layers below them", function()
    local bad = layer_violations(h.root, files)
    assert(#bad == 0, "\n" .. table.concat(bad, "\n"))
  end)

  it("the tensor knows nothing of autograd", function()
    for _, f in ipairs { "src/engine/tensor.c", "src/engine/tensor.h" } do
      local chain = path_to(h.root, f, "src/engine/autograd.h")
      assert(not chain, chain and "\n" .. table.concat(chain, "\n  includes: "))
    end
  end)

  it("names the file and line of a broken rule", function()
    local dir = h.sh("mktemp -d"):gsub("\n$", "")
    local tree = {
      ["src/engine/autograd.h"] = "",
      ["src/engine/ops.h"] = '#include "engine/autograd.h"\n',
      ["src/engine/tensor.c"] = '#include <stdio.h>\n#include "ops.h"\n',
      ["src/engine/gemm.c"] = '#include <cblas.h>\n#include "mlp.h"\n',
      ["src/engine/bad.c"] = '#include "engine/ops.h"\n#include "bayes/bayes.h"\n#include <lua.h>\n',
      ["src/bayes/bayes.h"] = '#include "../io/idx.h"\n',
      ["src/io/idx.h"] = '#include "engine/ops.h"\n# include "lua/lbbb.h"\n',
      ["src/lua/lbbb.h"] = "",
    }
    for path, text in pairs(tree) do
      h.sh("mkdir -p " .. h.q(dir .. "/" .. path:match("^(.*)/")))
      h.write(dir .. "/" .. path, text)
    end
    local bad = layer_violations(dir, { "src/bayes/bayes.h", "src/engine/bad.c",
                                        "src/engine/gemm.c", "src/engine/ops.h",
                                        "src/io/idx.h" })
    local chain = path_to(dir, "src/engine/tensor.c", "src/engine/autograd.h")
    h.sh("rm -rf " .. h.q(dir))
    assert.are.same({
      'src/bayes/bayes.h:1: #include "../io/idx.h" (bayes includes only engine and bayes headers)',
      'src/engine/bad.c:2: #include "bayes/bayes.h" (the engine includes only engine headers)',
      "src/engine/bad.c:3: #include <lua.h> (the engine never includes Lua's headers)",
      'src/engine/gemm.c:2: #include "mlp.h" (no such header beside it or under src/)',
      'src/io/idx.h:2: # include "lua/lbbb.h" (io includes only engine and io headers)',
    }, bad)
    assert.are.same({ 'src/engine/tensor.c:2: #include "ops.h"',
                      'src/engine/ops.h:1: #include "engine/autograd.h"' }, chain)
  end)
end)

-- doc/reference/ is generated from the doc comments: the committed pages
-- must be what the generator writes now, and every public name must have a
-- doc comment. To regenerate: build/bbblua cmake/gendoc.lua --reference doc/reference
local helpers = require "helpers"

describe("doc/reference", function()
  local gendoc = dofile(helpers.root .. "/cmake/gendoc.lua")
  local pages, missing = gendoc.reference(helpers.root)

  it("has a doc comment for every public name", function()
    assert.are.same({}, missing)
  end)

  it("is what the command writes into a fresh folder, which --check accepts", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(require("bbb.core").sys.mkdir_p(dir))
    local problems, n = gendoc.reference_cli(dir, false)
    assert.are.same({}, problems)
    for name, text in pairs(pages) do
      assert.truthy(helpers.read(dir .. "/" .. name) == text, name .. " written differs from the generated text")
    end
    assert.are.same({}, (gendoc.reference_cli(dir, true)))
    helpers.write(dir .. "/nn.md", "stale")
    assert.are.same({ "differs: " .. dir .. "/nn.md" }, (gendoc.reference_cli(dir, true)))
    os.execute(("rm -rf %q"):format(dir))
    assert.truthy(n >= 10)
  end)

  it("holds the pages the generator writes, and no others", function()
    local names = {}
    for name in pairs(pages) do names[#names + 1] = name end
    assert.truthy(#names >= 10, "too few pages")
    for _, name in ipairs(names) do
      local old = helpers.read(helpers.root .. "/doc/reference/" .. name)
      assert.truthy(old, "doc/reference/" .. name .. " is missing: regenerate")
      assert.truthy(old == pages[name], "doc/reference/" .. name .. " differs: regenerate")
    end
    local p = assert(io.popen(("ls %q"):format(helpers.root .. "/doc/reference")))
    for f in p:lines() do
      assert.truthy(pages[f], "doc/reference/" .. f .. " is not generated: remove it")
    end
    p:close()
  end)

  it("reads in the REPL's help with its tags as words", function()
    local untag = require("bbb.help").untag
    assert.are.equal("f(x): text\nargument x a number\nerror: f: bad x\nexample:\n  f(1)",
      untag("f(x): text\n@param x a number\n@raise f: bad x\n@usage\n  f(1)"))
    assert.are.equal("mail a@b", untag("mail a@b"))
  end)

  it("gives every entry a signature, and the generator's tags their sections", function()
    local genref = dofile(helpers.root .. "/cmake/genref.lua")
    local out = table.concat(genref.render_entry { name = "m.f", key = "f", sigs = {},
      block = { "f(a, b) -> c: what f does.", "@param a the first", "@raise m.f: when a is bad",
        "@usage", "  print(1)" } }, "\n")
    helpers.has(out, "f(a, b) -> c\n")
    helpers.has(out, "- `a`: the first")
    helpers.has(out, "**Errors**\n\n- m.f: when a is bad")
    helpers.has(out, "```lua\nprint(1)\n```")
    for name, text in pairs(pages) do
      if name ~= "README.md" then
        for entry in text:gmatch("### [^\n]+\n\n([^#]*)") do
          assert.truthy(entry:match("^```text\n[^\n]+"), name .. ": an entry without a signature:\n" .. entry)
        end
      end
    end
  end)
end)

-- bbb.app.cli: flag converters check type and range; nothing is coerced.
local argparse = require "argparse"
local cli = require "bbb.app.cli"

-- The flags of the experiment scripts, declared with the cli converters.
local function parser()
  local p = argparse("t", "flags")
  p:option("--hidden", "", "400"):convert(cli.positive_integer())
  p:option("--limit"):convert(cli.positive_integer())
  p:option("--seed", "", "1"):convert(cli.nonnegative_integer())
  p:option("--threads", "", "1"):convert(cli.threads())
  p:option("--samples", "", "1"):convert(cli.positive_integer())
  p:option("--epochs", "", "1"):convert(cli.positive_integer())
  p:option("--lr", "", "0.001"):convert(cli.positive_number())
  p:option("--kl-weight", "", "uniform"):convert(cli.choice_or_number({ "uniform", "blundell" }, { min = 0 }))
  p:option("--pixel-scale", "", "126"):convert(cli.positive_number())
  p:option("--rho-init", "", "-5"):convert(cli.number())
  p:option("--pi", "", "0.25"):convert(cli.probability())
  p:option("--optim", "", "adam"):convert(cli.choice { "adam", "sgd" })
  p:option("--out"):convert(cli.output_path { ext = { "png", "svg" } })
  p:option("--channels", "", "16,32"):convert(cli.int_list(2, { max = 1024 }))
  p:flag("--verbose")
  -- argparse reports errors by printing and exiting; make them catchable.
  function p:error(msg) error(msg, 0) end
  return p
end

local function parse(argv) return cli.parse(parser(), argv) end

local function rejects(argv, text)
  local ok, err = pcall(parse, argv)
  assert.is_false(ok, "accepted " .. table.concat(argv, " "))
  assert.truthy(tostring(err):find(text, 1, true), ("%q not in %q"):format(text, tostring(err)))
end

describe("cli converters through cli.parse", function()
  it("takes a list of integers A,B and refuses anything else, naming the flag", function()
    assert.are.equal("8,64", parse({ "--channels", "8,64" }).channels)
    assert.are.same({ 8, 64 }, cli.ints(parse({ "--channels", "8,64" }).channels))
    rejects({ "--channels", "8" }, "--channels: expected 2 integers as A,B, got '8'")
    rejects({ "--channels", "8,64,2" }, "--channels: expected 2 integers as A,B, got '8,64,2'")
    rejects({ "--channels", "8,x" }, "--channels: expected 2 integers as A,B, got '8,x'")
    rejects({ "--channels", "8,-1" }, "--channels: expected 2 integers as A,B, got '8,-1'")
    rejects({ "--channels", "0,4" }, "--channels: '0,4' is out of range: each must be in 1..1024")
    rejects({ "--channels", "8,2000" }, "--channels: '8,2000' is out of range: each must be in 1..1024")
  end)
  it("rejects integers that are not integers, naming the flag and the value", function()
    rejects({ "--hidden", "1e19" }, "--hidden: expected an integer in decimal digits, got '1e19'")
    rejects({ "--limit", "2.5" }, "--limit: expected an integer in decimal digits, got '2.5'")
    rejects({ "--seed", "2.5" }, "--seed: expected an integer in decimal digits, got '2.5'")
    rejects({ "--threads", "2.5" }, "--threads: expected an integer in decimal digits, got '2.5'")
    rejects({ "--samples", "2.5" }, "--samples: expected an integer in decimal digits, got '2.5'")
    rejects({ "--limit", "0x100" }, "--limit: expected an integer in decimal digits, got '0x100'")
    rejects({ "--hidden", "99999999999999999999" }, "--hidden: integer '99999999999999999999' is too large")
    rejects({ "--hidden", "0" }, "--hidden: integer '0' is out of range: must be in [1, inf)")
    rejects({ "--seed", "-1" }, "--seed: integer '-1' is out of range: must be in [0, inf)")
    rejects({ "--threads", "100000" }, "--threads: integer '100000' is out of range")
  end)

  it("rejects non-finite and out-of-range numbers", function()
    rejects({ "--epochs", "1e999" }, "--epochs: expected an integer in decimal digits, got '1e999'")
    rejects({ "--lr", "1e999" }, "--lr: number '1e999' is not finite")
    rejects({ "--kl-weight", "1e999" }, "--kl-weight: expected uniform, blundell or a number, got '1e999' (number '1e999' is not finite)")
    rejects({ "--pixel-scale", "0" }, "--pixel-scale: number '0' is out of range: must be in (0, inf)")
    rejects({ "--lr", "nan" }, "--lr: expected a number, got 'nan'")
    rejects({ "--lr", "inf" }, "--lr: expected a number, got 'inf'")
    rejects({ "--lr", "0x10" }, "--lr: expected a number, got '0x10'")
    rejects({ "--lr", "1..2" }, "--lr: expected a number, got '1..2'")
    rejects({ "--pi", "1" }, "--pi: number '1' is out of range: must be in (0, 1)")
    rejects({ "--optim", "adamw" }, "--optim: expected one of adam, sgd, got 'adamw'")
  end)

  it("takes negative values after a space", function()
    local args = parse { "--rho-init", "-3" }
    assert.are.equal(-3, args.rho_init)
    assert.are.equal("integer", math.type(args.rho_init))
    assert.are.equal(-0.5, parse({ "--rho-init", "-0.5" }).rho_init)
    assert.are.equal(-1e-3, parse({ "--rho-init", "-1e-3" }).rho_init)
    assert.are.equal(-3, parse({ "--rho-init=-3" }).rho_init)
    assert.are.equal(-5, parse({}).rho_init)   -- the default goes through the converter too
    rejects({ "--lr", "-3" }, "--lr: number '-3' is out of range: must be in (0, inf)")
    -- a flag without a value is not glued to a following number
    rejects({ "--verbose", "-3" }, "unknown option '-3'")
  end)

  it("returns checked values of the right type", function()
    local args = parse { "--hidden", "1200", "--lr", "1e-3", "--kl-weight", "0.5", "--seed", "0", "--limit", "+7" }
    assert.are.equal(1200, args.hidden)
    assert.are.equal("integer", math.type(args.hidden))
    assert.are.equal(1e-3, args.lr)
    assert.are.equal(0.5, args.kl_weight)
    assert.are.equal(0, args.seed)
    assert.are.equal(7, args.limit)
    assert.are.equal("blundell", parse({ "--kl-weight", "blundell" }).kl_weight)
    assert.are.equal(126, parse({}).pixel_scale)
  end)
end)

describe("cli.output_path", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p '" .. dir .. "'")
  teardown(function() os.execute("chmod -R u+w '" .. dir .. "'; rm -rf '" .. dir .. "'") end)

  it("accepts a new file, also in folders still to be created", function()
    assert.are.equal(dir .. "/a.png", parse({ "--out", dir .. "/a.png" }).out)
    assert.are.equal(dir .. "/x/y/a.svg", parse({ "--out", dir .. "/x/y/a.svg" }).out)
    assert.is_nil(io.open(dir .. "/x"), "checking must not create anything")
  end)

  it("rejects folders, wrong extensions, unwritable places and control characters", function()
    rejects({ "--out", dir }, "--out: file '" .. dir .. "' must end in .png or .svg")
    os.execute("mkdir -p '" .. dir .. "/d.png'")
    rejects({ "--out", dir .. "/d.png" }, "is a folder, not a file")
    rejects({ "--out", "/proc/nope/a.png" }, "cannot write '/proc/nope/a.png'")
    local f = assert(io.open(dir .. "/file", "w")); f:close()
    rejects({ "--out", dir .. "/file/a.png" }, "is not a folder")
    rejects({ "--out", "a\nb.png" }, "holds a control character")
    if os.execute("test \"$(id -u)\" != 0") then   -- root writes anywhere
      os.execute("mkdir -p '" .. dir .. "/ro' && chmod a-w '" .. dir .. "/ro'")
      rejects({ "--out", dir .. "/ro/a.png" }, "folder '" .. dir .. "/ro' is not writable")
    end
  end)

  it("write_file refuses a device (a write is a rename over a regular file) and makes folders", function()
    local ok, err = pcall(cli.write_file, "/dev/full", { "{\"a\": 1}", "\n" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cli.write_file: cannot write '/dev/full': ", 1, true), err)
    assert.truthy(tostring(err):find("is a device, not a regular file", 1, true), err)
    local path = dir .. "/new/log.json"
    assert.are.equal(path, cli.write_file(path, "{}\n"))
    local g = assert(io.open(path))
    assert.are.equal("{}\n", g:read("a"))
    g:close()
  end)
end)

describe("scripts use the converters", function()
  local build = os.getenv("BBB_BUILD") or "build"
  local root = os.getenv("BBB_ROOT") or "."
  local function run(args)
    local p = assert(io.popen(("cd %q && %q %s 2>&1; echo \"exit=$?\""):format(root, build .. "/bbblua", args)))
    local out = p:read("a")
    p:close()
    return tonumber(out:match("exit=(%d+)%s*$")), out
  end
  it("bench_core and bench_bbb refuse bad flags before doing any work", function()
    for _, case in ipairs {
      { "scripts/bench_core.lua --threads 2.5", "--threads: expected an integer in decimal digits, got '2.5'" },
      { "scripts/bench_core.lua --reps 1e3", "--reps: expected an integer in decimal digits, got '1e3'" },
      { "scripts/bench_bbb.lua --batch 0", "--batch: integer '0' is out of range" },
      { "scripts/bench_bbb.lua --steps 0x10", "--steps: expected an integer in decimal digits, got '0x10'" },
      { "scripts/bench_bbb.lua --estimator nope", "--estimator: expected one of weight, local, flipout, got 'nope'" },
    } do
      local status, out = run(case[1])
      assert.are_not.equal(0, status, out)
      assert.truthy(out:find(case[2], 1, true), out)
    end
  end)
end)

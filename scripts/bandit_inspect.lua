--- bandit_inspect: why a bandit agent still pays regret. For each checkpoint
-- of scripts/bandit.lua (<out>/ckpt/NAME_rRUN.safetensors; BBB and the
-- epsilon-greedy agents), over all 8,124 mushrooms: the poisonous ones its
-- posterior mean would eat and the edible ones it would pass, the regret per
-- step those mistakes cost under its weight draws, and, for every poisonous
-- mushroom the mean eats, what the replay buffer holds of it: only lucky
-- meals (the coin gave +5 every time), at least one -35, or none (the
-- network generalised from other mushrooms).
--   build/bbblua scripts/bandit_inspect.lua out/bandit/ckpt/bbb_r0.safetensors
local recipe = require "bbb.app.recipe"
local bbb = require "bbb"

local parser = recipe.parser("bandit_inspect.lua", "The costly decisions a saved bandit agent would take now, "
  .. "and what its buffer holds of the poisonous mushrooms its mean eats.")
parser:argument("checkpoints", "Checkpoints written by scripts/bandit.lua (<out>/ckpt/*.safetensors)."):args("+")
parser:option("--samples", "Weight draws per mushroom (BBB).", "64"):convert(require("bbb.app.cli").positive_integer { max = 100000 })
parser:option("--data", "The Mushroom .rda file (default: data/mushroom/Mushroom.rda).")
parser:flag("--shared", "Also list the feature values that all the edible mushrooms the mean passes share (and "
  .. "all the poisonous ones it eats), with how many mushrooms have each, how many of those are poisonous, "
  .. "and how many meals of them the buffer holds.")
local args = recipe.parse(parser)

recipe.main("bandit_inspect.lua", function()
  local experiment = require "bbb.app.experiments.bandit_agent"
  local bandit = require "bbb.app.experiments.bandit"
  local data = bbb.data.load_mushroom{ path = args.data }
  print(("%-40s %7s %7s %7s %7s %10s %6s %6s %6s"):format("checkpoint", "step", "poison", "edible",
    "eaten", "regret", "lucky", "mixed", "unseen"))
  print(("%-40s %7s %7s %7s %7s %10s %6s %6s %6s"):format("", "", "eaten", "passed", "/10k", "/step", "", "", ""))
  local shared = {}
  for _, path in ipairs(args.checkpoints) do
    local agent, meta = bandit.load_agent(path, data)
    if not agent.buffer or not agent.predict_actions or meta.agent == "dropout" or meta.agent == "neurallinear" then
      error(("%s: agent %s: only BBB and the epsilon-greedy agents can be inspected"):format(path, meta.agent), 0)
    end
    local m = experiment.mistakes(agent, data, { samples = args.samples })
    local name = #path > 40 and "..." .. path:sub(-37) or path
    print(("%-40s %7d %7d %7d %7.1f %10.4f %6d %6d %6d"):format(name, math.tointeger(meta.env.t) or 0,
      m.poison_eaten, m.edible_passed, m.eat_rate * 1e4, m.eat_rate * 15 + m.pass_rate * 5, m.lucky, m.mixed, m.unseen))
    if args.shared then shared[#shared + 1] = { name = name, m = m } end
  end
  print("poison eaten / edible passed: mushrooms the posterior mean gets wrong; eaten /10k: poisonous meals "
    .. "per 10,000 steps under the weight draws; regret /step: what the mistakes cost per step if learning "
    .. "stopped; lucky / mixed / unseen: the poisonous mushrooms the mean eats, by their meals in the buffer.")
  local xt = #shared > 0 and data.x:totable() or nil   -- once for every list below
  for _, s in ipairs(shared) do
    for _, part in ipairs { { s.m.passed_rows, "edible mushrooms the mean passes" },
                            { s.m.eaten_rows, "poisonous mushrooms the mean eats" } } do
      local rows = part[1]
      if #rows > 0 then
        print(("\n%s: the %d %s all have"):format(s.name, #rows, part[2]))
        print(("  %-38s %10s %10s %12s"):format("feature value", "mushrooms", "poisonous", "buffer meals"))
        for _, f in ipairs(experiment.shared_features(data, rows, s.m.meals, xt)) do
          print(("  %-38s %10d %9.0f%% %12d"):format(f.name, f.total, 100 * f.poisonous / f.total, f.meals))
        end
      end
    end
  end
end)

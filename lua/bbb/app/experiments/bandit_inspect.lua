--- The bandit inspection: what scripts/bandit_inspect.lua runs. Why a
-- bandit agent still pays regret: for each checkpoint of scripts/bandit.lua
-- (BBB and the epsilon-greedy agents), over all 8,124 mushrooms, the
-- poisonous ones its posterior mean would eat and the edible ones it would
-- pass, the regret per step those mistakes cost under its weight draws, and,
-- for every poisonous mushroom the mean eats, what the replay buffer holds
-- of it: only lucky meals, at least one -35, or none.
local recipe = require "bbb.app.recipe"
local flags = require "bbb.app.flags"
local bbb = require "bbb"
local cli = require "bbb.app.cli"

local M = {}

local ROW = "%-40s %7s %7s %7s %7s %10s %6s %6s %6s"

--- parser() -> bandit_inspect.lua's command line.
function M.parser()
  local parser = recipe.parser("bandit_inspect.lua", "The costly decisions a saved bandit agent would take now, "
    .. "and what its buffer holds of the poisonous mushrooms its mean eats.", { defaults = { test_samples = "64" } })
  parser:argument("checkpoints", "Checkpoints written by scripts/bandit.lua (<out>/ckpt/*.safetensors)."):args("+")
  recipe.declare(parser, { "test_samples" })
  flags.option(parser, "--data", "The Mushroom .rda file (default: data/mushroom/Mushroom.rda).")
  flags.flag(parser, "--shared", "Also list the feature values that all the edible mushrooms the mean passes share (and "
    .. "all the poisonous ones it eats), with how many mushrooms have each, how many of those are poisonous, "
    .. "and how many meals of them the buffer holds.")
  return parser
end

--- parse([argv]) -> config: the command line, checked.
function M.parse(argv)
  return recipe.parse(M.parser(), argv or arg)
end

-- The kinds of mistake --shared lists the features of: the rows of
-- mistakes()'s answer, and what the list is of.
local SHARED = { { "passed", "passed_rows", "edible mushrooms the mean passes" },
                 { "eaten", "eaten_rows", "poisonous mushrooms the mean eats" } }

--- run(config) -> result: inspects each checkpoint in turn, printing its
-- row of the table as it is done (each takes --samples draws over every
-- mushroom); result holds data (the mushrooms) and rows ({name, step, m =
-- the agent's mistakes, and with --shared shared = {passed =, eaten =}: the
-- feature values all the edible mushrooms the mean passes share, and all
-- the poisonous ones it eats, as bandit_agent.shared_features gives them}),
-- which report explains and lists. Raises a message for a checkpoint of
-- another agent.
function M.run(args)
  local experiment = require "bbb.app.experiments.bandit_agent"
  local bandit = require "bbb.app.experiments.bandit"
  local data = bbb.data.load_mushroom{ path = args.data }
  print(ROW:format("checkpoint", "step", "poison", "edible", "eaten", "regret", "lucky", "mixed", "unseen"))
  print(ROW:format("", "", "eaten", "passed", "/10k", "/step", "", "", ""))
  local rows = {}
  for _, path in ipairs(args.checkpoints) do
    local agent, meta = bandit.load_agent(path, data)
    if not agent.buffer or not agent.predict_actions or meta.agent == "dropout" or meta.agent == "neurallinear" then
      error(("%s: agent %s: only BBB and the epsilon-greedy agents can be inspected"):format(path, meta.agent), 0)
    end
    local m = experiment.mistakes(agent, data, { samples = args.test_samples })
    local name = #path > 40 and "..." .. path:sub(-37) or path
    local step = math.tointeger(meta.env.t) or 0
    print(("%-40s %7d %7d %7d %7.1f %10.4f %6d %6d %6d"):format(name, step, m.poison_eaten, m.edible_passed,
      m.eat_rate * 1e4, m.eat_rate * 15 + m.pass_rate * 5, m.lucky, m.mixed, m.unseen))
    rows[#rows + 1] = { name = name, step = step, m = m }
  end
  if args.shared then
    local xt = data.x:totable()   -- once for every list below
    for _, s in ipairs(rows) do
      s.shared = {}
      for _, kind in ipairs(SHARED) do
        s.shared[kind[1]] = experiment.shared_features(data, s.m[kind[2]], s.m.meals, xt)
      end
    end
  end
  return { data = data, rows = rows, shared = args.shared }
end

--- report(result): what the columns mean and, with --shared, the feature
-- values that all of an agent's mistakes of one kind share.
function M.report(result)
  print("poison eaten / edible passed: mushrooms the posterior mean gets wrong; eaten /10k: poisonous meals "
    .. "per 10,000 steps under the weight draws; regret /step: what the mistakes cost per step if learning "
    .. "stopped; lucky / mixed / unseen: the poisonous mushrooms the mean eats, by their meals in the buffer.")
  if not result.shared then return end
  for _, s in ipairs(result.rows) do
    for _, kind in ipairs(SHARED) do
      local rows = s.m[kind[2]]
      if #rows > 0 then
        print(("\n%s: the %d %s all have"):format(s.name, #rows, kind[3]))
        print(("  %-38s %10s %10s %12s"):format("feature value", "mushrooms", "poisonous", "buffer meals"))
        for _, f in ipairs(s.shared[kind[1]]) do
          print(("  %-38s %10d %9.0f%% %12d"):format(f.name, f.total, 100 * f.poisonous / f.total, f.meals))
        end
      end
    end
  end
end

return M

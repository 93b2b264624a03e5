--- Uncertainty under dataset shift (Ovadia et al. 2019): each method's
-- accuracy, NLL, Brier score and ECE on rotated and translated test images,
-- and out-of-distribution detection by its confidence.
-- bbblua scripts/shift.lua --help
local recipe = require "bbb.app.recipe"
local shift = require "bbb.app.experiments.shift"

recipe.main("shift.lua", function()
  local result = shift.run(shift.parse(arg))
  shift.report(result)
  shift.plot(result)
end)

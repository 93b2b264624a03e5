--- Weight pruning by signal-to-noise ratio (Blundell et al. 2015, section
-- 5.1): removes growing fractions of a trained Bayesian network's weights,
-- lowest |mu| / sigma first, and reports the test error with posterior means
-- and with an MC ensemble, beside pruning by |mu| alone.
-- bbblua scripts/prune.lua --help
local recipe = require "bbb.app.recipe"
local prune = require "bbb.app.experiments.prune"

recipe.main("prune.lua", function() prune.plot(prune.run(prune.parse(arg))) end)

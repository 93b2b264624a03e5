--- Pictures of a training run: curves from its JSONL log and, from a
-- checkpoint, histograms of the posterior's means, standard deviations and
-- signal-to-noise ratios per Bayesian layer.
-- bbblua scripts/plot_run.lua RUN.jsonl [CKPT] [--out PREFIX]
local recipe = require "bbb.app.recipe"
local plot_run = require "bbb.app.experiments.plot_run"

recipe.main("plot_run.lua", function() plot_run.plot(plot_run.run(plot_run.parse(arg))) end)

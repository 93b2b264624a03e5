--- bbb.app.tabular: a Bayesian MLP on a table of your own, and how sure it is.
-- What scripts/fit.lua, predict.lua and uci.lua share: loading a CSV or an
-- R data set, splitting, standardising (the statistics live in the model),
-- building and training a net (Bayes by Backprop, or the plain and
-- MC-dropout baselines) with early stopping on the validation
-- log-likelihood, predictive distributions split into their epistemic and
-- aleatoric parts, scores (RMSE or accuracy, log-likelihood, interval
-- coverage or ECE), checkpoints holding model and preprocessing, plots.
--
-- The work is done in four parts under bbb.app.tabular, each a module a
-- script can require alone; this one gathers their public names into one
-- table, so a caller needs to know none of them. Each part requires only
-- those before it:
--   data   reading: read, read_for, header, kept_columns, in_model_order;
--          splits: split, subset, write_split, read_split; preprocessing:
--          scaler, scale, impute_stats, impute, identifier_column,
--          missing_cells, centre_target, unscorable_target,
--          drop_missing_target
--   model  the bundle and its predictive: LEVELS, LEVELS_BY_NAME,
--          HETERO_FLOOR, DF_MIN, DF_MAX, multiplier, build, new, inputs,
--          targets, predict, seeded; checkpoints: save, load, check_saved,
--          check_impute
--   score  score, crps_mc, conformal, fit_temperature, rows (the
--          predictions CSV), plot, mean_se, bench_lines
--   train  train, train_one, train_ensemble, member_job (what an
--          ensemble's worker process runs)
local data = require "bbb.app.tabular.data"
local model = require "bbb.app.tabular.model"
local score = require "bbb.app.tabular.score"
local train = require "bbb.app.tabular.train"

local M = {}

for _, part in ipairs { data, model, score, train } do
  for name, value in pairs(part) do
    -- one name in two parts would leave the one gathered last
    assert(M[name] == nil, "bbb.app.tabular: " .. name .. " is in two parts")
    M[name] = value
  end
end

return M

--- predict: predictions with their uncertainty from a model of scripts/fit.lua.
-- Reads the rows of --data the way the model was trained to (its columns,
-- its categories, its scaling) and writes one line per row: for regression
-- the predictive mean, its standard deviation split into the epistemic
-- (weights) and aleatoric (noise) parts, and the 50/90/95% interval bounds;
-- for classification the predicted class, each class's probability, the
-- predictive entropy and the mutual information (epistemic part), in nats.
-- A column the model needs that is missing, or a category it never saw, is
-- an error naming it. When the rows hold the target too, the scores and
-- --plot (predicted vs observed, or the calibration curve) come with them.
--   build/bbblua scripts/predict.lua --model out/price.ckpt --data new.csv --out predictions.csv
local recipe = require "bbb.app.recipe"
local predict = require "bbb.app.experiments.predict"

recipe.main("predict.lua", function() predict.run(predict.parse(arg)) end)

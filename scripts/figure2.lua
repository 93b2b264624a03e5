--- Figure 2 of Blundell et al. (2015): MNIST test error against epochs for
-- Bayes by Backprop, SGD and dropout, by the paper's protocol; resumable.
-- bbblua scripts/figure2.lua --help
local recipe = require "bbb.app.recipe"
local figure2 = require "bbb.app.experiments.figure2"

recipe.main("figure2.lua", function() figure2.report(figure2.run(figure2.parse(arg))) end)

-- luarocks make: builds with CMake and installs bbb.core, the Lua library
-- and bbblua into a rocks tree (no server involved).
--   luarocks --lua-version 5.4 make --local       (or --tree DIR)
rockspec_format = "3.0"
package = "bbb"
version = "scm-1"
source = { url = "git+file://." }
description = {
  summary = "Bayes by Backprop: a C tensor and autodiff core for Lua 5.4",
  detailed = [[
Float32 tensors, a define-by-run autodiff tape and fused Bayesian layers on
OpenBLAS, driven from Lua 5.4 (Blundell et al. 2015, "Weight Uncertainty in
Neural Networks").]],
  license = "MIT",
}
dependencies = { "lua >= 5.4, < 5.5" }
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    BBB_INSTALL_LIBDIR = "$(LIBDIR)",
    BBB_INSTALL_LUADIR = "$(LUADIR)",
    BBB_INSTALL_BINDIR = "$(BINDIR)",
  },
}

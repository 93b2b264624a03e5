-- luarocks make: builds with CMake and installs bbb.core, the Lua library
-- and bbblua into a rocks tree (no server involved), and copies scripts/
-- and examples/ into the rock's folder. Then run a script with bbblua:
--   luarocks --lua-version 5.4 make --local       (or --tree DIR)
--   export PATH="$HOME/.luarocks/bin:$PATH"       (where --local puts bbblua)
--   bbblua "$(luarocks --lua-version 5.4 show --rock-dir bbb)/scripts/mnist.lua" --help
-- The scripts read their data sets from data/ under the working folder
-- (scripts/bootstrap fetches them into a clone).
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
-- What the C core links (Debian 12: libopenblas-openmp-dev or
-- libopenblas-dev, libcsv-dev, zlib1g-dev, liblzma-dev); CMake finds them
-- itself (OpenBLAS through pkg-config), luarocks checks they are there.
-- The library also takes lua-cjson and the scripts lua-argparse (Debian's
-- packages, or the rocks lua-cjson and argparse): not listed as rock
-- dependencies, so that Debian's packages serve without a rocks server.
external_dependencies = {
  OPENBLAS = { library = "openblas" },
  CSV = { header = "csv.h", library = "csv" },
  ZLIB = { header = "zlib.h", library = "z" },
  LZMA = { header = "lzma.h", library = "lzma" },
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    BBB_INSTALL_LIBDIR = "$(LIBDIR)",
    BBB_INSTALL_LUADIR = "$(LUADIR)",
    BBB_INSTALL_BINDIR = "$(BINDIR)",
  },
  copy_directories = { "scripts", "examples" },
}

#!/bin/sh
# Runs bench/tabular_compare.py, fit.lua's defaults against scikit-learn's
# BayesianRidge, a GP with an ARD kernel and logistic regression on the same
# saved splits, and records which commit made the numbers (marked +dirty
# when lua/, scripts/ or src/ differ from it). Python is a reference only.
#   bench/tabular_compare.sh [OUT_PREFIX [python flags ...] [-- fit.lua flags]]
#   nohup bench/tabular_compare.sh > /tmp/tabular_compare.log 2>&1 &
set -eu
cd "$(dirname "$0")/.."
out=${1:-doc/results/tabular_compare}
[ $# -gt 0 ] && shift
if ! python3 -c 'import sklearn' 2>/dev/null; then
  echo "tabular_compare.sh: python3-sklearn is missing (apt-get install -y python3-sklearn)" >&2
  exit 2
fi
if [ ! -x build/bbblua ]; then
  echo "tabular_compare.sh: build/bbblua is missing: build first (cmake --build build)" >&2
  exit 2
fi
dirty=""
git diff --quiet HEAD -- lua scripts src || dirty="+dirty"
BBB_COMMIT="$(git rev-parse --short HEAD)$dirty"
export BBB_COMMIT
exec python3 bench/tabular_compare.py --out "$out" "$@"

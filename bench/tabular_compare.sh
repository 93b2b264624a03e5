#!/bin/sh
# Runs bench/tabular_compare.py, fit.lua's defaults against scikit-learn's
# BayesianRidge, a GP with an ARD kernel and logistic regression on the same
# saved splits, and records which commit made the numbers (marked +dirty
# when lua/, scripts/ or src/ differ from it). Python is a reference only.
#   bench/tabular_compare.sh [OUT_PREFIX [python flags ...] [-- fit.lua flags]]
#   nohup bench/tabular_compare.sh > /tmp/tabular_compare.log 2>&1 &
set -eu
cd "$(dirname "$0")/.."
out=${1:-doc/results/tabular_compare_defaults}
[ $# -gt 0 ] && shift
# Debian's python3-sklearn lives in /usr/bin/python3, which another python3
# on the PATH (a pyenv shim, a venv) may hide; $PYTHON picks one by hand.
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if "$p" -c 'import sklearn' 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "tabular_compare.sh: no python3 with scikit-learn (apt-get install -y python3-sklearn)" >&2
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
exec "$py" bench/tabular_compare.py --out "$out" "$@"

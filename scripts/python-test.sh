#!/usr/bin/env bash
# Builds the tensord Python module and runs the Python tests against real
# tensord processes, in two venvs kept under BUILD_DIR/python-venvs:
#   legacy: /usr/bin/python3 + Debian's torch 1.13 and numpy 1.24 (legacy DLPack capsules)
#   modern: /usr/bin/python3 + numpy 2 and jax from PyPI (DLPack 1.x), grpcio
# Usage: scripts/python-test.sh [BUILD_DIR]   (BUILD_DIR/server/tensord must be built; default build)
# Exits non-zero when any test fails or any venv cannot be made.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"
repo=$PWD
deploy/install-deps.sh python
build_dir=$(realpath -m "${1:-build}")
export TENSORD_BINARY=$build_dir/server/tensord
if [[ ! -x $TENSORD_BINARY ]]; then
  echo "python-test: no $TENSORD_BINARY; build it first: TARGETS=tensord scripts/build.sh ${1:-build}" >&2
  exit 2
fi
test_timeout_s=900
# shellcheck source=scripts/lib/python-venvs.sh
source scripts/lib/python-venvs.sh

# run_tests NAME PREFLIGHT TEST_FILES...: the preflight import makes a missing
# consumer fail loudly instead of letting pytest skip its tests.
status=0
run_tests() {
  local name=$1 venv=$venvs/$1 preflight=$2
  shift 2
  echo "python-test: $name venv: $*" >&2
  if ! "$venv/bin/python" -c "$preflight"; then
    echo "python-test: $venv lacks what its tests need ($preflight)" >&2
    status=1
    return
  fi
  (cd "$repo" && timeout "$test_timeout_s" "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs \
    -W error::pytest.PytestUnraisableExceptionWarning "$@") || status=1
}

make_venv legacy tests/python/requirements-legacy.txt --system-site-packages
make_venv modern tests/python/requirements-modern.txt
install_module legacy
install_module modern

run_tests legacy 'import torch, numpy; assert numpy.__version__.startswith("1."), numpy.__version__' \
  tests/python/test_api.py tests/python/test_batch.py tests/python/test_legacy_consumers.py \
  tests/python/test_create.py tests/python/test_fetch_into_buffer.py tests/python/test_device_handoff.py \
  tests/python/test_stubs.py tests/python/test_watch.py tests/python/test_cluster.py
run_tests modern 'import jax, grpc_tools, numpy; assert numpy.__version__.startswith("2."), numpy.__version__' \
  tests/python/test_api.py tests/python/test_batch.py tests/python/test_versioned_consumers.py \
  tests/python/test_raw_grpc.py tests/python/test_create.py tests/python/test_fetch_into_buffer.py \
  tests/python/test_device_handoff.py tests/python/test_stubs.py tests/python/test_watch.py tests/python/test_cluster.py
exit $status

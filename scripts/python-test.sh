#!/usr/bin/env bash
# Builds the tensord Python module and runs the Python tests against real
# tensord processes, in two venvs kept under BUILD_DIR/python-venvs:
#   legacy: /usr/bin/python3 + Debian's torch 1.13 and numpy 1.24 (legacy DLPack capsules)
#   modern: /usr/bin/python3 + numpy 2 and jax from PyPI (DLPack 1.x), grpcio
# Usage: scripts/python-test.sh [BUILD_DIR]   (BUILD_DIR/server/tensord must be built; default build)
# Exits non-zero when any test fails or any venv cannot be made.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
deploy/install-deps.sh python
build_dir=$(realpath -m "${1:-build}")
export TENSORD_BINARY=$build_dir/server/tensord
if [[ ! -x $TENSORD_BINARY ]]; then
  echo "python-test: no $TENSORD_BINARY; build it first: TARGETS=tensord scripts/build.sh ${1:-build}" >&2
  exit 2
fi
venvs=$build_dir/python-venvs
# Same cache keys as scripts/build.sh, so the module's C++ objects hit ccache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
export PIP_DISABLE_PIP_VERSION_CHECK=1
test_timeout_s=900

# make_venv NAME REQUIREMENTS [venv args]: (re)creates the venv when missing
# or when its requirements file changed.
make_venv() {
  local venv=$venvs/$1 requirements=$2
  shift 2
  if [[ -x $venv/bin/python ]] && cmp -s "$requirements" "$venv/.requirements"; then
    return
  fi
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$@" "$venv"
  "$venv/bin/pip" install -q -r "$requirements"
  cp "$requirements" "$venv/.requirements"
}

# install_module NAME: pip install ./python, reusing a CMake build folder per venv.
install_module() {
  "$venvs/$1/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall ./python \
    --config-settings=build-dir="$build_dir/python-build/$1"
}

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
  tests/python/test_stubs.py
run_tests modern 'import jax, grpc_tools, numpy; assert numpy.__version__.startswith("2."), numpy.__version__' \
  tests/python/test_api.py tests/python/test_batch.py tests/python/test_versioned_consumers.py \
  tests/python/test_raw_grpc.py tests/python/test_create.py tests/python/test_fetch_into_buffer.py \
  tests/python/test_device_handoff.py tests/python/test_stubs.py
exit $status

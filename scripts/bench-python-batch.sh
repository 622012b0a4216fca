#!/usr/bin/env bash
# The Python binding's batch calls (batch_put, batch_fetch,
# batch_fetch_prefix, remote and local) in tensors/s beside raw TCP of the
# same bytes, measured in the same rounds (bench/python_batch.py). Uses
# the modern venv of scripts/python-test.sh (numpy, the tensord module).
# Usage: scripts/bench-python-batch.sh [BUILD_DIR] [--count N] [--bytes N] [--rounds N]
#   BUILD_DIR  default build; BUILD_DIR/server/tensord must be built
#   --count    tensors per batch (default 1024)
#   --bytes    bytes per tensor (default 4096)
#   --rounds   rounds, medians printed (default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options --count= --bytes= --rounds= -- "$@"
build_arg=build
if [[ $# -gt 0 && $1 != -* ]]; then
  build_arg=$1
  shift
fi
repo=$PWD
deploy/install-deps.sh python
build_dir=$(realpath -m "$build_arg")
tensord_binary=$build_dir/server/tensord
if [[ ! -x $tensord_binary ]]; then
  echo "bench-python-batch: no $tensord_binary; build it first: TARGETS=tensord scripts/build.sh ${build_dir}" >&2
  exit 2
fi
# shellcheck source=scripts/lib/python-venvs.sh
source scripts/lib/python-venvs.sh
make_venv modern tests/python/requirements-modern.txt
install_module modern
exec "$venvs/modern/bin/python" bench/python_batch.py --tensord "$tensord_binary" "$@"

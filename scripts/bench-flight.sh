#!/usr/bin/env bash
# tensord against Apache Arrow Flight (pyarrow from PyPI) on this machine:
# put and fetch of 256 MiB and 1 GiB, alternating rounds, medians and ratios
# (bench/flight_compare.py). Builds the tensord Python module into
# BUILD_DIR/python-venvs/flight beside pyarrow.
# Usage: scripts/bench-flight.sh [BUILD_DIR] [flight_compare.py arguments...]
#   (BUILD_DIR/server/tensord must be built, Release for figures worth quoting)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
deploy/install-deps.sh python
build_dir=$(realpath -m "${1:-build}")
shift || true
tensord_binary=$build_dir/server/tensord
if [[ ! -x $tensord_binary ]]; then
  echo "bench-flight: no $tensord_binary; build it first: TARGETS=tensord scripts/build.sh ${build_dir}" >&2
  exit 2
fi
# shellcheck source=scripts/lib/python-venvs.sh
source scripts/lib/python-venvs.sh
make_venv flight bench/requirements-flight.txt
install_module flight
exec "$venvs/flight/bin/python" bench/flight_compare.py --tensord "$tensord_binary" "$@"

#!/usr/bin/env bash
# tensord against Apache Arrow Flight (pyarrow from PyPI) on this machine:
# put and fetch of 256 MiB and 1 GiB, alternating rounds, medians and ratios
# (bench/flight_compare.py). Builds the tensord Python module into
# BUILD_DIR/python-venvs/flight beside pyarrow.
# Usage: scripts/bench-flight.sh [BUILD_DIR] [--sizes-mib LIST] [--rounds N] [--tensord-arg FLAG]...
#   BUILD_DIR      default build; BUILD_DIR/server/tensord must be built,
#                  Release for figures worth quoting
#   --sizes-mib    tensor sizes in MiB, comma-separated (default 256,1024)
#   --rounds       alternating rounds per size (default 5)
#   --tensord-arg  a further tensord flag (repeatable),
#                  e.g. --tensord-arg=--spare-put-bytes=0
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
# bench/flight_compare.py's options, checked before anything is installed.
reject_unknown_options --sizes-mib= --rounds= --tensord-arg= --tensord= -- "$@"
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
  echo "bench-flight: no $tensord_binary; build it first: TARGETS=tensord scripts/build.sh ${build_dir}" >&2
  exit 2
fi
# shellcheck source=scripts/lib/python-venvs.sh
source scripts/lib/python-venvs.sh
make_venv flight bench/requirements-flight.txt
install_module flight
exec "$venvs/flight/bin/python" bench/flight_compare.py --tensord "$tensord_binary" "$@"

#!/usr/bin/env bash
# Runs the whole tensord test suite: installs missing Debian packages, builds
# (Ninja + ccache, in build/), and runs every unit and integration test with
# CTest. Extra arguments go to ctest (e.g. -R Registry).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"

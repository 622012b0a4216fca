#!/usr/bin/env bash
# Configures and builds one tensord configuration with Ninja and ccache.
# Usage: [TARGETS="a b"] scripts/build.sh BUILD_DIR [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
# Cache hits across clones (CI builds a fresh clone each run).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
build_dir=$1
shift
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
fi
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$(nproc)" ${TARGETS:+--target $TARGETS}

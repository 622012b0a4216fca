#!/usr/bin/env bash
# Configures and builds one tensord configuration with Ninja and ccache.
# Usage: [TARGETS="a b"] scripts/build.sh [--configure-only] BUILD_DIR [CMAKE ARGUMENTS...]
#   TARGETS           build only these (e.g. "tensord tensorctl"); default all
#   --configure-only  run CMake (when needed) and stop before building
#   CMAKE ARGUMENTS   go to cmake (e.g. -DCMAKE_BUILD_TYPE=RelWithDebInfo).
#                     CMake runs when BUILD_DIR is new, or when a -DNAME=VALUE
#                     among them is not what BUILD_DIR's cache holds (so
#                     a build dir made with other values gets them)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
configure_only=0
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    -h|--help) script_help; exit 0 ;;
    --configure-only) configure_only=1; shift ;;
    *) refuse_option "$1" --help --configure-only ;;
  esac
done
if [[ $# -eq 0 ]]; then
  echo "$script_name: no BUILD_DIR given" >&2
  echo "Run '$0 --help' for usage." >&2
  exit 2
fi
# Cache hits across clones (CI builds a fresh clone each run).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
build_dir=$1
shift
# True when every -DNAME=VALUE (or -DNAME:TYPE=VALUE) given is in the cache.
cache_has_definitions() {
  local argument name value
  [[ -f $build_dir/CMakeCache.txt ]] || return 1
  for argument in "$@"; do
    [[ $argument == -D*=* ]] || continue
    name=${argument#-D}
    name=${name%%=*}
    name=${name%%:*}
    value=${argument#*=}
    [[ $(sed -n "s/^$name:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -n1) == "$value" ]] || return 1
  done
}
if [[ ! -f $build_dir/build.ninja ]] || ! cache_has_definitions "$@"; then
  cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
fi
if ((configure_only)); then exit 0; fi
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$(nproc)" ${TARGETS:+--target $TARGETS}

#!/usr/bin/env bash
# Builds examples/cpp-consumer as an outside project would, three ways, and
# runs each build against a real tensord installed from BUILD_DIR:
#   1. `cmake --install` into a scratch prefix, then find_package(tensord)
#      (the shared and the static library; and the shared one alone where
#      the static one's dependencies are missing);
#   2. the installed pkg-config file, with a bare g++ command line;
#   3. add_subdirectory() of this checkout.
# The consumer sets no C++ standard of its own.
# Usage: scripts/consumer-test.sh [BUILD_DIR]   (BUILD_DIR built; default build)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"
repo=$PWD
build_dir=$(realpath -m "${1:-build}")
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

# shellcheck source=scripts/lib/tensord-process.sh
source scripts/lib/tensord-process.sh
work=$(mktemp -d)
trap 'tensord_stop; rm -rf "$work"' EXIT

prefix=$work/prefix
echo "==> cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log"
for file in bin/tensord bin/tensorctl include/tensord/client.h include/tensord/tensor.h \
  include/tensord/dlpack.h include/tensord/retention.h lib/libtensord_client.a \
  lib/libtensord_client.so lib/cmake/tensord/tensordConfig.cmake lib/pkgconfig/tensord.pc; do
  [[ -e $prefix/$file ]] || { echo "consumer-test: the install lacks $file" >&2; exit 1; }
done
if grep -rq 'service/' "$prefix/include/tensord"; then
  echo "consumer-test: an installed header refers to the source tree's service/" >&2
  exit 1
fi

echo "==> starting the installed tensord"
tensord_start "$prefix/bin/tensord" "$work" --handoff-socket="$work/tensord.sock"

# float32[4, 1024] holding i * 0.25: its sum is 0.25 * 4095 * 4096 / 2.
/usr/bin/python3 - "$work/w.npy" <<'PY'
import sys, numpy as np
np.save(sys.argv[1], (np.arange(4096, dtype=np.float32) * 0.25).reshape(4, 1024))
PY
"$prefix/bin/tensorctl" --server="$server" put consumer/w "$work/w.npy" >/dev/null
expected="consumer/w version 1: 2 dims, sum 2.09664e+06"

check() {  # check LABEL BINARY
  local got
  got=$("$2" "$server" consumer/w)
  if [[ $got != "$expected" ]]; then
    echo "consumer-test: $1 printed '$got', expected '$expected'" >&2
    exit 1
  fi
  echo "    $1: $got"
}

echo "==> find_package(tensord) against the installed prefix"
cmake -S examples/cpp-consumer -B "$work/installed" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$work/configure.log"
cmake --build "$work/installed" >"$work/build.log"
check "tensord::client (shared)" "$work/installed/sum_tensor"
check "tensord::client_static" "$work/installed/sum_tensor_static"

echo "==> find_package(tensord) where gRPC's CMake package is missing: the shared library only"
cmake -S examples/cpp-consumer -B "$work/shared-only" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_gRPC=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$work/configure-shared.log"
cmake --build "$work/shared-only" >"$work/build-shared.log"
if [[ -e $work/shared-only/sum_tensor_static ]]; then
  echo "consumer-test: tensord::client_static was defined without gRPC" >&2
  exit 1
fi
check "tensord::client without gRPC's CMake package" "$work/shared-only/sum_tensor"

echo "==> pkg-config tensord"
# shellcheck disable=SC2046
g++ -o "$work/sum_tensor_pc" examples/cpp-consumer/sum_tensor.cc \
  $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs tensord) \
  -Wl,-rpath,"$prefix/lib"
check "pkg-config (shared)" "$work/sum_tensor_pc"

echo "==> add_subdirectory() of this checkout"
cmake -S examples/cpp-consumer -B "$build_dir/consumer-subdirectory" -G Ninja \
  -DTENSORD_SOURCE_DIR="$repo" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/configure-sub.log"
cmake --build "$build_dir/consumer-subdirectory" --target sum_tensor >"$work/build-sub.log"
check "add_subdirectory" "$build_dir/consumer-subdirectory/sum_tensor"
echo "consumer-test: ok"

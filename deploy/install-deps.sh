#!/usr/bin/env bash
# Installs tensord's build and test dependencies from Debian bookworm's
# packages. Used by the README commands, .ci/run and the Dockerfile, so all
# three build against the same packages. Idempotent: installs only what is
# missing. Set TENSORD_DEPS_EXTRA="pkg ..." to add packages.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libdlpack-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
  clang-14 libclang-rt-14-dev
  python3 python3-numpy
  libssl-dev openssl
)
# shellcheck disable=SC2206
packages+=(${TENSORD_DEPS_EXTRA:-})

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "install-deps: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

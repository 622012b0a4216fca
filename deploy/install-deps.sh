#!/usr/bin/env bash
# Installs tensord's dependencies from Debian bookworm's packages. Used by the
# README commands, .ci/run and the Dockerfile, so all of them build against
# the same packages. Idempotent: installs only what is missing.
#   deploy/install-deps.sh          everything: build, tests, fuzzing, tools
#   deploy/install-deps.sh build    only what compiling tensord and tensorctl needs
#   deploy/install-deps.sh python   everything plus scripts/python-test.sh's needs
#                                   (torch: kept out of the default set)
# Set TENSORD_DEPS_EXTRA="pkg ..." to add packages.
set -euo pipefail

# Usage errors name the nearest profile or option; the helper is absent where
# this script is copied alone (the Dockerfile's build stage).
command_line_helper=$(dirname "$0")/../scripts/lib/command-line.sh
nearest() {  # nearest TYPED KNOWN...: "; did you mean 'X'?" or nothing
  local near=""
  # shellcheck source=scripts/lib/command-line.sh
  [[ -f $command_line_helper ]] && near=$(source "$command_line_helper" && closest_option "$@")
  [[ -n $near ]] && printf "; did you mean '%s'?" "$near"
  return 0
}
case ${1:-} in
  -h|--help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "install-deps: unknown option '$1'$(nearest "$1" --help)" >&2; exit 2 ;;
esac
if [[ $# -gt 1 ]]; then
  echo "install-deps: unexpected argument '$2' (one profile at most)" >&2
  exit 2
fi
profile=${1:-all}
build_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libdlpack-dev nlohmann-json3-dev prometheus-cpp-dev libssl-dev
)
test_packages=(
  git openssl libgtest-dev libgmock-dev
  clang-14 libclang-rt-14-dev clang-format-14
  python3 python3-numpy python3-yaml
  python3-venv  # scripts/check-function-length.sh's lizard (PyPI) lives in a venv
  etcd-server etcd-client  # the cluster tests start a real etcd and set up its auth
)
python_packages=(python3-dev python3-torch)
case $profile in
  build) packages=("${build_packages[@]}") ;;
  all) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  python) packages=("${build_packages[@]}" "${test_packages[@]}" "${python_packages[@]}") ;;
  *) echo "install-deps: unknown profile '$profile'$(nearest "$profile" build all python) (expected build, all or python)" >&2; exit 2 ;;
esac
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

#!/usr/bin/env bash
# Builds the tensord image offline with ../shared/tools/container-build
# (rootful podman) and runs a smoke test inside it: the version line says
# whether the CUDA backend is built in as asked (the default image: yes),
# tensord starts with no GPU here and logs one calm device_backend_none line
# and no warning or error, then put a tensor with tensorctl, fetch it back
# byte-exact, probe health (SERVING). Then it starts tensord as a user runs
# the image with flags (`podman run IMAGE --listen=0.0.0.0:50051 ...`): the
# flags replace the image's own TENSORD_* settings, so it serves only there.
# Usage: scripts/container-smoke.sh [--build-arg K=V] [--base REF] [--target STAGE] [--refresh-base]
#   (passed to container-build, e.g. --build-arg TENSORD_CUDA=OFF)
# CONTAINER_SMOKE_TAG names the image (default localhost/tensord:ci).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options --build-arg= --base= --target= --refresh-base -- "$@"
container_build=$(scripts/container-build-path.sh)
if [[ -z $container_build ]]; then
  echo "container-smoke: SKIPPED: no container-build tool (looked in ../shared/tools, /work/shared/tools, PATH; set CONTAINER_BUILD)" >&2
  [[ ${CONTAINER_SMOKE_REQUIRED:-0} == 1 ]] && exit 1
  exit 0
fi

# Runs inside the image as its non-root user, with the image's default
# configuration (TENSORD_* variables): no Python there, so the .npy
# (float32[4, 8], values 0..31) is written with printf.
read -r -d '' smoke <<'SH' || true
set -euo pipefail
cd /tmp
cuda=$1  # "built in" or "not built in"
version=$(tensord --version)
echo "$version"
[[ $version == *", CUDA backend $cuda)"* ]] || { echo "container smoke: expected 'CUDA backend $cuda' in the version line" >&2; exit 1; }
tensorctl --version
tensord --ready-file=/tmp/ready 2>/tmp/tensord.log &
server_pid=$!
stop_server() {
  if [[ -n $server_pid ]]; then kill -TERM "$server_pid"; wait "$server_pid" || true; fi
  server_pid=""
}
trap stop_server EXIT
for _ in $(seq 100); do [[ -f /tmp/ready ]] && break; sleep 0.1; done
[[ -f /tmp/ready ]] || { cat /tmp/tensord.log; exit 1; }
# No GPU here (podman run without one): with the CUDA backend built in, one
# info line says there is no device backend because there is no driver, and
# nothing is a warning or an error.
if [[ $cuda == "built in" ]]; then
  grep -c 'level=info event=device_backend_none reason="no NVIDIA driver' /tmp/tensord.log | grep -qx 1 \
    || { cat /tmp/tensord.log; echo "container smoke: expected one device_backend_none line saying 'no NVIDIA driver'" >&2; exit 1; }
  grep 'event=device_backend_none' /tmp/tensord.log
fi
if grep -E 'level=(warning|error)' /tmp/tensord.log; then
  echo "container smoke: tensord logged warnings or errors at start" >&2; exit 1
fi
header="{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), }"
while (( (10 + ${#header} + 1) % 64 )); do header+=" "; done
{ printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(( (${#header} + 1) % 256 )))\\x$(printf %02x $(( (${#header} + 1) / 256 )))"; printf '%s\n' "$header"; } > smoke.npy
: > expected.bin
for i in $(seq 0 31); do
  # float32 i, little endian: exact for small integers via the bit pattern
  bits=0
  if (( i > 0 )); then e=0; m=$i; while (( m >= 2 )); do m=$(( m >> 1 )); e=$(( e + 1 )); done
    bits=$(( ((127 + e) << 23) | ((i - (1 << e)) << (23 - e)) )); fi
  printf "\\x$(printf %02x $(( bits & 255 )))\\x$(printf %02x $(( (bits >> 8) & 255 )))\\x$(printf %02x $(( (bits >> 16) & 255 )))\\x$(printf %02x $(( bits >> 24 )))" >> expected.bin
done
cat expected.bin >> smoke.npy
tensorctl --server unix:/run/tensord/grpc.sock health  # the image's HEALTHCHECK
tensorctl --server 127.0.0.1:50051 put smoke/tensor smoke.npy
tensorctl --server 127.0.0.1:50051 stat smoke/tensor
tensorctl --server 127.0.0.1:50051 get-raw smoke/tensor -o fetched.bin
cmp expected.bin fetched.bin
tensorctl --server 127.0.0.1:50051 get smoke/tensor -o fetched.npy  # ranged gRPC fetches
cmp expected.bin <(tail -c 128 fetched.npy)
tensorctl --server 127.0.0.1:50051 get-many smoke/ -o fetched  # local handoff path
cmp expected.bin <(tail -c 128 fetched/tensor.npy)
echo "container smoke: put, fetched (gRPC and local handoff) float32[4, 8] byte-exact as uid $(id -u); health SERVING"
stop_server

# As `podman run IMAGE --listen=0.0.0.0:50051 --allow-insecure-remote` runs
# it: the entrypoint with flags, in the image's environment. The image's
# TENSORD_LISTEN (127.0.0.1:50051 and the Unix socket) must give way to the
# flag, not be served beside it ("address in use" on port 50051).
[[ -n ${TENSORD_LISTEN:-} ]] || { echo "container smoke: the image sets no TENSORD_LISTEN" >&2; exit 1; }
/usr/local/bin/tensord --listen=0.0.0.0:50051 --allow-insecure-remote --ready-file=/tmp/ready-flags \
  2>/tmp/tensord-flags.log &
server_pid=$!
for _ in $(seq 100); do [[ -f /tmp/ready-flags ]] && break; sleep 0.1; done
[[ -f /tmp/ready-flags ]] || { cat /tmp/tensord-flags.log; echo "container smoke: tensord with flags on the command line did not start" >&2; exit 1; }
[[ $(cat /tmp/ready-flags) == "0.0.0.0:50051" ]] \
  || { cat /tmp/ready-flags; echo "container smoke: expected tensord to serve only the --listen address" >&2; exit 1; }
tensorctl --server 127.0.0.1:50051 health
stop_server
echo "container smoke: flags on the command line replace the image's TENSORD_LISTEN (serving 0.0.0.0:50051 only)"
SH

# The image's default is TENSORD_CUDA=ON; the last --build-arg given wins.
cuda="built in"
for arg in "$@"; do
  case $arg in
    TENSORD_CUDA=OFF|--build-arg=TENSORD_CUDA=OFF) cuda="not built in" ;;
    TENSORD_CUDA=*|--build-arg=TENSORD_CUDA=*) cuda="built in" ;;
  esac
done

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
"$container_build" --tag "${CONTAINER_SMOKE_TAG:-localhost/tensord:ci}" --build-arg TENSORD_GIT_COMMIT="$commit" "$@" \
  --entrypoint /bin/bash --run -- -c "$smoke" container-smoke "$cuda"

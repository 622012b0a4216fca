#!/usr/bin/env bash
# Builds the Debian packages (cpack -G DEB) from BUILD_DIR, installs them with
# apt into a clean debian:bookworm-slim container (offline builder; apt pulls
# their dependencies from the Debian mirror) and runs the installed tensord
# and tensorctl there: version, put, fetch through the default local handoff
# byte-exact, pkg-config of the development package.
# Usage: scripts/deb-test.sh [BUILD_DIR]   (BUILD_DIR built; default build)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"
build_dir=$(realpath -m "${1:-build}")

echo "==> cpack -G DEB ($build_dir/packages)"
rm -rf "$build_dir/packages"
(cd "$build_dir" && cpack -G DEB -B "$build_dir/packages" >"$build_dir/cpack.log") ||
  { cat "$build_dir/cpack.log"; exit 1; }
shopt -s nullglob
debs=("$build_dir"/packages/*.deb)
shopt -u nullglob
names=$(for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Package; done | sort | tr '\n' ' ')
if [[ $names != "libtensord-client-dev tensord " ]]; then
  echo "deb-test: expected the packages tensord and libtensord-client-dev, got: $names" >&2
  exit 1
fi
for deb in "${debs[@]}"; do
  echo "    $(basename "$deb"): $(du -h "$deb" | cut -f1), depends: $(dpkg-deb -f "$deb" Depends)"
done

container_build=$(scripts/container-build-path.sh)
if [[ -z $container_build ]]; then
  echo "deb-test: SKIPPED the container install: no container-build tool (see scripts/container-build-path.sh)" >&2
  [[ ${CONTAINER_SMOKE_REQUIRED:-0} == 1 ]] && exit 1
  exit 0
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "${debs[@]}" "$context/"
/usr/bin/python3 - "$context/w.npy" <<'PY'
import sys, numpy as np
np.save(sys.argv[1], (np.arange(4096, dtype=np.float32) * 0.25).reshape(4, 1024))
PY
cat >"$context/Dockerfile" <<'DOCKERFILE'
FROM debian:bookworm-slim
COPY *.deb w.npy /tmp/debs/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/debs/*.deb \
 && rm -rf /var/lib/apt/lists/*
DOCKERFILE

read -r -d '' smoke <<'SH' || true
set -euo pipefail
cd /tmp
tensord --version
tensorctl --version
tensord --listen=127.0.0.1:0 --ready-file=/tmp/ready 2>/tmp/tensord.log &
server_pid=$!
trap 'kill -TERM $server_pid; wait $server_pid || true' EXIT
for _ in $(seq 100); do [[ -f /tmp/ready ]] && break; sleep 0.1; done
[[ -f /tmp/ready ]] || { cat /tmp/tensord.log; exit 1; }
server=$(head -n1 /tmp/ready)
tensorctl --server "$server" put deb/w /tmp/debs/w.npy
tensorctl --server "$server" stat deb/w
# Same host and the server's default --handoff-socket=auto: zero-copy.
tensorctl --server "$server" get deb/w -o /tmp/fetched.npy
# The data (the last 16 KiB); .npy headers may be padded differently.
cmp <(tail -c 16384 /tmp/debs/w.npy) <(tail -c 16384 /tmp/fetched.npy)
pkg-config --modversion tensord
pkg-config --cflags --libs tensord >/dev/null
test -f /usr/lib/*/cmake/tensord/tensordConfig.cmake || test -f /usr/lib/cmake/tensord/tensordConfig.cmake
echo "deb-test: installed tensord and libtensord-client-dev; put and fetched float32[4, 1024] byte-exact"
SH

echo "==> apt install into a clean bookworm container, then run"
"$container_build" --context "$context" --file "$context/Dockerfile" --tag localhost/tensord-deb:ci \
  --entrypoint /bin/bash --run -- -c "$smoke"
echo "deb-test: ok"

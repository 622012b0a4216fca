#!/usr/bin/env bash
# The main job: builds tensord if needed, starts it on 127.0.0.1, puts a demo
# tensor with tensorctl, fetches it back, compares the bytes, lists and stats
# the registry, then stops the server (by its PID).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

# shellcheck source=scripts/lib/tensord-process.sh
source scripts/lib/tensord-process.sh
work=$(mktemp -d)
trap 'tensord_stop; rm -rf "$work"' EXIT

echo "==> starting tensord (gRPC on 127.0.0.1, port chosen by the kernel; local handoff socket; 1 GiB host capacity)"
tensord_start build/server/tensord "$work" --max-host-bytes=1GiB --handoff-socket="$work/tensord.sock"
export TENSORD_SERVER=$server
echo "    serving on $TENSORD_SERVER (pid $server_pid)"

echo "==> writing a demo tensor: float32[256, 1024] (1 MiB), values i * 0.5"
/usr/bin/python3 - "$work/demo.npy" <<'PY'
import sys, numpy as np
np.save(sys.argv[1], (np.arange(256 * 1024, dtype=np.float32) * 0.5).reshape(256, 1024))
PY

echo "==> tensorctl put demo/embeddings"
build/client/tensorctl/tensorctl put demo/embeddings "$work/demo.npy"
echo "==> tensorctl get demo/embeddings"
build/client/tensorctl/tensorctl get demo/embeddings -o "$work/fetched.npy"
/usr/bin/python3 - "$work/demo.npy" "$work/fetched.npy" <<'PY'
import sys, numpy as np
put, fetched = np.load(sys.argv[1]), np.load(sys.argv[2])
same = put.dtype == fetched.dtype and put.shape == fetched.shape and put.tobytes() == fetched.tobytes()
print(f"    fetched {fetched.dtype}{list(fetched.shape)}: {'byte-identical to' if same else 'DIFFERENT from'} what was put")
sys.exit(0 if same else 1)
PY
echo "==> tensorctl ls"
build/client/tensorctl/tensorctl ls
echo "==> tensorctl stat demo/embeddings"
build/client/tensorctl/tensorctl stat demo/embeddings
echo "==> stopping tensord"
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
echo "==> server log"
cat "$work/tensord.log"
echo "demo finished: a tensor went in and came back byte-exact"

#!/usr/bin/env bash
# The main job: builds tensord if needed, starts it on 127.0.0.1, puts a demo
# tensor with tensorctl, fetches it back, compares the bytes, lists and stats
# the registry, then stops the server (by its PID).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "==> starting tensord (gRPC on 127.0.0.1, port chosen by the kernel; local handoff socket; 1 GiB host capacity)"
build/server/tensord --listen=127.0.0.1:0 --max-host-bytes=1GiB --handoff-socket="$work/tensord.sock" \
  --ready-file="$work/ready" 2>"$work/tensord.log" &
server_pid=$!
for _ in $(seq 100); do
  [[ -f $work/ready ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/tensord.log"; exit 1; }
  sleep 0.1
done
[[ -f $work/ready ]] || { echo "tensord did not become ready"; cat "$work/tensord.log"; exit 1; }
export TENSORD_SERVER=$(head -n1 "$work/ready")
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

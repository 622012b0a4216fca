#!/usr/bin/env bash
# The cluster demo: a throwaway etcd and three tensord nodes (a, b, c) on
# 127.0.0.1, every port chosen by the kernel, each node with its own
# directory (ready file, log) and handoff socket under one mktemp directory.
#
# Steps: lists the members (tensorctl nodes); puts a 4 MiB .npy on node a
# with --replicas 2 (acknowledged once etcd ordered it, in the name's one
# record <prefix>/names/<name>, and a second node holds a replica) and shows
# who holds it (each node's own `ls`) and the cluster's records (`ls
# --cluster`: writer and cluster order, read from etcd); fetches it from b
# and c and compares the bytes with the original: the replica serves its
# own copy, the node without one pulls it from a holder the record lists
# (event=cluster_pulled in its log; a replica's copy logs none) and joins
# the record's holders, which the demo prints from etcd; puts a second
# tensor on a with --replicas 2 that nobody reads yet; kill -9 of node a;
# fetches both tensors again from b and c (the second one's first reader
# must pull it from the surviving replica), compares the bytes and times
# each fetch; waits for a to leave the member list; prints a summary.
# Exits non-zero on any mismatch or failed call, or when a node pulls when
# it should not (the replica) or serves without pulling when it must have.
# Every process it starts is stopped by its PID when it exits, even on
# failure. Needs no network. About 5 s once built (2 cores).
#
# Usage: scripts/cluster-demo.sh [--build-dir DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
build_arg=build
while (($#)); do
  case $1 in
    --build-dir) build_arg=${2:?--build-dir needs a folder}; shift 2 ;;
    --build-dir=*) build_arg=${1#*=}; shift ;;
    -h|--help) script_help; exit 0 ;;
    -*) refuse_option "$1" --help --build-dir= ;;
    *) refuse_argument "$1" ;;
  esac
done
build_dir=$(realpath -m "$build_arg")

deploy/install-deps.sh
TARGETS="tensord tensorctl" scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
tensord=$build_dir/server/tensord
tensorctl=$build_dir/client/tensorctl/tensorctl
etcd=/usr/bin/etcd
etcdctl=/usr/bin/etcdctl
python=/usr/bin/python3
ttl=2  # seconds: a killed node leaves the member list with its lease (name records are on no lease)
prefix=/tensord-demo

# shellcheck source=scripts/lib/tensord-process.sh
source scripts/lib/tensord-process.sh
work=$(mktemp -d)
started=()  # PIDs of everything this script started, in start order

# SIGTERM, up to 10 s, then SIGKILL; always reaped. Only children of this
# script are passed here.
stop_pid() {
  local pid=$1 _
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local i
  # Nodes before etcd (they leave the cluster on SIGTERM), newest first;
  # then whatever tensord_start was still waiting for when it failed.
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do stop_pid "${started[i]}"; done
  tensord_stop
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "${t#0}"; }
ms_since() { echo $((($(now_us) - $1) / 1000)); }

# Two ports the kernel hands out on 127.0.0.1 (free again once printed).
free_ports() {
  "$python" -c '
import socket
sockets = [socket.socket() for _ in range(2)]
for s in sockets: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))'
}

# Compares a fetched .npy with the original: dtype, shape and every data
# byte. Prints one line; exits non-zero (and says so on stderr) otherwise.
compare_npy() {
  "$python" - "$1" "$2" "$3" <<'PY'
import hashlib, sys
import numpy as np
original, fetched, what = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
same = (original.dtype == fetched.dtype and original.shape == fetched.shape
        and original.tobytes() == fetched.tobytes())
digest = hashlib.sha256(np.ascontiguousarray(fetched).tobytes()).hexdigest()[:16]
if not same:
    print(f"cluster-demo: MISMATCH: {what} gave {fetched.dtype}{list(fetched.shape)} "
          f"sha256 {digest}..., not what was put", file=sys.stderr)
    sys.exit(1)
print(f"    {what}: {fetched.dtype}{list(fetched.shape)}, byte-identical (data sha256 {digest}...)")
PY
}

declare -A address pid
nodes=(a b c)

# fetch NODE NAME ORIGINAL LABEL: tensorctl get through NODE, timed (the
# whole tensorctl run, connect included), then compared. Sets fetch_ms.
fetch_ms=0
fetch() {
  local node=$1 name=$2 original=$3 label=$4
  local out=$work/fetched-$label-$node.npy start
  start=$(now_us)
  if ! "$tensorctl" --server "${address[$node]}" get "$name" -o "$out" >"$work/get.out" 2>&1; then
    cat "$work/get.out" >&2
    echo "cluster-demo: FAILED: tensorctl get $name from node $node (${address[$node]})" >&2
    exit 1
  fi
  fetch_ms=$(ms_since "$start")
  compare_npy "$original" "$out" "get $name from node $node, $fetch_ms ms"
}

# The cluster_pulled lines each node in NODES... logged after line
# MARK[node] of its log (0: all of them): a read on that node copied the
# name's latest version from node `from` (`origin`: the version's cluster
# order, its record's etcd revision). Only reads log it; a replica copy
# made for a put does not.
declare -A mark
pulls_since() {
  local node
  for node in "$@"; do
    tail -n +$((${mark[$node]:-0} + 1)) "$work/$node/tensord.log" |
      grep -o 'event=cluster_pulled name=[^ ]* from=[^ ]* bytes=[^ ]* origin=[^ ]*' |
      sed "s/^/    node $node: /" || true
  done
}
set_marks() {
  local node
  for node in "$@"; do mark[$node]=$(wc -l <"$work/$node/tensord.log"); done
}
# The node NODE pulled NAME from, after its mark ("" when it did not pull).
pulled_from() {
  tail -n +$((${mark[$1]:-0} + 1)) "$work/$1/tensord.log" |
    grep -o "event=cluster_pulled name=$2 from=[^ ]*" | tail -n 1 | sed 's/.*from=//' || true
}

# NAME's record in etcd, as tensord wrote it (JSON: writer, size, CRC-32C,
# holders; "origin" only once rewritten, e.g. by a holder joining).
name_record() {
  ETCDCTL_API=3 "$etcdctl" --endpoints="$endpoint" --dial-timeout=1s --command-timeout=2s \
    get --print-value-only "$prefix/names/$1"
}

# Which nodes hold NAME themselves (their own listing; a List never pulls).
holders_of() {
  local name=$1 node list=()
  for node in "${nodes[@]}"; do
    [[ ${pid[$node]} == killed ]] && continue
    if "$tensorctl" --server "${address[$node]}" ls "$name" | grep -q "^$name "; then list+=("$node"); fi
  done
  echo "${list[*]}"
}

echo "==> starting etcd on 127.0.0.1 (client and peer ports chosen by the kernel, data in $work/etcd)"
mkdir -p "$work/etcd"
etcd_ready=false
for attempt in 1 2 3; do  # another process may take a port before etcd binds it
  read -r client_port peer_port < <(free_ports)
  endpoint=http://127.0.0.1:$client_port
  peer=http://127.0.0.1:$peer_port
  rm -rf "$work/etcd/data"
  "$etcd" --name=demo --data-dir="$work/etcd/data" \
    --listen-client-urls="$endpoint" --advertise-client-urls="$endpoint" \
    --listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
    --initial-cluster="demo=$peer" --initial-cluster-state=new \
    --log-level=warn --listen-metrics-urls= >"$work/etcd/etcd.log" 2>&1 &
  etcd_pid=$!
  started+=("$etcd_pid")
  for _ in $(seq 100); do
    kill -0 "$etcd_pid" 2>/dev/null || break
    if ETCDCTL_API=3 "$etcdctl" --endpoints="$endpoint" --dial-timeout=1s --command-timeout=1s \
        endpoint health >/dev/null 2>&1; then
      etcd_ready=true
      break
    fi
    sleep 0.1
  done
  $etcd_ready && break
  echo "    etcd did not come up (attempt $attempt); its log:" >&2
  tail -n 20 "$work/etcd/etcd.log" >&2
  stop_pid "$etcd_pid"
done
$etcd_ready || { echo "cluster-demo: FAILED: etcd did not start" >&2; exit 1; }
echo "    etcd at $endpoint (pid $etcd_pid)"

echo "==> starting tensord nodes a, b, c (lease TTL ${ttl}s, prefix $prefix, 1 GiB host capacity each)"
for node in "${nodes[@]}"; do
  mkdir -p "$work/$node"
  tensord_start "$tensord" "$work/$node" --max-host-bytes=1GiB \
    --handoff-socket="$work/$node/handoff.sock" --etcd-endpoints="$endpoint" \
    --node-name="$node" --etcd-lease-ttl="${ttl}s" --etcd-prefix="$prefix"
  started+=("$server_pid")
  address[$node]=$server
  pid[$node]=$server_pid
  server_pid=""  # now in started; tensord_stop is only for one that failed to start
  echo "    node $node: $server (pid ${pid[$node]}, handoff $work/$node/handoff.sock)"
done

echo "==> tensorctl nodes (asking node a, once it lists all three)"
# A node answers from the member list it reread at its last lease renewal
# (every TTL/3): the nodes started after it show up within that.
listed=false
for _ in $(seq 100); do  # 10 s at most
  "$tensorctl" --server "${address[a]}" nodes >"$work/nodes.out"
  if grep -q '^3 nodes' "$work/nodes.out"; then listed=true; break; fi
  sleep 0.1
done
cat "$work/nodes.out"
$listed || { echo "cluster-demo: FAILED: node a does not list all three nodes after 10 s" >&2; exit 1; }

echo "==> tensorctl watch --cluster demo/ on node c, in the background: the next two puts, wherever made"
# --existing: a put that lands before the watch starts shows as existing.
"$tensorctl" --server "${address[c]}" watch demo/ --cluster --existing --count 2 --for 60s \
  >"$work/watch.out" 2>&1 &
watch_pid=$!
started+=("$watch_pid")

size_mib=4
echo "==> writing demo tensors: float32[1024, 1024] ($size_mib MiB each), seeded random values"
"$python" - "$work/weights.npy" "$work/fresh.npy" <<'PY'
import sys, numpy as np
for seed, path in enumerate(sys.argv[1:]):
    np.save(path, np.random.default_rng(seed).standard_normal((1024, 1024), dtype=np.float32))
PY

echo "==> tensorctl put demo/weights on node a --replicas 2"
start=$(now_us)
"$tensorctl" --server "${address[a]}" put demo/weights "$work/weights.npy" --replicas 2
put_ms=$(ms_since "$start")
echo "    acknowledged after $put_ms ms (tensorctl run, connect included)"

echo "==> who holds demo/weights (each node's own tensorctl ls)"
weights_holders=$(holders_of demo/weights)
for node in "${nodes[@]}"; do
  if [[ " $weights_holders " == *" $node "* ]]; then echo "    node $node: holds it"; else echo "    node $node: -"; fi
done
read -r -a holder_list <<<"$weights_holders"
[[ ${#holder_list[@]} -eq 2 && ${holder_list[0]} == a ]] || {
  echo "cluster-demo: FAILED: expected node a and one other to hold demo/weights after a put with --replicas 2, got: $weights_holders" >&2
  exit 1
}
replica=${holder_list[1]}

echo "==> tensorctl ls --cluster (asking node b: the names' etcd records; NODE is the writer, VERSION the cluster order)"
"$tensorctl" --server "${address[b]}" ls --cluster
echo "    record $prefix/names/demo/weights: $(name_record demo/weights)"

echo "==> fetching demo/weights from node b and node c (tensorctl get -o), comparing the bytes"
reader=b  # the one of b and c without a copy: its first fetch pulls
[[ $replica == b ]] && reader=c
set_marks b c
declare -A before_ms
for node in b c; do
  fetch "$node" demo/weights "$work/weights.npy" before
  before_ms[$node]=$fetch_ms
done
weights_source=$(pulled_from "$reader" demo/weights)

echo "==> which node pulled (event=cluster_pulled in the node logs)"
replica_pull=$(pulled_from "$replica" demo/weights)
mark=()
pulls_since "${nodes[@]}"
echo "    (node $reader held no copy: it read the record, pulled from a holder it lists and served;" \
  "node $replica served its replica, which the put made without a cluster_pulled line)"
[[ -n $weights_source ]] || {
  echo "cluster-demo: FAILED: node $reader served demo/weights without logging a pull" >&2
  exit 1
}
[[ -z $replica_pull ]] || {
  echo "cluster-demo: FAILED: node $replica pulled demo/weights from $replica_pull although it holds a replica" >&2
  exit 1
}
# The reader's node lists itself as one more holder after it answered the
# read (best effort, off the read's path): wait a little for it.
for _ in $(seq 50); do  # 5 s at most
  record=$(name_record demo/weights)
  [[ $record == *"\"$reader\""* ]] && break
  sleep 0.1
done
echo "    record $prefix/names/demo/weights: $record"
[[ $record == *"\"$reader\""* ]] ||
  echo "    WARNING: node $reader did not join the record's holders within 5 s" >&2

echo "==> tensorctl put demo/fresh on node a --replicas 2 (nobody reads it before the kill)"
"$tensorctl" --server "${address[a]}" put demo/fresh "$work/fresh.npy" --replicas 2
fresh_holders=$(holders_of demo/fresh)
echo "    held by: $fresh_holders"
read -r -a holder_list <<<"$fresh_holders"
[[ ${#holder_list[@]} -eq 2 && ${holder_list[0]} == a ]] || {
  echo "cluster-demo: FAILED: expected node a and one other to hold demo/fresh, got: $fresh_holders" >&2
  exit 1
}
fresh_replica=${holder_list[1]}
fresh_reader=b

echo "==> what the watch on node c printed (position, change, name, cluster version, writer, size)"
wait "$watch_pid" || true
sed 's/^/    /' "$work/watch.out"
for name in demo/weights demo/fresh; do
  grep -Eq "^[0-9]+ (published|existing) $name \(cluster version [0-9]+\) written on a " "$work/watch.out" || {
    echo "cluster-demo: FAILED: the cluster watch on node c did not report the put of $name on node a" >&2
    exit 1
  }
done
[[ $fresh_replica == b ]] && fresh_reader=c

echo "==> kill -9 node a (pid ${pid[a]}), the node both puts went to"
set_marks b c
kill -KILL "${pid[a]}"
wait "${pid[a]}" 2>/dev/null || true
killed_at=$(now_us)
pid[a]=killed

echo "==> fetching again from the remaining nodes, comparing the bytes"
declare -A after_ms
for node in b c; do
  fetch "$node" demo/weights "$work/weights.npy" after-weights
  after_ms[weights-$node]=$fetch_ms
done
for node in "$fresh_reader" "$fresh_replica"; do  # first the one that has to pull
  fetch "$node" demo/fresh "$work/fresh.npy" after-fresh
  after_ms[fresh-$node]=$fetch_ms
done
fresh_source=$(pulled_from "$fresh_reader" demo/fresh)
echo "==> pulls logged after the kill"
pulls_since b c
[[ -n $fresh_source ]] || {
  echo "cluster-demo: FAILED: node $fresh_reader served demo/fresh without logging a pull" >&2
  exit 1
}
# Node a is dead (whether or not it is still listed within its TTL): the
# replica is the one holder left that can serve.
[[ $fresh_source == "$fresh_replica" ]] || {
  echo "cluster-demo: FAILED: node $fresh_reader pulled demo/fresh from $fresh_source, not from the replica $fresh_replica" >&2
  exit 1
}
for node in b c; do  # both held demo/weights before the kill
  again=$(pulled_from "$node" demo/weights)
  [[ -z $again ]] || {
    echo "cluster-demo: FAILED: node $node pulled demo/weights again (from $again) although it held it" >&2
    exit 1
  }
done

echo "==> waiting for node a to leave the member list (lease TTL ${ttl}s)"
left_ms=""
for _ in $(seq 150); do  # 15 s at most
  if ! "$tensorctl" --server "${address[b]}" nodes | grep -q '^a '; then
    left_ms=$(ms_since "$killed_at")
    break
  fi
  sleep 0.1
done
"$tensorctl" --server "${address[b]}" nodes
[[ -n $left_ms ]] || echo "    WARNING: node a is still listed 15 s after kill -9 (lease TTL ${ttl}s)" >&2
echo "==> tensorctl ls --cluster (asking node b: the records outlive node a, still their writer)"
"$tensorctl" --server "${address[b]}" ls --cluster

echo "==> stopping nodes b and c, then etcd (SIGTERM by PID)"
for node in c b; do stop_pid "${pid[$node]}"; done
stop_pid "$etcd_pid"

echo "==> summary"
echo "    cluster: etcd $endpoint; nodes a ${address[a]}, b ${address[b]}, c ${address[c]}"
echo "    demo/weights ($size_mib MiB): put on a with --replicas 2, acknowledged in $put_ms ms, then held by a and $replica"
echo "      fetched from b in ${before_ms[b]} ms and from c in ${before_ms[c]} ms, both byte-identical;" \
  "$reader pulled it from $weights_source on that first fetch, $replica had its replica"
echo "    demo/fresh ($size_mib MiB): put on a with --replicas 2, held by a and $fresh_replica, read by nobody before the kill"
echo "    after kill -9 of a, every fetch byte-identical:"
echo "      demo/weights from b in ${after_ms[weights-b]} ms, from c in ${after_ms[weights-c]} ms (both held copies by then)"
echo "      demo/fresh from $fresh_reader in ${after_ms[fresh-$fresh_reader]} ms (its first read: pulled from $fresh_source)," \
  "from $fresh_replica in ${after_ms[fresh-$fresh_replica]} ms (its replica)"
if [[ -n $left_ms ]]; then
  echo "    node a left the member list $left_ms ms after the kill (lease TTL ${ttl}s)"
fi
echo "    (fetch times are whole tensorctl runs: process start, connect, fetch, .npy write)"
echo "cluster demo finished: every fetch on every node was byte-exact, before and after kill -9 of the node the puts went to"

#!/usr/bin/env bash
# Instructions per small call, client and server, counted by callgrind: the
# empty gRPC call and a call answered by 4 KiB (tensord-bench's own callback
# server; the second is what moving a 4 KiB fetch's bytes through gRPC
# costs), Stat and a 4 KiB Fetch against tensord, and the empty call to that
# server closing idle connections as tensord does by default (what gRPC's
# max_connection_idle filter adds to every call), and the empty call made as
# tensord's client makes Stat and small fetches (its channel arguments and
# reused completion queue: the gRPC part of their client side). Rates on a shared 2-core
# VM move by 10% from run to run; instruction counts move by about 1%, so a
# change of a few hundred instructions per call shows. Kernel time (syscalls, wake-ups) is not
# counted: tensord-bench --sections small measures that.
#
# Each side is counted over two runs of one client (1,000 and 3,000 calls,
# after 300 warm-up calls) and the difference is divided by 2,000, so start-up,
# connecting and warm-up cancel. The side not counted runs natively, so the
# counted side sees calls at their normal pace.
#
# Usage: scripts/count-small-call-instructions.sh [BUILD_DIR]   (default build)
#        TENSORD_EXTRA_ARGS="--flag=value ..." adds flags to the tensord it starts.
# Needs valgrind (installed through deploy/install-deps.sh when missing) and
# BUILD_DIR/server/tensord and BUILD_DIR/bench/tensord-bench built.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"
build_dir=$(realpath -m "${1:-build}")
tensord=$build_dir/server/tensord
bench=$build_dir/bench/tensord-bench
for binary in "$tensord" "$bench"; do
  if [[ ! -x $binary ]]; then
    echo "count-small-call-instructions: no $binary; build it first: scripts/build.sh $build_dir" >&2
    exit 2
  fi
done
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  TENSORD_DEPS_EXTRA=valgrind deploy/install-deps.sh build
fi

work=$(mktemp -d /tmp/tensord-callgrind-XXXXXX)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# start_server KIND UNDER_CALLGRIND: sets server_pid and address.
start_server() {
  local kind=$1 counted=$2 ready=$work/ready
  rm -f "$ready" "$work"/server.out.*
  local command=("$tensord" --listen=127.0.0.1:0 --ready-file="$ready" --handoff-socket=off
                 --log-level=warning)
  # TENSORD_EXTRA_ARGS: more tensord flags, split on spaces.
  if [[ -n ${TENSORD_EXTRA_ARGS:-} ]]; then read -r -a extra <<<"$TENSORD_EXTRA_ARGS"; command+=("${extra[@]}"); fi
  if [[ $kind == empty || $kind == payload || $kind == empty-client-path ]]; then
    command=("$bench" --serve-empty=127.0.0.1:0 --ready-file="$ready")
  elif [[ $kind == empty-closing-idle ]]; then
    command=("$bench" --serve-empty=127.0.0.1:0 --serve-empty-closing-idle --ready-file="$ready")
  fi
  if [[ $counted == yes ]]; then
    command=(valgrind --tool=callgrind --callgrind-out-file="$work/server.out.%p" "${command[@]}")
  fi
  "${command[@]}" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    [[ -s $ready ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "count-small-call-instructions: the server exited:" >&2
      tail -20 "$work/server.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  address=$(head -1 "$ready")
  if [[ $kind == stat || $kind == fetch ]]; then "$bench" --call-loop=put --target="$address"; fi
}

stop_server() {
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

loop() {  # loop KIND CALLS [command prefix...]
  local kind=$1 calls=$2 call_loop=$1
  shift 2
  # The closing-idle server answers the same empty call.
  [[ $kind == empty-closing-idle ]] && call_loop=empty
  "$@" "$bench" --call-loop="$call_loop" --target="$address" --calls="$calls" >/dev/null 2>"$work/client.log" ||
    { echo "count-small-call-instructions: the $kind loop failed:" >&2; tail -20 "$work/client.log" >&2; exit 1; }
}

summary() { awk '/^summary:/ {print $2}' "$1"; }

# Server instructions per call: counters zeroed after a warm-up run, dumped
# after each counted run (a dump also zeroes them).
count_server() {
  local kind=$1
  start_server "$kind" yes
  loop "$kind" 100
  callgrind_control -z "$server_pid" &>/dev/null
  loop "$kind" 1000
  callgrind_control -d short "$server_pid" &>/dev/null
  loop "$kind" 3000
  callgrind_control -d long "$server_pid" &>/dev/null
  local short long
  short=$(summary "$(ls "$work"/server.out.*.1)")
  long=$(summary "$(ls "$work"/server.out.*.2)")
  stop_server
  server[$kind]=$(((long - short) / 2000))
}

count_client() {
  local kind=$1
  start_server "$kind" no
  loop "$kind" 1000 valgrind --tool=callgrind --callgrind-out-file="$work/client.short"
  loop "$kind" 3000 valgrind --tool=callgrind --callgrind-out-file="$work/client.long"
  stop_server
  client[$kind]=$((($(summary "$work/client.long") - $(summary "$work/client.short")) / 2000))
}

declare -A server client
kinds=(empty empty-closing-idle empty-client-path payload stat fetch)
for kind in "${kinds[@]}"; do
  count_server "$kind"
  count_client "$kind"
done
echo "instructions per call (callgrind; user space only), $(date -u +%FT%TZ)"
printf '%-22s %10s %10s %10s %8s\n' call client server total "vs empty"
empty_total=$((client[empty] + server[empty]))
payload_total=$((client[payload] + server[payload]))
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3fx", a / b}'; }
declare -A label=([empty]="empty call" [empty-closing-idle]="empty, closing idle"
                  [empty-client-path]="empty, client's path" [payload]="4 KiB answer" [stat]="Stat"
                  [fetch]="Fetch 4 KiB")
for kind in "${kinds[@]}"; do
  total=$((client[$kind] + server[$kind]))
  printf '%-22s %10d %10d %10d %8s' "${label[$kind]}" "${client[$kind]}" "${server[$kind]}" "$total" \
    "$(ratio "$total" "$empty_total")"
  [[ $kind == fetch ]] && printf '   %s of the 4 KiB answer' "$(ratio "$total" "$payload_total")"
  printf '\n'
done

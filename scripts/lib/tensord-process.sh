# Sourced by scripts that run a tensord of their own: start it on 127.0.0.1
# with a ready file, and stop it (by its PID only) when the script exits.
#   tensord_start BINARY WORK_DIR [FLAGS...]   sets server_pid and server (its address)
#   tensord_stop                               SIGTERM, then wait; safe to call twice
# Callers chain tensord_stop into their own EXIT trap.
server_pid=""
server=""

tensord_start() {
  local binary=$1 work=$2
  shift 2
  "$binary" --listen=127.0.0.1:0 --ready-file="$work/ready" "$@" 2>"$work/tensord.log" &
  server_pid=$!
  local _
  for _ in $(seq 100); do
    [[ -f $work/ready ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/tensord.log" >&2; return 1; }
    sleep 0.1
  done
  [[ -f $work/ready ]] || { echo "tensord did not become ready" >&2; cat "$work/tensord.log" >&2; return 1; }
  server=$(head -n1 "$work/ready")
}

tensord_stop() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  server_pid=""
}

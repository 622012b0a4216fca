#!/usr/bin/env bash
# Fuzzes tensord's parsers of untrusted input with libFuzzer, longer than the
# 20 s CTest smoke tests (label "fuzz") do.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 60
#   TARGET              npy, safetensors, stream_message, wire_tensor_info,
#                       request_validation, handoff_session, token_file,
#                       snapshot_format, cluster_record (a trailing _fuzz is
#                       fine); default all
#
# Builds build-fuzz (Clang 14, TENSORD_FUZZ=ON, ASan+UBSan; Ninja and ccache),
# then runs the targets, one process each and one per core at a time
# (TENSORD_FUZZ_PARALLEL, default nproc), into build-fuzz/corpus/<name>
# (kept between runs, so coverage accumulates) seeded from the committed
# tests/fuzz/corpus/<name>. Crashing inputs land in build-fuzz/artifacts/<name>/
# and the full output in build-fuzz/logs/<name>.log. Prints executions per
# target and exits non-zero when any target crashed, leaked, hung or ran out
# of memory. Reproduce one input with: build-fuzz/tests/fuzz/<name>_fuzz FILE
# Environment: TENSORD_FUZZ_JOBS (build parallelism, default nproc);
# TENSORD_FUZZ_ARGS (more libFuzzer flags, e.g. "-fork=1 -ignore_crashes=1"
# to keep fuzzing past a known crash, or "-dict=FILE").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"

all_targets=(npy safetensors stream_message wire_tensor_info request_validation handoff_session
             token_file snapshot_format cluster_record)

seconds=60
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
if [[ $# -eq 0 ]]; then set -- "${all_targets[@]}"; fi
targets=()
for arg in "$@"; do
  name=${arg%_fuzz}
  if [[ " ${all_targets[*]} " != *" ${name} "* ]]; then
    echo "fuzz.sh: unknown target '$arg' (known: ${all_targets[*]})" >&2
    exit 2
  fi
  targets+=("$name")
done

deploy/install-deps.sh

# Cache hits across clones, as scripts/build.sh does.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
build_dir=build-fuzz
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DTENSORD_FUZZ=ON "-DTENSORD_SANITIZE=address;undefined" -DTENSORD_CUDA=OFF >/dev/null
fi
cmake --build "$build_dir" -j "${TENSORD_FUZZ_JOBS:-$(nproc)}" \
  --target "${targets[@]/%/_fuzz}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# shellcheck disable=SC2206
extra_args=(${TENSORD_FUZZ_ARGS:-})
# One target: fuzzes it, then writes its summary line (and, on a crash, its
# report) to $results/NAME.summary (.report). Targets run side by side,
# one per core (libFuzzer's run is one thread): CI's fuzz stage takes the
# time of its slowest core, not the sum.
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
fuzz_one() {
  local name=$1 status=0 executions corpus_size result artifact
  local binary=$build_dir/tests/fuzz/${name}_fuzz
  local corpus=$build_dir/corpus/$name
  local artifacts=$build_dir/artifacts/$name
  local log=$build_dir/logs/$name.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  "$binary" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${extra_args[@]}" "$corpus" "tests/fuzz/corpus/$name" >"$log" 2>&1 || status=$?
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  corpus_size=$(find "$corpus" -type f | wc -l)
  if ((status == 0)); then
    result="ok"
  else
    artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | cut -d' ' -f5 || true)
    result="FAILED (exit $status) ${artifact:-see $log}"
    {
      echo "=== ${name}_fuzz: crashed"
      grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*deadly signal|.*Timeout|.*out-of-memory)" \
        "$log" | head -5 | sed 's/^/  /' || true
      # The input itself, so a log from another machine (CI) is enough to
      # reproduce: base64 -d > FILE, then run the target on FILE.
      if [[ -n $artifact && -f $artifact ]] && (($(stat -c %s "$artifact") <= 4096)); then
        echo "  input (base64): $(base64 -w0 "$artifact")"
      fi
    } >"$results/$name.report"
  fi
  printf '%-20s %12s executions %6s corpus files  %s\n' \
    "$name" "${executions:-?}" "$corpus_size" "$result" >"$results/$name.summary"
}

parallel=${TENSORD_FUZZ_PARALLEL:-$(nproc)}
running=0
for name in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "=== ${name}_fuzz for ${seconds}s"
  fuzz_one "$name" &
  running=$((running + 1))
done
wait || true

failed=()
summary=()
for name in "${targets[@]}"; do
  [[ -f $results/$name.report ]] && cat "$results/$name.report"
  if [[ ! -f $results/$name.summary ]]; then
    summary+=("$(printf '%-20s %s' "$name" "FAILED: no result (see $build_dir/logs/$name.log)")")
    failed+=("$name")
    continue
  fi
  summary+=("$(cat "$results/$name.summary")")
  [[ -f $results/$name.report ]] && failed+=("$name")
done

echo
echo "=== fuzz summary (${seconds}s per target; logs in $build_dir/logs)"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
  echo "crashes found in: ${failed[*]}" >&2
  exit 1
fi

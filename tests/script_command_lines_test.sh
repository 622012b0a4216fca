#!/usr/bin/env bash
# Every script a user runs (scripts/*.sh, deploy/install-deps.sh) answers
# --help with its usage and exit 0, and refuses an unknown option with exit 2,
# naming it and the closest known one, before it installs or builds anything.
# A script that neither sources scripts/lib/command-line.sh nor mentions
# --help is reported without being run, so this test never starts a
# script's real work.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run SCRIPT ARGS...: sets status, out, err (20 s at most).
run() {
  local script=$1
  shift
  status=0
  timeout 20 "$script" "$@" >"$scratch/out" 2>"$scratch/err" </dev/null || status=$?
  out=$(cat "$scratch/out")
  err=$(cat "$scratch/err")
}

scripts=("$root"/scripts/*.sh "$root/deploy/install-deps.sh")
for script in "${scripts[@]}"; do
  name=${script#"$root"/}
  if ! grep -q -e 'lib/command-line.sh' -e '--help' "$script"; then
    fail "$name: handles no --help (source scripts/lib/command-line.sh)"
    continue
  fi
  run "$script" --help
  [[ $status == 0 ]] || fail "$name --help: exit $status, expected 0 ($err)"
  [[ -n $out ]] || fail "$name --help: printed no usage on standard output"
  [[ $out != *"set -euo"* ]] || fail "$name --help: the usage runs into the script's code"

  run "$script" --no-such-option
  [[ $status == 2 ]] || fail "$name --no-such-option: exit $status, expected 2 ($out$err)"
  [[ $err == *"'--no-such-option'"* ]] || fail "$name --no-such-option: the error does not name it: $err"

  run "$script" --hepl
  [[ $status == 2 ]] || fail "$name --hepl: exit $status, expected 2 ($out$err)"
  [[ $err == *"did you mean '--help'?"* ]] || fail "$name --hepl: no suggestion of --help: $err"
done

# An option the script knows, misspelt, is named back.
for case in "scripts/test.sh --al:--all" "scripts/build.sh --configure-onyl:--configure-only" \
            "scripts/weights-demo.sh --workrs=2:--workers" "scripts/cluster-demo.sh --build-dri=x:--build-dir" \
            "scripts/test.sh --output-on-failur:--output-on-failure"; do
  command_line=${case%:*}
  expected=${case##*:}
  # shellcheck disable=SC2086
  run "$root/${command_line%% *}" ${command_line#* }
  [[ $status == 2 && $err == *"did you mean '$expected'?"* ]] ||
    fail "$command_line: expected exit 2 suggesting $expected, got $status: $err"
done

if ((failures > 0)); then
  echo "$failures failure(s) among ${#scripts[@]} scripts" >&2
  exit 1
fi
echo "script command lines: ${#scripts[@]} scripts answer --help and refuse unknown options"

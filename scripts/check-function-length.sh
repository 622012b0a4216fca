#!/usr/bin/env bash
# Fails when a function in server/, service/ or client/src/ is longer than
# 120 lines, from its signature to its closing brace (lambdas count toward
# the function around them), and names each one with its file and lines.
# lizard (PyPI, scripts/requirements-tools.txt) measures; it is installed into
# BUILD_DIR/python-venvs/tools on first use.
# Usage: scripts/check-function-length.sh [--root DIR] [BUILD_DIR]   (default build/)
#        scripts/check-function-length.sh --self-test [BUILD_DIR]   (checks that it catches one)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options --self-test --root= -- "$@"

readonly max_lines=120
self_test=0 root=$PWD
while [[ $# -gt 0 ]]; do
  case $1 in
    --self-test) self_test=1; shift ;;
    --root=*) root=${1#--root=}; shift ;;
    --root) root=$2; shift 2 ;;
    *) break ;;
  esac
done
if [[ $# -gt 1 ]]; then refuse_argument "$2"; fi
repo=$PWD
mkdir -p "${1:-build}"
build_dir=$(cd "${1:-build}" && pwd)
# shellcheck source=scripts/lib/python-venvs.sh
source scripts/lib/python-venvs.sh
make_venv tools scripts/requirements-tools.txt
lizard=$venvs/tools/bin/lizard

if ((self_test)); then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  expect() {  # expect PASS|FAIL LINES: a tree whose one function has LINES body lines
    rm -rf "${scratch:?}/tree" && mkdir -p "$scratch/tree/service/common"
    {
      echo "int Long(int x) {"
      for ((i = 0; i < $2; ++i)); do echo "  x += $i;"; done
      echo "  return x;"
      echo "}"
    } >"$scratch/tree/service/common/long.cc"
    if "$0" --root "$scratch/tree" "$build_dir" >"$scratch/out" 2>&1; then got=PASS; else got=FAIL; fi
    if [[ $got != "$1" ]]; then
      cat "$scratch/out" >&2
      echo "check-function-length self-test: a function of $(($2 + 3)) lines gave $got, expected $1" >&2
      exit 1
    fi
  }
  expect PASS $((max_lines - 3))
  expect FAIL $((max_lines - 2))
  grep -q 'service/common/long.cc:1-' "$scratch/out" || {
    echo "check-function-length self-test: the failure did not name the file and its lines" >&2
    exit 1
  }
  echo "check-function-length self-test: passed"
  exit 0
fi

folders=()
for folder in server service client/src; do
  [[ -d $root/$folder ]] && folders+=("$root/$folder")
done
# CSV columns: nloc, ccn, tokens, parameters, length, "name@first-last@file", ...
# (later columns may hold commas; the fifth and sixth cannot).
long=$("$lizard" -l cpp --csv "${folders[@]}" |
  awk -F, -v max="$max_lines" -v root="$root/" '$5 + 0 > max {
    location = $6; gsub(/"/, "", location); split(location, part, "@")
    file = part[3]; sub(root, "", file)
    printf "  %s:%s %s: %d lines\n", file, part[2], part[1], $5 }')
if [[ -n $long ]]; then
  echo "check-function-length: functions over $max_lines lines (split them):" >&2
  echo "$long" >&2
  exit 1
fi
echo "check-function-length: no function in server/, service/ or client/src/ is over $max_lines lines"

#!/usr/bin/env bash
# Checks that every C++ file git tracks (*.cc, *.h, *.cu) is formatted as
# .clang-format says, with clang-format-14; prints the files that are not
# and how to fix them.
# Usage: scripts/check-format.sh           check (exit 1 when a file is not formatted)
#        scripts/check-format.sh --fix     format those files in place
#        scripts/check-format.sh --self-test   (checks that it catches a misformatted file)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options --fix --self-test -- "$@"
if [[ $# -gt 1 ]]; then refuse_argument "$2"; fi

clang_format=${TENSORD_CLANG_FORMAT:-clang-format-14}
if ! command -v "$clang_format" >/dev/null; then
  echo "$script_name: $clang_format is missing (deploy/install-deps.sh installs it)" >&2
  exit 1
fi

if [[ ${1:-} == --self-test ]]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cp .clang-format "$scratch/"
  printf 'int  Misformatted( int x ){return x;}\n' >"$scratch/bad.cc"
  if "$clang_format" --dry-run --Werror "$scratch/bad.cc" 2>/dev/null; then
    echo "$script_name self-test: a misformatted file passed" >&2
    exit 1
  fi
  "$clang_format" -i "$scratch/bad.cc"
  if ! "$clang_format" --dry-run --Werror "$scratch/bad.cc"; then
    echo "$script_name self-test: a file it formatted itself did not pass" >&2
    exit 1
  fi
  echo "$script_name self-test: ok"
  exit 0
fi

mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
if [[ ${1:-} == --fix ]]; then
  printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 16 "$clang_format" -i
  echo "$script_name: formatted ${#files[@]} files"
  exit 0
fi
unformatted=()
for file in "${files[@]}"; do
  if ! "$clang_format" --dry-run --Werror "$file" >/dev/null 2>&1; then unformatted+=("$file"); fi
done
if ((${#unformatted[@]} > 0)); then
  printf '%s: not formatted as .clang-format says:\n' "$script_name" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "$script_name: run scripts/check-format.sh --fix (clang-format-14 -i FILE...)" >&2
  exit 1
fi
echo "$script_name: ${#files[@]} files formatted"

#!/usr/bin/env bash
# Runs Clang's thread-safety analysis (-Wthread-safety, as errors) over every
# C++ file of server/, service/, client/, bench/ and tests/ that BUILD_DIR
# compiles, with the flags BUILD_DIR uses (its compile_commands.json; GCC's
# builds included: only parsing is done, -fsyntax-only, nothing is built).
# Members a tensord::Mutex guards are annotated ABSL_GUARDED_BY
# (service/common/mutex.h); this is what checks that they are only touched
# with it held.
# Usage: scripts/check-thread-safety.sh [BUILD_DIR]   (default: build)
#        scripts/check-thread-safety.sh --self-test   (checks that it catches an unguarded access)
# Environment: TENSORD_CHECK_JOBS (parallel clang processes, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options --self-test -- "$@"

clang=${TENSORD_CLANG:-clang++-14}
if ! command -v "$clang" >/dev/null; then
  echo "$script_name: $clang is missing (deploy/install-deps.sh installs it)" >&2
  exit 1
fi
analysis=(-fsyntax-only -Wno-everything -Wthread-safety -Wthread-safety-beta -Werror=thread-safety
          -Werror=thread-safety-beta)

if [[ ${1:-} == --self-test ]]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cat >"$scratch/guarded.cc" <<'EOF'
#include "service/common/mutex.h"
class Counter {
 public:
  void Add() { ++count_; }  // not under mutex_: the analysis must refuse it
 private:
  tensord::Mutex mutex_;
  int count_ ABSL_GUARDED_BY(mutex_) = 0;
};
EOF
  if "$clang" -std=c++20 -I. "${analysis[@]}" "$scratch/guarded.cc" 2>"$scratch/log"; then
    echo "$script_name self-test: an unguarded write to a guarded member passed" >&2
    exit 1
  fi
  grep -q "requires holding mutex 'mutex_'" "$scratch/log" || {
    cat "$scratch/log" >&2
    echo "$script_name self-test: clang failed, but not with the thread-safety error" >&2
    exit 1
  }
  sed -i 's/void Add() { ++count_; }.*/void Add() { tensord::MutexLock lock(\&mutex_); ++count_; }/' "$scratch/guarded.cc"
  if ! "$clang" -std=c++20 -I. "${analysis[@]}" "$scratch/guarded.cc" 2>"$scratch/log"; then
    cat "$scratch/log" >&2
    echo "$script_name self-test: a guarded write under its mutex was refused" >&2
    exit 1
  fi
  echo "$script_name self-test: ok"
  exit 0
fi

if [[ $# -gt 1 ]]; then refuse_argument "$2"; fi
build_dir=${1:-build}
database=$build_dir/compile_commands.json
if [[ ! -f $database ]]; then
  echo "$script_name: $database is missing: configure $build_dir first (scripts/build.sh $build_dir)" >&2
  exit 1
fi

# One line per file that reaches service/common/mutex.h through its includes
# (the only source of the annotations; the others have nothing to check):
# the include paths, defines and -std of its command.
python3 - "$database" "$PWD" >"$build_dir/thread-safety-commands.txt" <<'EOF'
import functools, json, os, re, shlex, sys
database, root = sys.argv[1], sys.argv[2]
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

@functools.lru_cache(maxsize=None)
def reaches_mutex(path, depth=0):
    if path.endswith("service/common/mutex.h"):
        return True
    if depth > 64:
        return False
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return False
    for name in include.findall(text):
        for base in (root, os.path.join(root, "client/include"), os.path.dirname(path)):
            candidate = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(candidate):
                if reaches_mutex(candidate, depth + 1):
                    return True
                break
    return False

seen = set()
for entry in json.load(open(database)):
    path = entry["file"]
    relative = path[len(root) + 1:] if path.startswith(root + "/") else path
    if not relative.split("/")[0] in ("server", "service", "client", "bench", "tests"):
        continue
    if not relative.endswith(".cc") or relative in seen or not reaches_mutex(path):
        continue
    seen.add(relative)
    words = shlex.split(entry["command"]) if "command" in entry else entry["arguments"]
    kept = []
    for i, w in enumerate(words):
        if w.startswith(("-I", "-D", "-std=")):
            kept.append(w)
        elif w == "-isystem" and i + 1 < len(words):  # its path is the next word
            kept += [w, words[i + 1]]
    print(shlex.join(kept + [path]))
EOF
files=$(wc -l <"$build_dir/thread-safety-commands.txt")
echo "$script_name: $files files, $clang ${analysis[*]}"
# xargs exits 123 when any clang failed; each failure prints its errors.
if ! xargs -P "${TENSORD_CHECK_JOBS:-$(nproc)}" -L 1 "$clang" "${analysis[@]}" \
     <"$build_dir/thread-safety-commands.txt"; then
  echo "$script_name: the thread-safety analysis found errors (above)" >&2
  exit 1
fi
echo "$script_name: no thread-safety errors in $files files"

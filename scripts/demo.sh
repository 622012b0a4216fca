#!/usr/bin/env bash
# The main job, from a fresh Debian bookworm machine: installs the packages
# that building needs (deploy/install-deps.sh build), configures build-demo/
# (a unity build: the sources of each library compiled as a few large files,
# about half the CPU time of build/ from scratch) and builds only tensord and
# tensorctl, starts tensord on 127.0.0.1, puts a demo
# tensor with tensorctl, fetches it back, compares the bytes, lists and stats
# the registry, then stops the server (by its PID). Prints a line as each
# stage starts and how long it took (deps, configure, build, run).
# Usage: scripts/demo.sh [--help]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"
if [[ $# -gt 0 ]]; then refuse_argument "$1"; fi

demo_start=$SECONDS
stage_start=$SECONDS
stage_times=()
stage() {  # stage NAME DESCRIPTION: the next stage begins
  stage_name=$1
  stage_start=$SECONDS
  echo "==> [$1] $2"
}
stage_done() {
  local took=$((SECONDS - stage_start))
  stage_times+=("$stage_name ${took}s")
  echo "    [$stage_name] took ${took}s"
}

stage deps "installing the Debian packages tensord's build needs, if any are missing (deploy/install-deps.sh build)"
deploy/install-deps.sh build
stage_done

build_dir=build-demo
stage configure "configuring $build_dir/ (CMake, Ninja, ccache; a unity build of tensord and tensorctl)"
# The tests need packages the demo does not install; scripts/test.sh builds
# them, and everything else, in build/.
# Optimised as build/ is (-O2), without debug info: a fifth less to compile.
scripts/build.sh --configure-only "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" -DTENSORD_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON
stage_done

stage build "building tensord and tensorctl ($(nproc) jobs; several minutes from scratch on 2 cores, seconds once built)"
build_log=$build_dir/demo-build.log
# A line every tenth of a long build (a first one), so it shows it is moving.
show_progress() {
  local line shown=0 tenth
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$build_log"
    [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] || continue
    tenth=$((10 * BASH_REMATCH[1] / BASH_REMATCH[2]))
    if ((BASH_REMATCH[2] >= 20 && tenth > shown)); then
      shown=$tenth
      echo "    ${BASH_REMATCH[1]}/${BASH_REMATCH[2]} build steps ($((SECONDS - stage_start))s)"
    fi
  done
}
: >"$build_log"
if ! TARGETS="tensord tensorctl" scripts/build.sh "$build_dir" 2>&1 | show_progress; then
  tail -n 40 "$build_log" >&2
  echo "$script_name: the build failed; the whole log is $build_log" >&2
  exit 1
fi
stage_done

stage run "running the demo"
# shellcheck source=scripts/lib/tensord-process.sh
source scripts/lib/tensord-process.sh
work=$(mktemp -d)
trap 'tensord_stop; rm -rf "$work"' EXIT

echo "==> starting tensord (gRPC on 127.0.0.1, port chosen by the kernel; local handoff socket; 1 GiB host capacity)"
tensord_start "$build_dir/server/tensord" "$work" --max-host-bytes=1GiB --handoff-socket="$work/tensord.sock"
export TENSORD_SERVER=$server
echo "    serving on $TENSORD_SERVER (pid $server_pid)"

echo "==> writing a demo tensor: float32[256, 1024] (1 MiB), values i * 0.5"
# perl is part of every Debian install; the .npy format is a short header
# (padded to 64 bytes) and the little-endian float32 values.
perl -e '
  my $header = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (256, 1024), }";
  $header .= " " while (10 + length($header) + 1) % 64;
  print "\x93NUMPY\x01\x00", pack("v", length($header) + 1), $header, "\n";
  print pack("f<*", map { $_ * 0.5 } 0 .. 256 * 1024 - 1);' >"$work/demo.npy"

echo "==> tensorctl put demo/embeddings"
"$build_dir/client/tensorctl/tensorctl" put demo/embeddings "$work/demo.npy"
echo "==> tensorctl get demo/embeddings"
"$build_dir/client/tensorctl/tensorctl" get demo/embeddings -o "$work/fetched.npy"
# The same dtype and shape in the header, the same 1 MiB of values.
perl -e '
  sub npy { open(my $f, "<:raw", $_[0]) or die "$_[0]: $!"; local $/; my $b = <$f>;
            my $length = unpack("v", substr($b, 8, 2));
            my $header = substr($b, 10, $length);
            my ($descr) = $header =~ /\x27descr\x27: \x27([^\x27]+)\x27/;
            my ($shape) = $header =~ /\x27shape\x27: \(([^)]*)\)/;
            return ($descr, $shape, substr($b, 10 + $length)); }
  my @put = npy($ARGV[0]); my @fetched = npy($ARGV[1]);
  my $same = $put[0] eq $fetched[0] && $put[1] eq $fetched[1] && $put[2] eq $fetched[2];
  printf "    fetched %s[%s]: %s what was put\n", $fetched[0] eq "<f4" ? "float32" : $fetched[0],
         $fetched[1], $same ? "byte-identical to" : "DIFFERENT from";
  exit($same ? 0 : 1);' "$work/demo.npy" "$work/fetched.npy"
echo "==> tensorctl ls"
"$build_dir/client/tensorctl/tensorctl" ls
echo "==> tensorctl stat demo/embeddings"
"$build_dir/client/tensorctl/tensorctl" stat demo/embeddings
echo "==> stopping tensord"
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
echo "==> server log"
cat "$work/tensord.log"
stage_done

printf -v stage_summary '%s, ' "${stage_times[@]}"
echo "demo finished in $((SECONDS - demo_start))s (${stage_summary%, }): a tensor went in and came back byte-exact"

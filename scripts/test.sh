#!/usr/bin/env bash
# Runs tensord's test suite: installs missing Debian packages, builds
# everything (Ninja + ccache, in build/), and runs the unit and integration
# tests (real tensord processes) and the benchmark's smoke run with CTest.
# Usage: scripts/test.sh [--all] [CTEST ARGUMENTS...]
#   (none)     every test but the slow ones (CTest labels scale, soak and
#              jepsen): about 3 minutes on 2 cores once built
#   --all      every test, the slow ones too (several minutes more); CI
#              runs them in a stage of their own: ctest -L 'scale|soak|jepsen'
#   CTEST ARGUMENTS go to ctest, e.g. -R LocalHandoff, -L integration, -j 1,
#              and choose among the tests above: scripts/test.sh --all -R ScaleTest
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
slow_labels='scale|soak|jepsen'

# ctest's own options (a trailing '=' when one takes a value), read from its
# --help, so a typo is refused here, before the build, with the nearest named.
ctest_options() {
  command -v ctest >/dev/null || return 0
  ctest --help | awk '/^ +-/ {
    sub(/ += .*/, "")
    n = split($0, pieces, ",")
    for (i = 1; i <= n; i++) {
      piece = pieces[i]; sub(/^ +/, "", piece)
      option = piece; sub(/[ =[<].*/, "", option)
      if (option ~ /^-/) print option (piece ~ /</ ? "=" : "")
    }
  }'
}

mapfile -t known_ctest_options < <(ctest_options)
all=0
ctest_arguments=()
for argument in "$@"; do
  if [[ $argument == --all ]]; then
    all=1
  elif [[ $argument == --*=* && " ${known_ctest_options[*]} " == *" ${argument%%=*}= "* ]]; then
    # ctest takes most values only as the next argument: --tests-regex=X
    # would be ignored, and every test run.
    ctest_arguments+=("${argument%%=*}" "${argument#*=}")
  else
    ctest_arguments+=("$argument")
  fi
done
if ((${#known_ctest_options[@]} > 0)); then
  # -j4: ctest takes the job count attached too.
  checked=()
  for argument in "${ctest_arguments[@]}"; do
    [[ $argument =~ ^-j[0-9]+$ ]] || checked+=("$argument")
  done
  reject_unknown_options --all "${known_ctest_options[@]}" -- "${checked[@]}"
else
  reject_unknown_options --all -- "${ctest_arguments[@]}"  # --help; ctest checks the rest
fi

deploy/install-deps.sh
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORD_BUILD_TESTS=ON
selection=()
((all)) || selection=(-LE "$slow_labels")
ctest --test-dir build --output-on-failure -j "$(nproc)" "${selection[@]}" "${ctest_arguments[@]}"
if ((!all)); then
  echo "test.sh: left out the slow tests (labels $slow_labels); scripts/test.sh --all runs them too" >&2
fi

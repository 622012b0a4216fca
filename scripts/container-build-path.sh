#!/usr/bin/env bash
# Prints the offline container builder (rootful podman, ../shared/tools/
# container-build) or nothing: $CONTAINER_BUILD, then beside the checkout
# (a CI clone may sit elsewhere, so the usual places too), then PATH.
# Usage: scripts/container-build-path.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
reject_unknown_options -- "$@"
for candidate in "${CONTAINER_BUILD:-}" "$PWD/../shared/tools/container-build" \
                 /work/shared/tools/container-build "$(command -v container-build || true)"; do
  if [[ -n $candidate && -x $candidate ]]; then
    echo "$candidate"
    exit 0
  fi
done

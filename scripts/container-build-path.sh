#!/usr/bin/env bash
# Prints the offline container builder (rootful podman, ../shared/tools/
# container-build) or nothing: $CONTAINER_BUILD, then beside the checkout
# (a CI clone may sit elsewhere, so the usual places too), then PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
for candidate in "${CONTAINER_BUILD:-}" "$PWD/../shared/tools/container-build" \
                 /work/shared/tools/container-build "$(command -v container-build || true)"; do
  if [[ -n $candidate && -x $candidate ]]; then
    echo "$candidate"
    exit 0
  fi
done

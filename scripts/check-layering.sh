#!/usr/bin/env bash
# Fails when an #include crosses a layer the architecture forbids:
#   - service/<layer>/ includes only the layers below it (table below);
#   - service/ takes from the public API only tensord/dlpack.h and
#     tensord/retention.h (plus the generated tensord/v1/*), nothing of client/;
#   - client/ (library and tensorctl) never includes service/registry,
#     security, transport, snapshot or memory: the client library is built
#     on common, dlpack, device and wire (tensorctl also reads files through
#     formats);
#   - a public header (client/include/tensord/) includes only tensord/*.h,
#     <dlpack/dlpack.h>, Abseil and the standard library.
# Usage: scripts/check-layering.sh [ROOT]   (default: the repository)
#        scripts/check-layering.sh --self-test   (checks that it catches each rule)
set -euo pipefail

if [[ ${1:-} == --self-test ]]; then
  script=$(readlink -f "$0")
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  expect() {  # expect PASS|FAIL FILE LINE: a tree holding only FILE with LINE
    rm -rf "${scratch:?}/tree" && mkdir -p "$scratch/tree/$(dirname "$2")"
    printf '%s\n' "$3" >"$scratch/tree/$2"
    if "$script" "$scratch/tree" >/dev/null 2>&1; then got=PASS; else got=FAIL; fi
    if [[ $got != "$1" ]]; then
      echo "check-layering self-test: '$3' in $2 gave $got, expected $1" >&2
      exit 1
    fi
  }
  expect FAIL client/src/x.cc '#include "service/registry/registry.h"'
  expect FAIL client/tensorctl/x.cc '#include "service/transport/tensor_service.h"'
  expect FAIL client/include/tensord/x.h '#include "service/dlpack/tensor_layout.h"'
  expect FAIL client/include/tensord/x.h '#include <grpcpp/grpcpp.h>'
  expect FAIL service/security/x.cc '#include "service/registry/tensor_version.h"'
  expect FAIL service/wire/x.cc '#include "service/transport/put_reactor.h"'
  expect FAIL service/registry/x.cc '#include "tensord/client.h"'
  expect FAIL service/common/x.cc '#include "client/src/local_transport.h"'
  expect PASS client/src/x.cc '#include "service/wire/stream_message.h"'
  expect PASS client/include/tensord/x.h '#include "absl/status/statusor.h"'
  expect PASS client/include/tensord/x.h '#include <dlpack/dlpack.h>'
  expect PASS service/registry/x.cc '#include "tensord/retention.h"'
  expect PASS service/transport/x.cc '#include "service/security/token_file.h"'
  echo "check-layering self-test: every rule caught its violation"
  exit 0
fi

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# Each engine layer and the layers it may include (itself included).
declare -A allowed=(
  [common]="common"
  [dlpack]="common dlpack"
  [formats]="common dlpack formats"
  [device]="common device"
  [wire]="common dlpack device wire"
  [memory]="common memory"
  [metrics]="common metrics"
  [registry]="common dlpack device memory registry"
  [security]="common security"
  [snapshot]="common dlpack device memory registry snapshot"
  [transport]="common dlpack device memory metrics registry security snapshot transport wire"
)
client_forbidden="registry security transport snapshot memory"

failures=0
fail() {
  echo "layering: $1" >&2
  failures=$((failures + 1))
}

# Prints "FILE:LINE:HEADER" for every #include under the given folders.
includes() {
  local dir
  for dir in "$@"; do
    [[ -d $dir ]] || continue
    grep -rnoE --include='*.h' --include='*.cc' --include='*.cu' \
      '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' "$dir" |
      sed -E 's/#[[:space:]]*include[[:space:]]*//'
  done
}

while IFS=: read -r file line header; do
  layer=${file#service/}
  layer=${layer%%/*}
  target=${header:1:${#header}-2}
  case $target in
    service/*)
      used=${target#service/}
      used=${used%%/*}
      if [[ -z ${allowed[$layer]+set} ]]; then
        fail "$file:$line: service/$layer is not in the layer table of scripts/check-layering.sh"
      elif [[ " ${allowed[$layer]} " != *" $used "* ]]; then
        fail "$file:$line: service/$layer may not include $target (allowed: ${allowed[$layer]})"
      fi
      ;;
    client/*)
      fail "$file:$line: the engine may not include the client's $target"
      ;;
    tensord/dlpack.h | tensord/retention.h | tensord/v1/*) ;;
    tensord/*)
      fail "$file:$line: the engine may take only tensord/dlpack.h and tensord/retention.h from the public API, not $target"
      ;;
  esac
done < <(includes service)

while IFS=: read -r file line header; do
  target=${header:1:${#header}-2}
  if [[ $target == service/* ]]; then
    used=${target#service/}
    used=${used%%/*}
    if [[ " $client_forbidden " == *" $used "* ]]; then
      fail "$file:$line: the client may not include $target (service/$used is the server's)"
    fi
  fi
done < <(includes client)

while IFS=: read -r file line header; do
  target=${header:1:${#header}-2}
  case $header in
    \"tensord/v1/*) fail "$file:$line: a public header may not include generated $target" ;;
    \"tensord/* | \"absl/* | \<dlpack/dlpack.h\>) ;;
    \<*)
      # The standard library's headers have no '.' and no '/'.
      [[ $target == */* || $target == *.* ]] &&
        fail "$file:$line: a public header may include only tensord/*.h, <dlpack/dlpack.h>, Abseil and the standard library, not $header"
      ;;
    *) fail "$file:$line: a public header may include only tensord/*.h, <dlpack/dlpack.h>, Abseil and the standard library, not $header" ;;
  esac
done < <(includes client/include)

if ((failures > 0)); then
  echo "layering: $failures include(s) cross a layer; see docs/architecture.md" >&2
  exit 1
fi
echo "layering: ok"

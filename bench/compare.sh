#!/bin/sh
# compare.sh - `selectivbench bench` side by side with the PyTorch forms of
# tools/torch_bench.py at the same shapes, model after model in one run, printed as the
# ratio table of docs/performance.md (tokens/s of both, ours / PyTorch, memory of both).
#
# usage: bench/compare.sh [--config small|large] [--steps N] [--threads N] MODEL...
#   --config   small: B16 T256 d64 L2, 9 inputs, 65 classes; large (default): B16 T400
#              d128 L4, 41 inputs, 1601 classes (torch_bench.py's CONFIGS)
#   --steps    timed steps of each side, median (default 3)
#   --threads  threads of each side (default 2)
# Environment:
#   SB                   the selectivbench binary (default: build/selectivbench of this tree)
#   SB_PYTHON            the interpreter with torch (default: the first of python3 and
#                        /usr/bin/python3 that imports it; Debian: apt-get install python3-torch)
#   SB_REFERENCE_MODELS  the reference's models/ssm_models.py (torch_bench.py imports its RecNet)
#
# Without torch it prints one "skipped:" line and exits 77; bad arguments exit 2. The C tests
# never need torch: tests/cli/test_compare.sh checks only the arguments and the skip.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
SB=${SB:-$here/build/selectivbench}
config=large
steps=3
threads=2

usage() {
  echo "compare.sh: $1 (usage: bench/compare.sh [--config small|large] [--steps N] [--threads N] MODEL...)" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
  --config) [ $# -ge 2 ] || usage "--config needs a value"; config=$2; shift 2 ;;
  --steps) [ $# -ge 2 ] || usage "--steps needs a value"; steps=$2; shift 2 ;;
  --threads) [ $# -ge 2 ] || usage "--threads needs a value"; threads=$2; shift 2 ;;
  --*) usage "unknown flag $1" ;;
  *) break ;;
  esac
done
case $config in
small) shape="--batch_size 16 --frames 256 --feat_size 64 --layers 2 --inp 9 --classes 65" ;;
large) shape="--batch_size 16 --frames 400 --feat_size 128 --layers 4 --inp 41 --classes 1601" ;;
*) usage "--config $config is not small or large" ;;
esac
case $steps in '' | *[!0-9]* | 0) usage "--steps $steps is not a positive integer" ;; esac
case $threads in '' | *[!0-9]* | 0) usage "--threads $threads is not a positive integer" ;; esac
[ $# -ge 1 ] || usage "name at least one model"
[ -x "$SB" ] || usage "$SB is not an executable (build first, or set SB)"

python=
for py in ${SB_PYTHON:-python3 /usr/bin/python3}; do
  if "$py" -c 'import torch' >/dev/null 2>&1; then
    python=$py
    break
  fi
done
if [ -z "$python" ]; then
  echo "skipped: python3-torch not installed (apt-get install python3-torch), nothing to compare with"
  exit 77
fi
if [ ! -f "${SB_REFERENCE_MODELS:-}" ]; then
  usage "set SB_REFERENCE_MODELS to the reference's models/ssm_models.py (torch_bench.py imports its RecNet)"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in "$@"; do
  # shellcheck disable=SC2086 # $shape is a list of flags
  if ! "$SB" bench --model "$model" $shape --steps "$steps" --threads "$threads" --json \
      >"$work/$model.ours.json"; then
    echo "compare.sh: selectivbench bench --model $model failed (above)" >&2
    exit 1
  fi
  if ! "$python" "$here/tools/torch_bench.py" "$SB_REFERENCE_MODELS" "$model" "$config" \
      --steps "$steps" --threads "$threads" >"$work/$model.torch.json"; then
    echo "compare.sh: tools/torch_bench.py $model $config failed (above)" >&2
    exit 1
  fi
done

"$python" - "$work" "$config" "$@" <<'EOF'
import json, sys

work, config, models = sys.argv[1], sys.argv[2], sys.argv[3:]
first = json.load(open(f"{work}/{models[0]}.ours.json"))
torch_first = json.loads(open(f"{work}/{models[0]}.torch.json").read().strip().splitlines()[-1])
print(f"selectivbench: OpenBLAS {first['isa']['blas_core']} kernels; "
      f"PyTorch {torch_first['torch']}, {torch_first['threads']} threads; config {config}")
print("| model | config | ours tok/s | PyTorch tok/s | ratio | ours MiB | PyTorch MiB |")
print("|---|---|---:|---:|---:|---:|---:|")
for m in models:
    ours = json.load(open(f"{work}/{m}.ours.json"))["results"][0]
    theirs = json.loads(open(f"{work}/{m}.torch.json").read().strip().splitlines()[-1])
    ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
    print(f"| {m} | {config} | {ours['tokens_per_s']:,.0f} | {theirs['tokens_per_s']:,.0f} | "
          f"{ratio:.1f}x | {ours['memory_mib']:,.0f} | {theirs['peak_mib']:,.0f} |")
EOF

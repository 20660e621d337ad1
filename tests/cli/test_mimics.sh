#!/bin/sh
# test_mimics.sh - every model with a PyTorch mimic (tests/data/models/<model>/mimic.py, the
# reference written from fla's naive forms or the paper's equations; issue 20) loads our
# checkpoints by state_dict name: a short training of <model>, `eval --dump` of its first test
# batch, then `mimic.py check CKPT DUMP` builds the mimic from the checkpoint's config, loads
# the weights with load_state_dict(strict=True) and compares its logits with ours (<= 1e-4).
#
# Needs torch and numpy ($SB_PYTHON, else python3 or /usr/bin/python3); without them one
# "skipped:" line and exit 0.
#
# usage: test_mimics.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

python=
for py in ${SB_PYTHON:-python3 /usr/bin/python3}; do
  if "$py" -c 'import torch, numpy' >/dev/null 2>&1; then
    python=$py
    break
  fi
done
if [ -z "$python" ]; then
  echo "skipped: python3-torch not installed (apt-get install python3-torch)"
  exit 0
fi

n=0
for mimic in "$SRC"/tests/data/models/*/mimic.py; do
  [ -f "$mimic" ] || continue
  model=$(basename "$(dirname "$mimic")")
  ckpt="$TMP/$model.safetensors"
  dump="$TMP/$model.dump.safetensors"
  if ! "$SB" train --model "$model" --feat_size 16 --layers 2 --d_state 4 --vocab 9 --amb 8 \
    --grammar_scale True --train_seqlen_max 20 --test_seqlen_max 20 --train_gap_max 0.3 \
    --dataset_size 64 --test_size 16 --batch_size 16 --test_bs 8 --epoch_size 32 --lr 0.01 \
    --seed 5 --threads 2 --results "$TMP/results" --ckpt "$ckpt" --quiet >"$TMP/$model.train" 2>&1; then
    fail "$model: training failed: $(tail -n 3 "$TMP/$model.train")"
    continue
  fi
  "$SB" eval "$ckpt" --dump "$dump" >"$TMP/$model.eval" 2>&1 ||
    fail "$model: eval --dump failed: $(tail -n 3 "$TMP/$model.eval")"
  if out=$("$python" "$mimic" check "$ckpt" "$dump" 2>&1); then
    echo "ok: $model: $out"
  else
    fail "$model: the checkpoint in its PyTorch mimic: $out"
  fi
  n=$((n + 1))
done
echo "mimic checks done: $n models, $failures failures"
[ "$failures" -eq 0 ] && [ "$n" -gt 0 ]

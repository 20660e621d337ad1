#!/bin/sh
# test_dt_rank.sh - --dt_rank is a no-op, as in the reference
# (docs/models/mamba.md): train.py's RecNet takes --dt_rank but never passes it to Mamba,
# whose dt_rank is 'auto' = ceil(d_model / 16), and no other layer has one. So:
#   - Mamba trained with --dt_rank 3, 0 (train.py's default) or -7 gives the same run and
#     training hashes, the same result numbers and byte-identical checkpoints (weights,
#     metadata and Adam state) as without the flag; its x_proj and dt_proj keep the rank
#     ceil(32 / 16) = 2; a GRU run is unchanged by it too;
#   - the flag takes an integer, as train.py's (type=int): 'auto' or 2.5 is a usage error
#     (exit 2, one line naming the flag).
#
# usage: test_dt_rank.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

tiny="--feat_size 32 --layers 2 --d_state 4 --vocab 9 --amb 8 --grammar_scale True
  --train_seqlen_max 20 --test_seqlen_max 20 --train_gap_max 0.3 --dataset_size 96
  --test_size 16 --batch_size 16 --test_bs 8 --epoch_size 32 --lr 0.01 --threads 2 --quiet"

# The numbers of a --json result line, without the timings and the checkpoint path.
numbers() {
  sed -e 's/"tokens_per_s":[^,]*,//' -e 's/"wall_s":[^,]*,//' -e 's/"checkpoint":"[^"]*",//' "$1"
}

# A tensor's entry in a safetensors header: name, dtype, shape, offsets.
header_entry() {
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  dd if="$1" bs=1 skip=8 count="$n" 2>/dev/null | grep -o "\"$2\":{[^}]*}"
}

# train MODEL NAME [FLAGS]: a run in its own results folder $TMP/NAME; its hashes in
# $TMP/NAME.hashes, its --json line in $TMP/NAME.json.
train() {
  model=$1
  name=$2
  shift 2
  checks=$((checks + 1))
  # shellcheck disable=SC2086
  "$SB" train --model "$model" $tiny "$@" --print_hashes >"$TMP/$name.hashes" 2>"$TMP/err" ||
    fail "$name: --print_hashes: $(cat "$TMP/err")"
  # shellcheck disable=SC2086
  "$SB" train --model "$model" $tiny "$@" --results "$TMP/$name" --json >"$TMP/$name.json" \
    2>"$TMP/err" || fail "$name: train $*: $(cat "$TMP/err")"
  grep -q '"status":"finished"' "$TMP/$name.json" || fail "$name: not finished: $(cat "$TMP/$name.json")"
}

# same_run BASE NAME: NAME's hashes, numbers and checkpoint files equal BASE's.
same_run() {
  checks=$((checks + 1))
  cmp -s "$TMP/$1.hashes" "$TMP/$2.hashes" ||
    fail "$2: hashes differ: $(cat "$TMP/$1.hashes") vs $(cat "$TMP/$2.hashes")"
  [ "$(numbers "$TMP/$1.json")" = "$(numbers "$TMP/$2.json")" ] ||
    fail "$2: results differ: $(cat "$TMP/$1.json") vs $(cat "$TMP/$2.json")"
  n=0
  for f in "$TMP/$1/checkpoints/"*.safetensors; do
    g="$TMP/$2/checkpoints/$(basename "$f")"
    cmp -s "$f" "$g" || fail "$2: $(basename "$f") differs from the run without --dt_rank (or is missing)"
    n=$((n + 1))
  done
  [ "$n" -eq 2 ] || fail "$1: $n checkpoint files, expected the weights and the Adam state"
}

train mamba mamba
for v in 3 0 -7; do
  train mamba "mamba_dt$v" --dt_rank "$v"
  same_run mamba "mamba_dt$v"
done
grep -q '"test_loss":[0-9]' "$TMP/mamba.json" || fail "mamba: no test loss: $(cat "$TMP/mamba.json")"

# Mamba's own dt rank: ceil(32 / 16) = 2 with or without the flag (x_proj: R + 2N rows of
# E = 64 inputs; dt_proj: E x R)
ckpt=$(ls "$TMP/mamba_dt3/checkpoints/"*[0-9a-f].safetensors)
checks=$((checks + 1))
header_entry "$ckpt" layers.0.x_proj.weight | grep -q '"shape":\[10,64\]' ||
  fail "x_proj with --dt_rank 3: $(header_entry "$ckpt" layers.0.x_proj.weight)"
header_entry "$ckpt" layers.1.dt_proj.weight | grep -q '"shape":\[64,2\]' ||
  fail "dt_proj with --dt_rank 3: $(header_entry "$ckpt" layers.1.dt_proj.weight)"

train gru gru
train gru gru_dt5 --dt_rank 5
same_run gru gru_dt5

# an integer, as train.py's type=int
expect_error 2 "dt_rank" train --model mamba --dt_rank auto
expect_error 2 "dt_rank" train --model mamba --dt_rank 2.5

echo "dt_rank checks: $checks, $failures failures"
[ "$failures" -eq 0 ]

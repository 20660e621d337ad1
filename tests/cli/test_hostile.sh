#!/bin/bash
# test_hostile.sh - inputs that used to hang, grow without bound or answer with a wrong
# result (issue 35), each now one clear error line and a non-zero exit, with nothing stored:
#   sweep files: nested 150,000 levels deep, two YAML documents, an unknown metric or goal,
#     /dev/zero and a 2 MB file (sweep, --dry_run and plan alike);
#   sizes that cannot fit in this machine's memory: sequence lengths of 10^8 and 10^9
#     elements and a 65536-wide, 1024-block model, refused before anything is generated, in
#     plan, sweep --dry_run, sweep, train and eval;
#   a checkpoint whose finite weights overflow (3e38): eval and probe name the weights;
#   a run whose row is lost after its last checkpoint continues from it to the same result;
#   a sweep on a full disk (a 300 KB tmpfs, where this process may mount one) says so in one
#   line on stderr.
#
# usage: test_hostile.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# ---- sweep files ---------------------------------------------------------------------------
grid() { # grid FILE EXTRA: a one-run grid file with EXTRA appended
  printf 'program: train.py\nmethod: grid\nparameters:\n  model:\n    values: [gru]\n%b' "$2" >"$1"
}
{
  printf 'program: train.py\nmethod: grid\nparameters:\n  x: '
  head -c 150000 /dev/zero | tr '\0' '['
  head -c 150000 /dev/zero | tr '\0' ']'
  echo
} >"$TMP/deep.yaml"
grid "$TMP/two.yaml" '---\nmethod: grid\n'
grid "$TMP/metric.yaml" 'metric:\n  name: val_acc\n  goal: maximize\n'
grid "$TMP/goal.yaml" 'metric:\n  name: test_acc\n  goal: upward\n'
grid "$TMP/ok_metric.yaml" 'metric:\n  name: test_loss\n  goal: minimize\n'
{ grid /dev/stdout ''; printf '# %s\n' "$(head -c 2100000 /dev/zero | tr '\0' x)"; } >"$TMP/big.yaml"

for cmd in "sweep --dry_run" plan; do
  start=$(date +%s)
  # shellcheck disable=SC2086 # cmd is two words
  expect_error 2 "nested deeper than 64 levels" $cmd "$TMP/deep.yaml"
  [ $(($(date +%s) - start)) -lt 10 ] || fail "$cmd of a deep file took $(($(date +%s) - start)) s"
  expect_error 2 "a second YAML document" $cmd "$TMP/two.yaml"
  expect_error 2 "unknown metric 'val_acc'" $cmd "$TMP/metric.yaml"
  expect_error 2 "metric goal must be maximize or minimize" $cmd "$TMP/goal.yaml"
  expect_error 2 "larger than 1024 KiB" $cmd /dev/zero
  expect_error 2 "larger than 1024 KiB" $cmd "$TMP/big.yaml"
done
expect_ok sweep --dry_run "$TMP/ok_metric.yaml"

# ---- sizes that cannot fit ---------------------------------------------------------------
grid "$TMP/long.yaml" '  train_seqlen_max:\n    values: [100000000]\n'
expect_error 2 "cannot fit in memory: one training sample" plan "$TMP/long.yaml"
expect_error 1 "1 of 1 runs refused; the first, run 0: the run cannot fit in memory" \
  sweep --dry_run "$TMP/long.yaml"
expect_error 1 "cannot fit in memory" sweep "$TMP/long.yaml" --limit 1 --results "$TMP/sw"
# (the sweep records a refused run as failed, with why, as it records every refusal)
[ "$(field "$TMP/sw/selectivbench.db" status)" = failed ] ||
  fail "the refused run is not recorded failed: $(field "$TMP/sw/selectivbench.db" status)"
tiny="--model gru --feat_size 8 --layers 1 --vocab 9 --amb 8 --grammar_scale True
  --train_seqlen_max 12 --test_seqlen_max 12 --dataset_size 200 --test_size 50 --batch_size 16
  --epoch_size 100 --threads 1"
# shellcheck disable=SC2086 # tiny is a list of flags
expect_error 2 "one test sample (--test_seqlen_max)" train $tiny --test_seqlen_max 1000000000 \
  --results "$TMP/r"
# shellcheck disable=SC2086
expect_error 2 "one training sample" train $tiny --train_seqlen_max 100000000 --results "$TMP/r"
expect_error 2 "the model (--feat_size, --layers)" train --feat_size 65536 --layers 1024 \
  --results "$TMP/r"
[ ! -e "$TMP/r/selectivbench.db" ] || fail "a refused train created its database"

# shellcheck disable=SC2086
expect_ok train $tiny --results "$TMP/r"
ckpt=$(ls "$TMP"/r/checkpoints/*.safetensors | grep -v optim | head -n 1)
expect_error 2 "one test sample (--test_seqlen_max)" eval "$ckpt" --test_seqlen_max 1000000000

# ---- weights that overflow ---------------------------------------------------------------
# huge SRC DST: SRC's tensors with every float set to 3e38 (0x7f61b1e6), header unchanged
huge() {
  hlen=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  size=$(stat -c %s "$1")
  {
    head -c $((8 + hlen)) "$1"
    yes "$(printf '\xe6\xb1\x61\x7f')" 2>/dev/null | tr -d '\n' | head -c $((size - 8 - hlen))
  } >"$2"
}
huge "$ckpt" "$TMP/huge.safetensors"
expect_error 3 "its weights give a non-finite test loss" eval "$TMP/huge.safetensors"
grep -q "checkpoint '$TMP/huge.safetensors'" "$TMP/err" || fail "eval does not name the weights"
expect_error 3 "weights give non-finite states" probe "$TMP/huge.safetensors" --out "$TMP/probe"
# shellcheck disable=SC2086
expect_ok train $tiny --model linear_attn --results "$TMP/r"
ckpt=$(ls -t "$TMP"/r/checkpoints/*.safetensors | grep -v optim | head -n 1)
huge "$ckpt" "$TMP/huge2.safetensors"
expect_error 3 "non-finite test loss" eval "$TMP/huge2.safetensors"

# ---- a full disk: the sweep says so in one line on stderr ------------------------------
# (only where this process may mount a small tmpfs: root with CAP_SYS_ADMIN)
mkdir -p "$TMP/full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=300k tmpfs "$TMP/full" 2>/dev/null; then
  checks=$((checks + 1))
  "$SB" sweep "$(dirname "$0")/../data/sweeps/tiny.yaml" --threads 1 --quiet \
    --results "$TMP/full/r" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "No space left on device" "$TMP/err" ||
    fail "a sweep on a full disk: exit $rc, stderr: $(cat "$TMP/err")"
  umount "$TMP/full"
else
  echo "test_hostile: the full-disk case is skipped (no tmpfs mount here)"
fi

# ---- a run whose row is lost after its last checkpoint ----------------------------------
# (its recording process was killed between the two, or an MPI coordinator died): the same
# sweep continues it from the complete checkpoint pair to the same test result, instead of
# training it again or recording it finished with no result
if command -v sqlite3 >/dev/null 2>&1; then
  yaml="$(dirname "$0")/../data/sweeps/tiny.yaml"
  expect_ok sweep "$yaml" --threads 1 --quiet --filter model=gru --results "$TMP/lost"
  before=$("$SB" results --db "$TMP/lost/selectivbench.db" --json | grep -o '"test_acc":[^,]*' | sort)
  sqlite3 "$TMP/lost/selectivbench.db" "DELETE FROM evaluations; DELETE FROM runs;"
  expect_ok sweep "$yaml" --threads 1 --quiet --filter model=gru --results "$TMP/lost"
  after=$("$SB" results --db "$TMP/lost/selectivbench.db" --json | grep -o '"test_acc":[^,]*' | sort)
  [ -n "$before" ] && [ "$after" = "$before" ] || fail "lost rows: test_acc $after, was $before"
  [ "$(grep -l "resuming at update" "$TMP"/lost/logs/*.log | wc -l)" -eq 2 ] ||
    fail "lost rows: the runs did not continue from their checkpoints"
fi

echo "test_hostile: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

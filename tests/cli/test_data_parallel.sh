#!/bin/sh
# test_data_parallel.sh - data-parallel `train` (issue 21, item 2; docs/cluster.md):
#   - --grad_shards 1 is today's run: the same run hash and the same bits as no flag;
#   - --grad_shards 4 with the plain binary, under mpirun -np 1, -np 2 and -np 4: final
#     weights and optimiser state byte-identical, the same final metrics, the row's
#     world_size 1, 1, 2, 4 (a transformer with dropout 0.1: the dropout stream belongs to
#     the shard, not to the process computing it);
#   - SIGTERM to one rank of mpirun -np 2 stops both after the same update (exit 75, the run
#     interrupted); the resume finishes byte-identical to the uninterrupted run;
#   - bad inputs: --grad_shards 0, a K that -np does not divide, K above the micro-batch:
#     one error line, exit 2.
# Skips (77) when mpirun is missing or the binary was built without MPI.
#
# usage: test_data_parallel.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
# CI runs as root; several ranks on a machine with fewer cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under AddressSanitizer (./run.sh asan): Open MPI's plugins leave allocations that
# LeakSanitizer can only attribute to unloaded modules, so leaks are not checked here (the
# rest of the suite checks them); memory errors still are.
case "${ASAN_OPTIONS:-}" in *detect_leaks=1*) ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; export ASAN_OPTIONS ;; esac
MPIRUN="mpirun --oversubscribe"
$MPIRUN -np 1 "$SB" --version >/dev/null 2>&1 && $MPIRUN -np 1 "$SB" train --grad_shards 2 \
  --print_hashes >/dev/null 2>&1 || { echo "SKIP: this selectivbench cannot run under mpirun"; exit 77; }

# 60 updates of 16 samples, two evaluations (well under a second on one thread)
flags="--model transformer --dropout 0.1 --vocab 9 --amb 8 --grammar_scale True \
--train_seqlen_max 12 --test_seqlen_max 12 --dataset_size 960 --test_size 12 --batch_size 16 \
--test_bs 6 --feat_size 16 --layers 1 --epoch_size 480 --threads 1 --quiet"

same_files() { # DIR_A DIR_B: weights and optimiser state byte for byte
  cmp -s "$1/w.safetensors" "$2/w.safetensors" && cmp -s "$1/w.optim.safetensors" "$2/w.optim.safetensors"
}
metrics() { # DIR: the final metrics and the world size of its one run
  for k in test_acc test_loss train_acc train_loss world_size; do
    printf '%s=%s ' "$k" "$(field "$1/selectivbench.db" $k)"
  done
}

# ---- K = 1 is today's run -------------------------------------------------------------------
# shellcheck disable=SC2086
h0=$("$SB" train $flags --print_hashes)
# shellcheck disable=SC2086
h1=$("$SB" train $flags --grad_shards 1 --print_hashes)
[ "$h0" = "$h1" ] || fail "--grad_shards 1 changes the hashes: $h0 vs $h1"
# shellcheck disable=SC2086
h4=$("$SB" train $flags --grad_shards 4 --print_hashes)
[ "$h0" != "$h4" ] || fail "--grad_shards 4 must change the hashes (it changes the rounding)"
for d in none one; do
  extra=""
  [ $d = one ] && extra="--grad_shards 1"
  # shellcheck disable=SC2086
  expect_ok train $flags $extra --results "$TMP/$d" --ckpt "$TMP/$d/w.safetensors"
done
same_files "$TMP/none" "$TMP/one" || fail "--grad_shards 1 gives other weights than no flag"

# ---- --grad_shards 4: the plain binary and -np 1, 2, 4 -------------------------------------
# shellcheck disable=SC2086
expect_ok train $flags --grad_shards 4 --results "$TMP/plain" --ckpt "$TMP/plain/w.safetensors"
same_files "$TMP/none" "$TMP/plain" && fail "--grad_shards 4 gives the bits of 1 (no shards computed?)"
want="$(metrics "$TMP/plain")"
case "$want" in *world_size=1*) ;; *) fail "the plain run's world_size: $want" ;; esac
for np in 1 2 4; do
  # shellcheck disable=SC2086
  $MPIRUN -np $np "$SB" train $flags --grad_shards 4 --results "$TMP/np$np" \
    --ckpt "$TMP/np$np/w.safetensors" >"$TMP/np$np.out" 2>&1 ||
    fail "mpirun -np $np train --grad_shards 4 failed: $(cat "$TMP/np$np.out")"
  same_files "$TMP/plain" "$TMP/np$np" ||
    fail "mpirun -np $np: the weights or optimiser state differ from the plain binary's"
  got="$(metrics "$TMP/np$np")"
  expected=$(echo "$want" | sed "s/world_size=1/world_size=$np/")
  [ "$got" = "$expected" ] || fail "mpirun -np $np: metrics '$got', want '$expected'"
done
[ "$(grep -c 'data-parallel over 2 processes' "$TMP/np2.out")" -eq 1 ] ||
  fail "mpirun -np 2: want one data-parallel summary line (rank 0 alone prints): $(cat "$TMP/np2.out")"

# ---- the default engine table where oneDNN computes: -np 1, 2, 4 give one digest ---------------
# (issue 34) wide enough that the shards' large products reach the default table's oneDNN
# threshold (16 MFLOP: 16 samples x 64 frames x 128 x 128 x 2 = 33.6 MFLOP per projection)
wide="--model gla --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 64 \
--test_seqlen_max 64 --dataset_size 128 --test_size 16 --batch_size 64 --test_bs 16 \
--feat_size 128 --layers 1 --epoch_size 128 --threads 1 --quiet --grad_shards 4"
for np in 1 2 4; do
  # shellcheck disable=SC2086
  $MPIRUN -np $np "$SB" train $wide --results "$TMP/wide$np" --ckpt "$TMP/wide$np/w.safetensors" \
    >"$TMP/wide$np.out" 2>&1 || fail "wide: mpirun -np $np failed: $(cat "$TMP/wide$np.out")"
done
for np in 2 4; do
  same_files "$TMP/wide1" "$TMP/wide$np" ||
    fail "wide, default engine table: mpirun -np $np gives other weights than -np 1"
done
[ "$(field "$TMP/wide1/selectivbench.db" fingerprint)" = "$(field "$TMP/wide4/selectivbench.db" fingerprint)" ] ||
  fail "wide: -np 1 and -np 4 record different fingerprints"

# ---- SIGTERM to one rank of -np 2, then resume ------------------------------------------------
long="--model transformer --dropout 0.1 --vocab 9 --amb 8 --grammar_scale True \
--train_seqlen_max 20 --test_seqlen_max 20 --dataset_size 12000 --test_size 12 --batch_size 16 \
--test_bs 6 --feat_size 16 --layers 1 --epoch_size 12000 --threads 1 --quiet --grad_shards 2"
# shellcheck disable=SC2086
expect_ok train $long --results "$TMP/ref" --ckpt "$TMP/ref/w.safetensors"
has_ckpt() { [ -f "$1/w.safetensors" ]; }
# shellcheck disable=SC2086
$MPIRUN -np 2 "$SB" train $long --results "$TMP/term" --ckpt "$TMP/term/w.safetensors" \
  --checkpoint_every 0.002 >"$TMP/term.out" 2>"$TMP/term.err" &
pid=$!
poll has_ckpt "$TMP/term"
# the signal reaches rank 1 only (as a node's own kill would): both ranks must stop
rank1=$(pgrep -P $pid | tail -n 1)
[ -n "$rank1" ] && kill -TERM "$rank1"
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "mpirun -np 2 after SIGTERM to rank 1 exited $rc, want 75: $(cat "$TMP/term.err")"
[ "$(field "$TMP/term/selectivbench.db" status)" = interrupted ] ||
  fail "after SIGTERM the run is $(field "$TMP/term/selectivbench.db" status), want interrupted"
grep -q 'resume with: mpirun -np 2 ' "$TMP/term.err" || fail "no 'resume with: mpirun -np 2' line: $(cat "$TMP/term.err")"
# shellcheck disable=SC2086
$MPIRUN -np 2 "$SB" train $long --results "$TMP/term" --ckpt "$TMP/term/w.safetensors" --resume \
  >"$TMP/term2.out" 2>&1 || fail "the resume under mpirun -np 2 failed: $(cat "$TMP/term2.out")"
same_files "$TMP/ref" "$TMP/term" || fail "SIGTERM then resume: the final weights differ from an uninterrupted run's"
[ "$(field "$TMP/term/selectivbench.db" status)" = finished ] || fail "after the resume: not finished"

# ---- bad inputs ------------------------------------------------------------------------------
# shellcheck disable=SC2086
expect_error 2 "grad_shards" train $flags --grad_shards 0 --results "$TMP/bad"
# shellcheck disable=SC2086
expect_error 2 "micro-batch" train $flags --grad_shards 17 --results "$TMP/bad"
# shellcheck disable=SC2086
expect_error 2 "micro-batch" train $flags --grad_shards 9 --grad_acc 2 --results "$TMP/bad"
checks=$((checks + 1))
# shellcheck disable=SC2086
$MPIRUN -np 2 "$SB" train $flags --grad_shards 3 --results "$TMP/bad" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "mpirun -np 2 --grad_shards 3 exited $rc, want 2"
[ "$(grep -c '^selectivbench train: error: --grad_shards 3 cannot be shared by the 2 processes' "$TMP/err")" -eq 1 ] ||
  fail "mpirun -np 2 --grad_shards 3: want one error line (from rank 0): $(cat "$TMP/err")"

[ "$failures" -eq 0 ] || exit 1
echo "test_data_parallel: ok ($checks checks)"

#!/bin/sh
# test_checkpoint_kill.sh - a kill never loses a run (issue 35, item 0; checkpoint.h): the
# checkpoint and its optimiser sidecar are one unit, so a run killed with SIGKILL at any
# instant resumes to the weights of an uninterrupted run:
#   - inside the save, at each of its three stages (the pending optimiser file written; the
#     model file replaced; the pair complete), of the first, second and fourth save
#     (SB_TEST_SAVE_CRASH=N:S makes the process kill itself there): `train --resume`
#     finishes byte-identical to the uninterrupted run;
#   - at random instants: one run killed again and again (at least 50 kills) with periodic
#     checkpoints, resumed after each, finishes byte-identical.
#
# usage: test_checkpoint_kill.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# 1500 updates of a small GRU on one thread (a few seconds), an evaluation every 4000 samples
run_flags="--model gru --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 \
--test_seqlen_max 20 --dataset_size 24000 --test_size 12 --batch_size 16 --test_bs 6 \
--feat_size 16 --layers 1 --epoch_size 4000 --threads 1 --quiet"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(now_ms)
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/ref" --ckpt "$TMP/ref/w.safetensors" >"$TMP/ref.out" 2>&1 ||
  fail "the uninterrupted run failed: $(cat "$TMP/ref.out")"
ref_ms=$(($(now_ms) - t0))
# the start-up a life spends before its first update (process, task, model): a kill before
# it tests nothing; an ASan build under load takes many times longer than a native one
t0=$(now_ms)
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/startup" --only_createset >/dev/null 2>&1
startup_ms=$(($(now_ms) - t0))
# the random kills land in the first ~20% of the run after start-up: 20 to 219 ms on a
# native build (a run of a few seconds), stretched as the run is slower than 3 s
stretch=$((ref_ms > 3000 ? ref_ms / 3000 : 1))
same_as_ref() { # DIR
  cmp -s "$TMP/ref/w.safetensors" "$1/w.safetensors" &&
    cmp -s "$TMP/ref/w.optim.safetensors" "$1/w.optim.safetensors"
}

# ---- killed inside a save, at each stage ---------------------------------------------------
for n in 1 2 4; do
  for stage in 1 2 3; do
    d="$TMP/save_${n}_$stage"
    # shellcheck disable=SC2086
    SB_TEST_SAVE_CRASH="$n:$stage" "$SB" train $run_flags --results "$d" --ckpt "$d/w.safetensors" \
      >"$d.out" 2>&1
    rc=$?
    checks=$((checks + 1))
    [ $rc -eq 137 ] || { fail "save $n, stage $stage: exit $rc, want 137 (killed)"; continue; }
    resume=""
    [ -f "$d/w.safetensors" ] && resume="--resume"
    # shellcheck disable=SC2086
    "$SB" train $run_flags --results "$d" --ckpt "$d/w.safetensors" $resume >"$d.2.out" 2>&1 ||
      fail "save $n, stage $stage: the rerun failed: $(cat "$d.2.out")"
    same_as_ref "$d" || fail "killed in save $n at stage $stage: the final weights differ"
    [ -e "$d/w.optim.safetensors.pending" ] && [ "$stage" -ne 1 ] &&
      fail "save $n, stage $stage: a pending optimiser file was left"
  done
done

# ---- killed at random instants, resumed each time ----------------------------------------------
d="$TMP/random"
kills=0
lives=0
finished=0
seed=12345
while [ $lives -lt 400 ]; do
  lives=$((lives + 1))
  resume=""
  [ -f "$d/w.safetensors" ] && resume="--resume"
  # shellcheck disable=SC2086
  "$SB" train $run_flags --results "$d" --ckpt "$d/w.safetensors" --checkpoint_every 0.0005 \
    $resume >"$d.out" 2>&1 &
  pid=$!
  seed=$(((seed * 1103515245 + 12345) % 2147483648))
  # start-up, then 20 to 219 ms (times the stretch)
  delay_ms=$((startup_ms + (20 + seed / 65536 % 200) * stretch))
  sleep "$((delay_ms / 1000)).$(printf '%03d' $((delay_ms % 1000)))"
  if kill -9 $pid 2>/dev/null; then
    kills=$((kills + 1))
    wait $pid 2>/dev/null
  else
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "life $lives exited $rc: $(cat "$d.out")"
    checks=$((checks + 1))
    same_as_ref "$d" || fail "after $kills random kills the final weights differ from an uninterrupted run's"
    [ "$(field "$d/selectivbench.db" status)" = finished ] || fail "after $kills random kills: not finished"
    finished=$((finished + 1))
    [ $kills -ge 50 ] && break
    rm -rf "$d" # fewer than 50 kills so far: the run again, from nothing
  fi
done
[ $kills -ge 50 ] && [ "$finished" -ge 1 ] || fail "only $kills kills and $finished finished runs in $lives lives"

echo "test_checkpoint_kill: $checks checks ($kills random kills; start-up $startup_ms ms, run $ref_ms ms), $failures failures"
[ "$failures" -eq 0 ]

#!/bin/sh
# test_preempt.sh - runs survive preemption (issue 21, item 3):
#   - SIGUSR1 (Slurm's warning before a time limit, sbatch --signal=USR1@S) stops `train` like
#     SIGTERM: exit 75, one "resume with:" line, the run interrupted; the printed command
#     resumes it and the finished weights and optimiser state are byte-identical to an
#     uninterrupted run's;
#   - --checkpoint_every writes the checkpoint between evaluations: a run with one evaluation
#     (at its end) killed with SIGKILL mid-way resumes from the update of its last periodic
#     checkpoint, not from zero, and finishes byte-identical to the uninterrupted run;
#   - sweep --checkpoint_every passes the flag to its workers.
# Every wait polls for its condition (at most a minute), never a fixed sleep.
#
# usage: test_preempt.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

# 1500 updates (a few seconds on one thread), evaluated once, at the end
run_flags="--model gru --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 \
--test_seqlen_max 20 --dataset_size 24000 --test_size 12 --batch_size 16 --test_bs 6 \
--feat_size 16 --layers 1 --epoch_size 24000 --threads 1"

# the uninterrupted run
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/ref" --ckpt "$TMP/ref/w.safetensors" --quiet >"$TMP/ref.out" 2>&1 ||
  fail "the uninterrupted run failed: $(cat "$TMP/ref.out")"

same_as_ref() { # DIR: its final weights and optimiser state are the reference's, byte for byte
  cmp -s "$TMP/ref/w.safetensors" "$1/w.safetensors" &&
    cmp -s "$TMP/ref/w.optim.safetensors" "$1/w.optim.safetensors"
}
has_ckpt() { [ -f "$1/w.safetensors" ]; }

# ---- SIGUSR1: exit 75, the printed command resumes it ---------------------------------------
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/usr1" --ckpt "$TMP/usr1/w.safetensors" \
  --checkpoint_every 0.002 >"$TMP/usr1.out" 2>"$TMP/usr1.err" &
pid=$!
poll has_ckpt "$TMP/usr1"
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "train after SIGUSR1 exited $rc, want 75: $(cat "$TMP/usr1.err")"
[ "$(grep -c 'interrupted at update [0-9]* (checkpoint .*); resume with: .* --resume$' "$TMP/usr1.err")" -eq 1 ] ||
  fail "SIGUSR1: want one 'resume with' line: $(cat "$TMP/usr1.err")"
status=$(field "$TMP/usr1/selectivbench.db" status)
[ "$status" = interrupted ] || fail "after SIGUSR1 the run is $status, want interrupted"
resume=$(sed -n 's/.*; resume with: //p' "$TMP/usr1.err")
sh -c "$resume" >"$TMP/usr1b.out" 2>&1 || fail "the printed resume command failed: $(cat "$TMP/usr1b.out")"
grep -q "resuming at update [1-9]" "$TMP/usr1b.out" || fail "SIGUSR1: not resumed: $(head -n 3 "$TMP/usr1b.out")"
same_as_ref "$TMP/usr1" || fail "SIGUSR1 then resume: the final weights differ from an uninterrupted run's"

# ---- --checkpoint_every, then SIGKILL: resumes mid-way ----------------------------------------
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/kill" --ckpt "$TMP/kill/w.safetensors" \
  --checkpoint_every 0.002 >"$TMP/kill.out" 2>&1 &
pid=$!
poll has_ckpt "$TMP/kill"
kill -9 $pid
wait $pid 2>/dev/null
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/kill" --ckpt "$TMP/kill/w.safetensors" --resume \
  >"$TMP/kill2.out" 2>&1 || fail "resume after SIGKILL failed: $(cat "$TMP/kill2.out")"
# the only evaluation is the last: without the periodic checkpoint there would be none to resume
grep -q "resuming at update [1-9]" "$TMP/kill2.out" ||
  fail "after SIGKILL the run did not resume mid-way: $(head -n 3 "$TMP/kill2.out")"
same_as_ref "$TMP/kill" || fail "SIGKILL then resume: the final weights differ from an uninterrupted run's"
[ "$(field "$TMP/kill/selectivbench.db" status)" = finished ] || fail "after SIGKILL and resume: not finished"

# ---- the flag is validated, and a sweep passes it on -------------------------------------------
# shellcheck disable=SC2086
expect_error 2 "checkpoint_every" train $run_flags --results "$TMP/bad" --checkpoint_every -1
sed -e 's/- 640$/- 24000/' -e 's/values: \[transformer, gru\]/values: [gru]/' \
  "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/two.yaml"
"$SB" sweep "$TMP/two.yaml" --workers 1 --threads 1 --checkpoint_every 0.002 --results "$TMP/sw" \
  >"$TMP/sw.out" 2>&1 &
spid=$!
worker_has_flag() { pgrep -f -- "--checkpoint_every=0.002" >/dev/null; }
poll worker_has_flag
kill -TERM $spid
wait $spid

echo "preemption checks done, $failures failures"
[ "$failures" -eq 0 ]

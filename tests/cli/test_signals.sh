#!/bin/sh
# test_signals.sh - SIGINT and SIGTERM stop `train` and `sweep` cleanly, and runs are
# locked:
#   - train: SIGINT exits 130, SIGTERM 75, with one "interrupted ... resume with: ..." line,
#     the run `interrupted` in the database and its checkpoint on disk; the printed command
#     finishes it (attempt 2, resumed, not started over);
#   - a second signal exits at once (75 after SIGTERM): the row is left `running` (read as
#     interrupted, its process gone), the database intact, the lock free, and `train --resume`
#     takes the run over;
#   - sweep: SIGTERM to the sweep stops its workers (75, both runs interrupted, none failed
#     or left running); run again, it continues both from their checkpoints; SIGINT to the
#     sweep's process group (a terminal's Ctrl-C reaches every worker too) is counted once;
#   - locks: a second train of a run being trained exits 75 naming the pid; after the first
#     is killed with SIGKILL its stale lock is taken over; a sweep puts a locked run aside,
#     trains the others and comes back to it.
# Every wait polls for its condition (at most a minute), never a fixed sleep.
#
# usage: test_signals.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

# A shell without job control starts background commands with SIGINT ignored, and the
# program keeps it ignored: background runs that must see SIGINT start with it reset.
bg() {
  env --default-signal=INT "$@" &
}

# status_is DB STATUS: every run of DB has this status (and there is one).
status_is() {
  [ -n "$(field "$1" status)" ] && [ -z "$(field "$1" status | grep -v "^$2\$")" ]
}

# A training of 1500 updates (a few seconds on one thread), evaluated every 100.
run_flags="--model gru --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 \
--test_seqlen_max 20 --dataset_size 24000 --test_size 12 --batch_size 16 --test_bs 6 \
--feat_size 16 --layers 1 --epoch_size 1600 --threads 1"

# ---- train: SIGINT, then the printed command resumes it ------------------------------------
# shellcheck disable=SC2086
bg "$SB" train $run_flags --results "$TMP/int" >"$TMP/int.out" 2>"$TMP/int.err"
pid=$!
poll has_eval "$TMP/int.out"
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "train after SIGINT exited $rc, want 130: $(cat "$TMP/int.err")"
n=$(grep -c "interrupted at update [0-9]* (checkpoint .*); resume with: $SB train .* --resume\$" \
  "$TMP/int.err")
[ "$n" -eq 1 ] || fail "train after SIGINT: want one 'interrupted ... resume with' line: $(cat "$TMP/int.err")"
grep -q '^interrupted: ' "$TMP/int.out" && fail "an interrupted run printed a summary: $(cat "$TMP/int.out")"
status_is "$TMP/int/selectivbench.db" interrupted ||
  fail "after SIGINT the run is $(field "$TMP/int/selectivbench.db" status), want interrupted"
field "$TMP/int/selectivbench.db" reason | grep -q "^interrupted at update [0-9]* of 1500" ||
  fail "interrupted run's reason: $(field "$TMP/int/selectivbench.db" reason)"
ls "$TMP"/int/checkpoints/*.safetensors >/dev/null 2>&1 || fail "no checkpoint after SIGINT"
stopped_at=$(sed -n 's/.*interrupted at update \([0-9]*\) .*/\1/p' "$TMP/int.err")
wall1=$(field "$TMP/int/selectivbench.db" wall_s)
# the command it printed, pasted as printed (it starts with the program as it was run)
resume=$(sed -n 's/.*; resume with: //p' "$TMP/int.err")
sh -c "$resume" >"$TMP/int2.out" 2>&1 || fail "the printed resume command failed: $(cat "$TMP/int2.out")"
grep -q "resuming at update $stopped_at\$" "$TMP/int2.out" ||
  fail "the resumed run did not pick up at update $stopped_at: $(head -n 3 "$TMP/int2.out")"
status_is "$TMP/int/selectivbench.db" finished || fail "resumed run not finished"
[ "$(field "$TMP/int/selectivbench.db" attempts)" = 2 ] ||
  fail "resumed run: attempts $(field "$TMP/int/selectivbench.db" attempts), want 2"
# its wall time counts both attempts: the first's plus the second's (its summary line)
wall2=$(field "$TMP/int/selectivbench.db" wall_s)
part2=$(sed -n 's/^run [0-9a-f]* finished: .*, \([0-9.]*\) s$/\1/p' "$TMP/int2.out")
awk -v a="$wall1" -v b="$wall2" -v p="$part2" 'BEGIN { exit !(a > 0 && p > 0 && b > a + 0.9 * p) }' ||
  fail "resumed run's wall_s $wall2 is not the first attempt's $wall1 plus the second's $part2"

# ---- train: SIGTERM exits 75 ------------------------------------------------------------
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/term" --json >"$TMP/term.out" 2>"$TMP/term.err" &
pid=$!
poll has_eval "$TMP/term.err"
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "train after SIGTERM exited $rc, want 75: $(cat "$TMP/term.err")"
grep -q '"status":"interrupted"' "$TMP/term.out" || fail "train --json after SIGTERM: $(cat "$TMP/term.out")"
[ "$(grep -c 'resume with: ' "$TMP/term.err")" -eq 1 ] || fail "SIGTERM: no resume line: $(cat "$TMP/term.err")"
status_is "$TMP/term/selectivbench.db" interrupted || fail "after SIGTERM the run is not interrupted"

# ---- a second signal exits at once ---------------------------------------------------------
# both signals pending while the process is stopped: the second runs right after the first
# shellcheck disable=SC2086
bg "$SB" train $run_flags --results "$TMP/twice" >"$TMP/twice.out" 2>"$TMP/twice.err"
pid=$!
# wait for the first checkpoint too: the evaluation line comes before its save, and a second
# signal before any save leaves nothing to resume (a loaded machine showed it)
has_ckpt() { ls "$TMP"/twice/checkpoints/*.safetensors >/dev/null 2>&1; }
poll has_eval "$TMP/twice.out"
poll has_ckpt
kill -STOP $pid
kill -INT $pid
kill -TERM $pid
kill -CONT $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "train after two signals exited $rc, want 75 (the second's code)"
grep -q 'resume with' "$TMP/twice.err" && fail "a second signal still waited for the update"
# the row was left running, but its process is gone (its lock is free): it reads interrupted
status_is "$TMP/twice/selectivbench.db" interrupted ||
  fail "after a second signal the run is $(field "$TMP/twice/selectivbench.db" status), want interrupted"
field "$TMP/twice/selectivbench.db" reason | grep -q "^its process ended without finishing" ||
  fail "after a second signal: reason $(field "$TMP/twice/selectivbench.db" reason)"
"$SB" results --db "$TMP/twice/selectivbench.db" --check | grep -q ": ok$" ||
  fail "integrity check after a second signal"
# The evaluation line is printed before that evaluation's checkpoint is written, so the
# second signal can land between the weights and the optimiser state of a save: --resume
# then refuses the pair, naming it, and the run starts again without --resume.
# shellcheck disable=SC2086
if ! "$SB" train $run_flags --results "$TMP/twice" --resume >"$TMP/twice2.out" 2>&1; then
  if grep -q "interrupted while saving; start it again without --resume" "$TMP/twice2.out"; then
    # shellcheck disable=SC2086
    "$SB" train $run_flags --results "$TMP/twice" >"$TMP/twice2.out" 2>&1 ||
      fail "train after a torn checkpoint: $(cat "$TMP/twice2.out")"
  else
    fail "train --resume after a second signal: $(cat "$TMP/twice2.out")"
  fi
fi
status_is "$TMP/twice/selectivbench.db" finished || fail "the run left running was not taken over"
[ "$(field "$TMP/twice/selectivbench.db" attempts)" = 2 ] || fail "taken over: attempts is not 2"

# ---- locks: a second train waits its turn, a stale lock is taken over --------------------
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/lock" >"$TMP/lock.out" 2>&1 &
pid=$!
poll has_eval "$TMP/lock.out"
lock_ckpt() { ls "$TMP"/lock/checkpoints/*.safetensors >/dev/null 2>&1; }
poll lock_ckpt # --resume below needs it (the evaluation line comes before its save)
# shellcheck disable=SC2086
expect_error 75 "is already being trained by pid $pid" train $run_flags --results "$TMP/lock"
status_is "$TMP/lock/selectivbench.db" running || fail "the locked-out train changed the run"
kill -9 $pid
wait $pid 2>/dev/null
# shellcheck disable=SC2086
"$SB" train $run_flags --results "$TMP/lock" --resume >"$TMP/lock2.out" 2>&1 ||
  fail "train after the holder was killed (stale lock): $(cat "$TMP/lock2.out")"
status_is "$TMP/lock/selectivbench.db" finished || fail "stale lock: the run did not finish"

# ---- sweep: SIGTERM to the sweep, then the sweep again --------------------------------------
# two runs of 1500 updates (evaluated every 312), one worker each
sed -e 's/- 640$/- 24000/' -e 's/values: \[transformer, gru\]/values: [gru]/' \
  "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/two.yaml"
both_evaluated() {
  [ "$(grep -l '^  step [0-9]*/[0-9]* (' "$1"/logs/*.log 2>/dev/null | wc -l)" -eq 2 ]
}
"$SB" sweep "$TMP/two.yaml" --workers 2 --threads 1 --results "$TMP/sw" >"$TMP/sw.out" 2>"$TMP/sw.err" &
pid=$!
poll both_evaluated "$TMP/sw"
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "sweep after SIGTERM exited $rc, want 75: $(cat "$TMP/sw.err")"
grep -q "sweep interrupted: 2 runs interrupted; run the same command to resume" "$TMP/sw.err" ||
  fail "sweep after SIGTERM: $(cat "$TMP/sw.err")"
status_is "$TMP/sw/selectivbench.db" interrupted ||
  fail "sweep after SIGTERM: runs are $(field "$TMP/sw/selectivbench.db" status | tr '\n' ' ')"
[ "$(field "$TMP/sw/selectivbench.db" reason | grep -c '^interrupted at update [0-9]* of ')" -eq 2 ] ||
  fail "sweep after SIGTERM: reasons $(field "$TMP/sw/selectivbench.db" reason)"
"$SB" sweep "$TMP/two.yaml" --workers 2 --threads 1 --results "$TMP/sw" >"$TMP/sw2.out" 2>&1 ||
  fail "the sweep run again failed: $(cat "$TMP/sw2.out")"
grep -q "2 trained, 0 failed, 0 already finished" "$TMP/sw2.out" || fail "sweep again: $(cat "$TMP/sw2.out")"
status_is "$TMP/sw/selectivbench.db" finished || fail "sweep again: not every run finished"
[ "$(field "$TMP/sw/selectivbench.db" attempts | sort -u)" = 2 ] ||
  fail "sweep again: attempts $(field "$TMP/sw/selectivbench.db" attempts | tr '\n' ' '), want 2 2"
[ "$(grep -l 'resuming at update [1-9]' "$TMP"/sw/logs/*.log | wc -l)" -eq 2 ] ||
  fail "sweep again: the runs were not continued from their checkpoints"

# ---- sweep: SIGINT to its process group (what a terminal's Ctrl-C does) -------------------
setsid env --default-signal=INT "$SB" sweep "$TMP/two.yaml" --workers 2 --threads 1 \
  --results "$TMP/grp" >"$TMP/grp.out" 2>"$TMP/grp.err" &
pid=$!
poll both_evaluated "$TMP/grp"
kill -INT -"$pid"
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "sweep after a group SIGINT exited $rc, want 130: $(cat "$TMP/grp.err")"
grep -q "sweep interrupted: 2 runs interrupted" "$TMP/grp.err" || fail "group SIGINT: $(cat "$TMP/grp.err")"
status_is "$TMP/grp/selectivbench.db" interrupted ||
  fail "group SIGINT: runs are $(field "$TMP/grp/selectivbench.db" status | tr '\n' ' ')"
# each worker stopped at an update and said so itself: the sweep's copy of the signal was not
# a second one (that would have exited at once, leaving the sweep to settle the run)
[ "$(field "$TMP/grp/selectivbench.db" reason | grep -c '^interrupted at update [0-9]* of ')" -eq 2 ] ||
  fail "group SIGINT: reasons $(field "$TMP/grp/selectivbench.db" reason)"

# ---- sweep: a run another process trains is put aside and taken again ------------------------
"$SB" sweep "$TMP/two.yaml" --dry_run | head -n 1 | cut -d' ' -f3- >"$TMP/first_args"
# shellcheck disable=SC2046
bg "$SB" train $(cat "$TMP/first_args") --threads 1 --results "$TMP/ls" >"$TMP/ls_train.out" 2>&1
tpid=$!
poll has_eval "$TMP/ls_train.out"
"$SB" sweep "$TMP/two.yaml" --workers 1 --threads 1 --results "$TMP/ls" >"$TMP/ls.out" 2>&1 &
spid=$!
locked_line() { grep -q "locked, pid $tpid is training it; coming back to it later" "$TMP/ls.out"; }
poll locked_line
kill -INT $tpid
wait $tpid
wait $spid
rc=$?
[ $rc -eq 0 ] || fail "sweep with a locked run exited $rc: $(cat "$TMP/ls.out")"
grep -q "2 trained, 0 failed" "$TMP/ls.out" || fail "sweep with a locked run: $(cat "$TMP/ls.out")"
status_is "$TMP/ls/selectivbench.db" finished || fail "sweep with a locked run: not every run finished"
[ "$(field "$TMP/ls/selectivbench.db" attempts | sort | tr '\n' ' ')" = "1 2 " ] ||
  fail "locked run: attempts $(field "$TMP/ls/selectivbench.db" attempts | tr '\n' ' '), want 1 and 2"
"$SB" results --db "$TMP/ls/selectivbench.db" --check | grep -q ": ok$" || fail "integrity check"

echo "signal checks done, $failures failures"
[ "$failures" -eq 0 ]

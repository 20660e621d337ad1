#!/bin/sh
# test_slurm.sh - `sweep FILE --slurm DIR` writes a ready sbatch script (issue 21, item 4),
# checked without a Slurm cluster (a real single-node Slurm is `./run.sh test-cluster`'s):
#   - the #SBATCH lines (array, cpus, time, partition, output, --signal=B:USR1@120, --requeue),
#     valid bash, absolute paths, filters passed on;
#   - run by hand with SLURM_ARRAY_TASK_ID set, each task trains its shard into its own
#     folder, and `results merge` of the shards holds every run;
#   - SIGUSR1 to the script (what Slurm sends ahead of --time) reaches the sweep: its runs
#     checkpoint and stop, the script exits 75 and requeues its task (a stand-in scontrol
#     records the call); started again, the task resumes its runs and finishes them;
#   - SIGUSR1 to every process of the task (scancel --full): the same, one stop request;
#   - the warning's lead for short --time limits, Slurm's --time forms;
#   - bad --time, --partition and --array values are one error line each.
#
# usage: test_slurm.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

expect_ok sweep "$SRC/tests/data/sweeps/tiny.yaml" --filter model=gru --slurm "$TMP/sl" \
  --array 2 --cpus_per_task 2 --time 0:30:00 --partition short --checkpoint_every 5
script="$TMP/sl/sweep.sbatch"
grep -q "^submit it with:" "$TMP/out" && grep -q "^  sbatch $script\$" "$TMP/out" ||
  fail "--slurm: no sbatch line: $(cat "$TMP/out")"
for line in '#SBATCH --array=0-1' '#SBATCH --cpus-per-task=2' '#SBATCH --time=0:30:00' \
  '#SBATCH --partition=short' '#SBATCH --signal=B:USR1@120' '#SBATCH --requeue' \
  "#SBATCH --output=$TMP/sl/logs/slurm-%A_%a.out"; do
  grep -qxF -- "$line" "$script" || fail "the script lacks '$line'"
done
grep -q -- "--filter 'model=gru'" "$script" || fail "the filter is not passed on"
grep -q -- "--checkpoint_every 5" "$script" || fail "--checkpoint_every is not passed on"
# the sweep takes the cores Slurm gives (affinity, SLURM_CPUS_PER_TASK): no fixed --threads,
# unless one is asked for (issue 34: 4 threads ran on a 2-core node)
grep -q -- "--threads" "$script" && fail "the script fixes --threads: $(grep -- --threads "$script")"
expect_ok sweep "$SRC/tests/data/sweeps/tiny.yaml" --filter model=gru --slurm "$TMP/sl_t" --threads 3
grep -q -- "--workers 1 --threads 3" "$TMP/sl_t/sweep.sbatch" || fail "--threads 3 is not passed on"
[ -d "$TMP/sl/logs" ] || fail "no logs folder (Slurm does not create it)"
bash -n "$script" || fail "the script is not valid bash"

# each array task by hand, then the merge
for i in 0 1; do
  SLURM_ARRAY_TASK_ID=$i bash "$script" >"$TMP/task$i.out" 2>&1 ||
    fail "task $i failed: $(tail -n 3 "$TMP/task$i.out")"
done
expect_ok results merge "$TMP/sl/shard-0" "$TMP/sl/shard-1" --db "$TMP/sl/all/selectivbench.db"
n=$(field "$TMP/sl/all/selectivbench.db" status | grep -c '^finished$')
[ "$n" -eq 2 ] || fail "the merged shards hold $n finished runs, want 2"

# SIGUSR1 to the script: checkpoints, exit 75, requeue; then the task resumes
mkdir -p "$TMP/bin"
cat >"$TMP/bin/scontrol" <<EOS
#!/bin/sh
echo "\$@" >>"$TMP/scontrol.calls"
EOS
chmod +x "$TMP/bin/scontrol"
sed -e 's/- 640$/- 24000/' -e 's/values: \[transformer, gru\]/values: [gru]/' \
  "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/two.yaml"
expect_ok sweep "$TMP/two.yaml" --slurm "$TMP/long" --array 1 --cpus_per_task 2
PATH="$TMP/bin:$PATH" SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID=4242 bash "$TMP/long/sweep.sbatch" \
  >"$TMP/long.out" 2>&1 &
pid=$!
evaluated() {
  [ "$(grep -l '^  step [0-9]*/[0-9]* (' "$TMP"/long/shard-0/logs/*.log 2>/dev/null | wc -l)" -ge 1 ]
}
poll evaluated
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "the task after SIGUSR1 exited $rc, want 75: $(tail -n 5 "$TMP/long.out")"
[ "$(cat "$TMP/scontrol.calls" 2>/dev/null)" = "requeue 4242_0" ] ||
  fail "the task did not requeue itself: $(cat "$TMP/scontrol.calls" 2>/dev/null)"
field "$TMP/long/shard-0/selectivbench.db" status | grep -q '^interrupted$' ||
  fail "after SIGUSR1 no run is interrupted: $(field "$TMP/long/shard-0/selectivbench.db" status)"
SLURM_ARRAY_TASK_ID=0 bash "$TMP/long/sweep.sbatch" >"$TMP/long2.out" 2>&1 ||
  fail "the requeued task failed: $(tail -n 3 "$TMP/long2.out")"
[ -z "$(field "$TMP/long/shard-0/selectivbench.db" status | grep -v '^finished$')" ] ||
  fail "the requeued task left runs unfinished"
grep -l 'resuming at update [1-9]' "$TMP"/long/shard-0/logs/*.log >/dev/null ||
  fail "the requeued task did not resume its runs from their checkpoints"

# SIGUSR1 to every process of the task, as `scancel --full --signal=USR1` sends it: the sweep
# ignores it and stops once, on the script's SIGTERM, with its checkpoints (it used to get
# two stop requests and quit at once; the script then kept wait's 138 and did not requeue)
rm -f "$TMP/scontrol.calls"
expect_ok sweep "$TMP/two.yaml" --slurm "$TMP/full" --array 1 --cpus_per_task 2
PATH="$TMP/bin:$PATH" SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID=4343 setsid bash "$TMP/full/sweep.sbatch" \
  >"$TMP/full.out" 2>&1 &
pid=$!
evaluated_full() {
  [ "$(grep -l '^  step [0-9]*/[0-9]* (' "$TMP"/full/shard-0/logs/*.log 2>/dev/null | wc -l)" -ge 1 ]
}
poll evaluated_full
kill -USR1 "-$pid" # the process group setsid made: the script, the sweep, its worker
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "the task after SIGUSR1 to all its processes exited $rc, want 75: $(tail -n 5 "$TMP/full.out")"
[ "$(cat "$TMP/scontrol.calls" 2>/dev/null)" = "requeue 4343_0" ] ||
  fail "SIGUSR1 to all: the task did not requeue itself: $(cat "$TMP/scontrol.calls" 2>/dev/null)"
grep -q 'interrupted at update [1-9]' "$TMP"/full/shard-0/logs/*.log ||
  fail "SIGUSR1 to all: no run stopped with its checkpoint: $(tail -n 3 "$TMP"/full/shard-0/logs/*.log)"
grep -q '^selectivbench sweep: sweep interrupted: 1 run interrupted' "$TMP/full.out" ||
  fail "SIGUSR1 to all: the sweep quit without waiting for its run's checkpoint: $(tail -n 3 "$TMP/full.out")"

# the warning: two minutes ahead, a fifth of a limit under ten minutes (else Slurm, which
# looks at limits every 30 s, would warn at the start); Slurm's forms of --time
for tw in '0:30:00 120' '10 120' '5 60' '02:00 24' '1 12' '0 120' '1-12 120' '1-0:30 120' '1- 120' '45:00 120'; do
  t=${tw% *}
  w=${tw#* }
  expect_ok sweep "$TMP/two.yaml" --slurm "$TMP/tw" --time "$t"
  grep -qxF "#SBATCH --signal=B:USR1@$w" "$TMP/tw/sweep.sbatch" ||
    fail "--time $t: want the warning $w s ahead: $(grep -- --signal "$TMP/tw/sweep.sbatch")"
done

# bad input
expect_error 2 "--time 'soon'" sweep "$TMP/two.yaml" --slurm "$TMP/bad" --time soon
for t in 1:2:3:4 5: :5 1-2-3 -5 1:-2 1-:5; do
  expect_error 2 "--time '$t'" sweep "$TMP/two.yaml" --slurm "$TMP/bad" --time "$t"
done
expect_error 2 "--partition 'a b'" sweep "$TMP/two.yaml" --slurm "$TMP/bad" --partition "a b"
expect_error 2 "--array" sweep "$TMP/two.yaml" --slurm "$TMP/bad" --array 0

echo "slurm script checks done, $failures failures"
[ "$failures" -eq 0 ]

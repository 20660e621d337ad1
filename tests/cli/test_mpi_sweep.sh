#!/bin/sh
# test_mpi_sweep.sh - `mpirun -np N selectivbench sweep FILE` (docs/cluster.md, "MPI sweeps"):
#  1. three ranks (a coordinator, two workers) give the same final metrics, run by run, as
#     `--workers 1`; every run started exactly once (attempts 1), the runs spread over both
#     worker ranks (rank and host recorded), nothing trained again by a second command;
#  2. a worker rank killed with -9 mid-sweep, once a running run has a checkpoint, then the
#     same command: every run in the database exactly once and finished, the runs finished
#     before the kill untouched (same finished_at), the runs in flight continued from their
#     checkpoints (no row recorded them) to the metrics and weights of an uninterrupted
#     sweep, PRAGMA integrity_check ok; the same with rank 0 (the coordinator) killed;
#  3. SIGUSR1 to mpirun mid-run: the runs stop with a checkpoint, the sweep exits 75; the
#     same command continues them (attempts 2) to the metrics of an uninterrupted sweep;
#  4. task 4's kind of run (--test_pretrained, evaluating another run's weights) waits for
#     the run that trains them;
#  5. sweep --slurm --mpi: the script, SIGUSR1 -> 75 -> requeue -> resumed;
#  6. --ranks_per_run 2 (teams of two ranks; each team run writes its log): the grad_shards 2 runs train data-parallel over
#     a team (world_size 2), the grad_shards 1 runs on the team's first rank; metrics and
#     weights (cmp) those of one process; SIGUSR1 mid-run, then the same command continues
#     it to the same weights; -np with worker ranks that do not form teams, and the flag
#     without mpirun, refused with one line.
# Skipped (exit 77) when the binary has no MPI or mpirun is missing.
#
# usage: test_mpi_sweep.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

command -v mpirun >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
# one machine: no network interface probing beyond loopback, no warnings about it
OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism
# Under AddressSanitizer (./run.sh asan): Open MPI's plugins leave allocations that
# LeakSanitizer can only attribute to unloaded modules, so leaks are not checked here (the
# rest of the suite checks them); memory errors still are.
case "${ASAN_OPTIONS:-}" in *detect_leaks=1*) ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; export ASAN_OPTIONS ;; esac
MPIRUN="mpirun --oversubscribe"
if ! $MPIRUN -np 2 "$SB" version >"$TMP/probe" 2>&1; then
  if grep -q "built without MPI" "$TMP/probe"; then
    echo "skip: this selectivbench was built without MPI"
  else
    echo "skip: mpirun cannot start two ranks here: $(tail -3 "$TMP/probe")"
  fi
  exit 77
fi

# "hash status test_acc test_loss", sorted
runs_of() {
  "$SB" results --db "$1" --json | grep -o '"hash":"[0-9a-f]*","status":"[a-z]*"\|"test_acc":[^,]*,"test_loss":[^,]*' |
    paste -d' ' - - | sort
}
# one field of every run, sorted: field_of DB NAME
field_of() {
  "$SB" results --db "$1" --json | grep -o "\"$2\":[^,}]*" | sort
}
integrity_ok() {
  "$SB" results --db "$1" --check 2>&1 | grep -q ": ok$"
}

# ---- 1. the same runs as --workers 1, each started once, spread over the ranks ------------
yaml="$SRC/tests/data/sweeps/tiny.yaml"
"$SB" sweep "$yaml" --threads 1 --quiet --results "$TMP/one" >"$TMP/one.out" 2>&1 ||
  fail "the --workers 1 sweep failed: $(cat "$TMP/one.out")"
$MPIRUN -np 3 "$SB" sweep "$yaml" --threads 1 --results "$TMP/mpi" >"$TMP/mpi.out" 2>&1 ||
  fail "mpirun -np 3 sweep failed: $(tail -5 "$TMP/mpi.out")"
[ "$(runs_of "$TMP/mpi/selectivbench.db")" = "$(runs_of "$TMP/one/selectivbench.db")" ] ||
  fail "mpirun -np 3 differs from --workers 1: $(runs_of "$TMP/mpi/selectivbench.db") vs $(runs_of "$TMP/one/selectivbench.db")"
[ "$(runs_of "$TMP/mpi/selectivbench.db" | grep -c '"status":"finished"')" -eq 4 ] ||
  fail "expected 4 finished runs: $(runs_of "$TMP/mpi/selectivbench.db")"
[ "$(field_of "$TMP/mpi/selectivbench.db" attempts | sort -u)" = '"attempts":1' ] ||
  fail "every run started once: $(field_of "$TMP/mpi/selectivbench.db" attempts)"
[ "$(field_of "$TMP/mpi/selectivbench.db" rank | sort -u | tr '\n' ' ')" = '"rank":1 "rank":2 ' ] ||
  fail "the runs spread over worker ranks 1 and 2: $(field_of "$TMP/mpi/selectivbench.db" rank)"
[ "$(field_of "$TMP/mpi/selectivbench.db" host | grep -c '"host":"')" -eq 4 ] ||
  fail "every run records its host: $(field_of "$TMP/mpi/selectivbench.db" host)"
grep -q "4 done, 0 failed" "$TMP/mpi.out" || fail "the summary line: $(tail -2 "$TMP/mpi.out")"
# the same command again trains nothing
$MPIRUN -np 3 "$SB" sweep "$yaml" --threads 1 --results "$TMP/mpi" >"$TMP/again.out" 2>&1 ||
  fail "the second mpirun sweep failed: $(tail -5 "$TMP/again.out")"
grep -q "4 finished before, 0 to run" "$TMP/again.out" || fail "a second sweep trained again: $(cat "$TMP/again.out")"
[ "$(field_of "$TMP/mpi/selectivbench.db" attempts | sort -u)" = '"attempts":1' ] ||
  fail "a second sweep started runs again: $(field_of "$TMP/mpi/selectivbench.db" attempts)"

# ---- 2. a rank killed mid-sweep, then the same command ----------------------------------
# runs of a few seconds each
sed 's/^  - 640$/  - 24000/' "$yaml" >"$TMP/slow.yaml"
grep -q '^  - 24000$' "$TMP/slow.yaml" || fail "could not write the slow grid"

# the pid of MPI rank $2 of the sweep into results folder $1
rank_pid() {
  for p in $(pgrep -f "sweep $TMP/slow.yaml --threads 1 --results $1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
finished_count() {
  [ -f "$1/selectivbench.db" ] || { echo 0; return; }
  "$SB" results --db "$1/selectivbench.db" --json 2>/dev/null | grep -o '"status":"finished"' | wc -l
}
# model checkpoints in results folder $1 (the runs that saved at least once)
ckpt_count() {
  ls "$1"/checkpoints/*.safetensors 2>/dev/null | grep -vc '\.optim\.safetensors$'
}
# the uninterrupted sweep every killed one must end at, bit for bit
"$SB" sweep "$TMP/slow.yaml" --threads 1 --quiet --results "$TMP/slow_one" >"$TMP/slow_one.out" 2>&1 ||
  fail "the uninterrupted slow sweep failed: $(cat "$TMP/slow_one.out")"
kill_test() { # kill_test RANK FOLDER
  $MPIRUN -np 3 "$SB" sweep "$TMP/slow.yaml" --threads 1 --results "$2" >"$2.out" 2>&1 &
  job=$!
  # once a run is in the database and a running one has written a checkpoint, kill the rank
  i=0
  while { [ "$(finished_count "$2")" -lt 1 ] || [ "$(ckpt_count "$2")" -le "$(finished_count "$2")" ]; } &&
    [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
  [ "$(finished_count "$2")" -ge 1 ] || fail "rank $1 test: no run finished in 2 minutes: $(cat "$2.out")"
  "$SB" results --db "$2/selectivbench.db" --json | grep -o '"hash":"[0-9a-f]*"\|"finished_at":"[^"]*"' |
    paste -d' ' - - | sort >"$2.before"
  pid=$(rank_pid "$2" "$1") || fail "rank $1 test: rank $1 not found"
  [ -n "$pid" ] && kill -9 "$pid"
  wait "$job" && fail "rank $1 test: mpirun exited 0 after rank $1 was killed"
  # the state the kill left (frozen: mpirun is gone): a checkpoint of a run without a
  # finished row must be continued by the rerun (under load, the run seen training may have
  # finished before the kill landed)
  in_flight=$(($(ckpt_count "$2") - $(finished_count "$2")))
  $MPIRUN -np 3 "$SB" sweep "$TMP/slow.yaml" --threads 1 --results "$2" >"$2.rerun" 2>&1 ||
    fail "rank $1 test: the rerun failed: $(tail -5 "$2.rerun")"
  [ "$(finished_count "$2")" -eq 4 ] || fail "rank $1 test: $(finished_count "$2") of 4 runs finished after the rerun"
  n_rows=$("$SB" results --db "$2/selectivbench.db" --json | grep -o '"hash":"[0-9a-f]*"' | wc -l)
  [ "$n_rows" -eq 4 ] || fail "rank $1 test: $n_rows rows for 4 runs"
  "$SB" results --db "$2/selectivbench.db" --json | grep -o '"hash":"[0-9a-f]*"\|"finished_at":"[^"]*"' |
    paste -d' ' - - | sort >"$2.after"
  while read -r line; do
    grep -qxF "$line" "$2.after" || fail "rank $1 test: a run finished before the kill changed: $line"
  done <"$2.before"
  integrity_ok "$2/selectivbench.db" || fail "rank $1 test: integrity check"
  # the runs in flight continued from their checkpoints (no row said so: their rank, or the
  # coordinator that writes the rows, was dead), to the uninterrupted sweep's bits
  if [ "$in_flight" -gt 0 ]; then
    grep -l "resuming at update" "$2"/logs/*.log >/dev/null 2>&1 ||
      fail "rank $1 test: no run in flight continued from its checkpoint"
  fi
  [ "$(runs_of "$2/selectivbench.db")" = "$(runs_of "$TMP/slow_one/selectivbench.db")" ] ||
    fail "rank $1 test: the metrics differ from an uninterrupted sweep"
  for f in "$TMP/slow_one/checkpoints/"*.safetensors; do
    cmp -s "$f" "$2/checkpoints/$(basename "$f")" || fail "rank $1 test: $(basename "$f") differs"
  done
  echo "rank $1 killed after $(wc -l <"$2.before") finished run(s); rerun: $(grep '^sweep .* settled' "$2.rerun")"
}
kill_test 1 "$TMP/kill1"
kill_test 0 "$TMP/kill0"

# ---- 3. SIGUSR1 mid-run: checkpoints, exit 75, the same command continues -----------------
$MPIRUN -np 3 "$SB" sweep "$TMP/slow.yaml" --threads 1 --results "$TMP/usr1" >"$TMP/usr1.out" 2>&1 &
job=$!
i=0 # wait until both workers' runs are training (their progress lines' pipes are up)
while [ "$(pgrep -f -c "train .*--results $TMP/usr1")" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
kill -USR1 "$job"
wait "$job"
rc=$?
[ "$rc" -eq 75 ] || fail "SIGUSR1: mpirun exited $rc, expected 75: $(tail -5 "$TMP/usr1.out")"
grep -q "interrupted" "$TMP/usr1.out" || fail "SIGUSR1: no interrupted run: $(tail -5 "$TMP/usr1.out")"
$MPIRUN -np 3 "$SB" sweep "$TMP/slow.yaml" --threads 1 --results "$TMP/usr1" >"$TMP/usr1.rerun" 2>&1 ||
  fail "SIGUSR1: the rerun failed: $(tail -5 "$TMP/usr1.rerun")"
grep -q "continuing its record" "$TMP/usr1.rerun" || fail "SIGUSR1: the rerun did not continue a run: $(cat "$TMP/usr1.rerun")"
[ "$(runs_of "$TMP/usr1/selectivbench.db")" = "$(runs_of "$TMP/slow_one/selectivbench.db")" ] ||
  fail "SIGUSR1: the resumed runs differ from the uninterrupted ones: $(runs_of "$TMP/usr1/selectivbench.db") vs $(runs_of "$TMP/slow_one/selectivbench.db")"
field_of "$TMP/usr1/selectivbench.db" attempts | grep -q '"attempts":2' ||
  fail "SIGUSR1: no run counts two attempts: $(field_of "$TMP/usr1/selectivbench.db" attempts)"
integrity_ok "$TMP/usr1/selectivbench.db" || fail "SIGUSR1: integrity check"
echo "SIGUSR1: $(grep '^sweep .* settled' "$TMP/usr1.out") / rerun: $(grep '^sweep .* settled' "$TMP/usr1.rerun")"

# ---- 4. a run evaluating another run's weights waits for it ------------------------------
sed -e 's/^    values: \[transformer, gru\]$/    values: [gru]/' -e 's/^    values: \[1, 2\]$/    values: [1]/' \
  "$yaml" >"$TMP/dep.yaml"
# test_pretrained as a grid parameter: False trains the weights, True evaluates them
awk '{print} /^parameters:$/ {print "  test_pretrained:"; print "    values: [True, False]"}' \
  "$TMP/dep.yaml" >"$TMP/dep2.yaml"
$MPIRUN -np 3 "$SB" sweep "$TMP/dep2.yaml" --threads 1 --results "$TMP/dep" >"$TMP/dep.out" 2>&1 ||
  fail "the dependent sweep failed: $(cat "$TMP/dep.out")"
[ "$(finished_count "$TMP/dep")" -eq 2 ] || fail "the dependent sweep: $(cat "$TMP/dep.out")"
# the evaluating run started after the training run ended
train_end=$(grep -n "gru .*: done" "$TMP/dep.out" | head -1 | cut -d: -f1)
eval_start=$(grep -n "started on rank" "$TMP/dep.out" | sed -n 2p | cut -d: -f1)
[ -n "$train_end" ] && [ -n "$eval_start" ] && [ "$eval_start" -gt "$train_end" ] ||
  fail "the evaluating run did not wait for the training run: $(cat "$TMP/dep.out")"

# ---- 5. sweep --slurm --mpi: one MPI job; SIGUSR1 to its script -> 75 -> requeue -> resumed
expect_ok sweep "$TMP/slow.yaml" --slurm "$TMP/slm" --mpi --ranks 3 --cpus_per_task 1 --time 0:30:00
script="$TMP/slm/sweep.sbatch"
for line in '#SBATCH --ntasks=3' '#SBATCH --cpus-per-task=1' '#SBATCH --signal=B:USR1@120' \
  '#SBATCH --requeue'; do
  grep -qxF -- "$line" "$script" || fail "--mpi: the script lacks '$line'"
done
grep -q '^#SBATCH --array' "$script" && fail "--mpi: the script is a job array"
expect_error 2 "with --mpi give --ranks" sweep "$TMP/slow.yaml" --slurm "$TMP/slm2" --mpi --array 2
mkdir -p "$TMP/bin"
cat >"$TMP/bin/scontrol" <<EOS
#!/bin/sh
echo "\$@" >>"$TMP/scontrol.calls"
EOS
chmod +x "$TMP/bin/scontrol"
# a 2-core machine outside an allocation: let mpirun place 3 ranks
OMPI_MCA_rmaps_base_oversubscribe=1 SLURM_NTASKS=3 SLURM_JOB_ID=4242 PATH="$TMP/bin:$PATH" \
  bash "$script" >"$TMP/slm.out" 2>&1 &
job=$!
i=0
while [ "$(pgrep -f -c "train .*--results $TMP/slm/results")" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
kill -USR1 "$job"
wait "$job"
rc=$?
[ "$rc" -eq 75 ] || fail "--mpi script: exit $rc after SIGUSR1, expected 75: $(tail -5 "$TMP/slm.out")"
[ "$(cat "$TMP/scontrol.calls" 2>/dev/null)" = "requeue 4242" ] ||
  fail "--mpi script: did not requeue its job: $(cat "$TMP/scontrol.calls" 2>/dev/null)"
OMPI_MCA_rmaps_base_oversubscribe=1 SLURM_NTASKS=3 SLURM_JOB_ID=4242 PATH="$TMP/bin:$PATH" \
  bash "$script" >"$TMP/slm2.out" 2>&1 || fail "--mpi script: the second start failed: $(tail -5 "$TMP/slm2.out")"
[ "$(runs_of "$TMP/slm/results/selectivbench.db")" = "$(runs_of "$TMP/slow_one/selectivbench.db")" ] ||
  fail "--mpi script: the requeued job's runs differ from the uninterrupted sweep's"

# ---- 6. teams: --ranks_per_run 2 ---------------------------------------------------------
awk '{print} /^parameters:$/ {print "  grad_shards:"; print "    values: [1, 2]"}' "$yaml" >"$TMP/team.yaml"
"$SB" sweep "$TMP/team.yaml" --threads 1 --quiet --results "$TMP/team_one" >"$TMP/team_one.out" 2>&1 ||
  fail "teams: the one-process sweep failed: $(cat "$TMP/team_one.out")"
$MPIRUN -np 3 "$SB" sweep "$TMP/team.yaml" --threads 1 --ranks_per_run 2 --results "$TMP/team" \
  >"$TMP/team.out" 2>&1 || fail "teams: mpirun -np 3 --ranks_per_run 2 failed: $(tail -5 "$TMP/team.out")"
[ "$(runs_of "$TMP/team/selectivbench.db")" = "$(runs_of "$TMP/team_one/selectivbench.db")" ] ||
  fail "teams: the metrics differ from one process's: $(runs_of "$TMP/team/selectivbench.db") vs $(runs_of "$TMP/team_one/selectivbench.db")"
[ "$(field_of "$TMP/team/selectivbench.db" world_size | sort | uniq -c | tr -s ' ' | tr '\n' ' ')" = \
  ' 4 "world_size":1  4 "world_size":2 ' ] ||
  fail "teams: 4 runs on one rank and 4 over the team expected: $(field_of "$TMP/team/selectivbench.db" world_size)"
[ "$(field_of "$TMP/team/selectivbench.db" rank | sort -u)" = '"rank":1' ] ||
  fail "teams: the team's first rank records every run: $(field_of "$TMP/team/selectivbench.db" rank)"
grep -q "8 done, 0 failed.* on 1 team of 2 ranks" "$TMP/team.out" || fail "teams: the summary line: $(tail -2 "$TMP/team.out")"
n_ckpt=0
for f in "$TMP/team_one/checkpoints/"*.safetensors; do
  cmp -s "$f" "$TMP/team/checkpoints/$(basename "$f")" || fail "teams: weights differ: $(basename "$f")"
  n_ckpt=$((n_ckpt + 1))
done
[ "$n_ckpt" -ge 8 ] || fail "teams: $n_ckpt checkpoints compared, expected 8 or more"
# every run has its log: the 4 a team trained in-process say so, with their evaluations and end
n_logs=$(ls "$TMP/team/logs/"*.log 2>/dev/null | wc -l)
[ "$n_logs" -eq 8 ] || fail "teams: $n_logs run logs, expected 8"
n_team=$(grep -l "trained in-process by a team of 2 ranks" "$TMP/team/logs/"*.log 2>/dev/null | wc -l)
[ "$n_team" -eq 4 ] || fail "teams: $n_team logs of team runs, expected 4"
for f in $(grep -l "trained in-process by a team of 2 ranks" "$TMP/team/logs/"*.log); do
  grep -q "^update [0-9]*/[0-9]*: train loss .* test loss .* acc " "$f" &&
    grep -q "^done: test acc 0\.[0-9]*$" "$f" || fail "teams: $(basename "$f") lacks its evaluations or end: $(cat "$f")"
done
# SIGUSR1 while a team trains: checkpoint, 75, the same command continues it to the same weights
sed -e 's/^    values: \[transformer, gru\]$/    values: [gru]/' -e 's/^    values: \[1, 2\]$/    values: [1]/' \
  "$TMP/slow.yaml" | awk '{print} /^parameters:$/ {print "  grad_shards:"; print "    values: [2]"}' >"$TMP/team_slow.yaml"
"$SB" sweep "$TMP/team_slow.yaml" --threads 1 --quiet --results "$TMP/team_slow_one" >"$TMP/team_slow_one.out" 2>&1 ||
  fail "teams: the one-process slow sweep failed: $(cat "$TMP/team_slow_one.out")"
$MPIRUN -np 3 "$SB" sweep "$TMP/team_slow.yaml" --threads 1 --ranks_per_run 2 --results "$TMP/team_usr1" \
  >"$TMP/team_usr1.out" 2>&1 &
job=$!
i=0 # once the run has written a checkpoint (at its first evaluation)
while ! ls "$TMP/team_usr1/checkpoints/"*.safetensors >/dev/null 2>&1 && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
kill -USR1 "$job"
wait "$job"
rc=$?
[ "$rc" -eq 75 ] || fail "teams, SIGUSR1: mpirun exited $rc, expected 75: $(tail -5 "$TMP/team_usr1.out")"
$MPIRUN -np 3 "$SB" sweep "$TMP/team_slow.yaml" --threads 1 --ranks_per_run 2 --results "$TMP/team_usr1" \
  >"$TMP/team_usr1.rerun" 2>&1 || fail "teams, SIGUSR1: the rerun failed: $(tail -5 "$TMP/team_usr1.rerun")"
grep -q "continuing its record" "$TMP/team_usr1.rerun" ||
  fail "teams, SIGUSR1: the rerun did not continue the run: $(cat "$TMP/team_usr1.rerun")"
[ "$(runs_of "$TMP/team_usr1/selectivbench.db")" = "$(runs_of "$TMP/team_slow_one/selectivbench.db")" ] ||
  fail "teams, SIGUSR1: the resumed run differs: $(runs_of "$TMP/team_usr1/selectivbench.db") vs $(runs_of "$TMP/team_slow_one/selectivbench.db")"
for f in "$TMP/team_slow_one/checkpoints/"*.safetensors; do
  cmp -s "$f" "$TMP/team_usr1/checkpoints/$(basename "$f")" || fail "teams, SIGUSR1: weights differ after the resume"
done
echo "teams: $(grep '^sweep .* settled' "$TMP/team.out"); SIGUSR1 rerun: $(grep '^sweep .* settled' "$TMP/team_usr1.rerun")"
# refused: 3 worker ranks in teams of 2; the flag without mpirun
$MPIRUN -np 4 "$SB" sweep "$TMP/team.yaml" --threads 1 --ranks_per_run 2 --results "$TMP/team_bad" \
  >"$TMP/team_bad.out" 2>&1 && fail "teams: -np 4 --ranks_per_run 2 was accepted"
[ "$(grep -c "error: --ranks_per_run 2: the 3 worker ranks of mpirun -np 4 do not form teams of 2" "$TMP/team_bad.out")" -eq 1 ] ||
  fail "teams: -np 4: not one error line: $(cat "$TMP/team_bad.out")"
expect_error 2 "teams of ranks need mpirun" sweep "$TMP/team.yaml" --ranks_per_run 2 --results "$TMP/team_bad2"
expect_error 2 "needs --mpi" sweep "$TMP/team.yaml" --slurm "$TMP/slm3" --ranks_per_run 2
expect_ok sweep "$TMP/team.yaml" --slurm "$TMP/slm4" --mpi --ranks_per_run 2 # 8 runs: 8 teams
grep -q "^#SBATCH --ntasks=17$" "$TMP/slm4/sweep.sbatch" && grep -q -- "--ranks_per_run 2" "$TMP/slm4/sweep.sbatch" ||
  fail "teams: the --slurm --mpi script: $(grep -e ntasks -e ranks_per_run "$TMP/slm4/sweep.sbatch")"
expect_error 2 "must form teams" sweep "$TMP/team.yaml" --slurm "$TMP/slm5" --mpi --ranks_per_run 2 --ranks 4

echo "mpi sweep checks done, $failures failures"
[ "$failures" -eq 0 ]

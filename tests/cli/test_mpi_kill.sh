#!/bin/bash
# test_mpi_kill.sh - a kill never loses an MPI sweep's run (issue 35, item 0): `mpirun -np 3
# sweep` (a coordinator, two workers) of four runs of a few seconds, one rank (chosen at
# random: the coordinator or a worker) killed with -9 at a random instant, then the same
# command until it exits 0. Every time: one row per run, all finished, metrics and checkpoint
# bytes those of an uninterrupted sweep, the database's integrity check ok. KILLS rounds
# (default 6; the closing note of issue 35 reports 50); the seed of the random instants is
# printed, SEED=... repeats them.
# Skipped (exit 77) when the binary has no MPI or mpirun is missing.
#
# usage: test_mpi_kill.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

command -v mpirun >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
case "${ASAN_OPTIONS:-}" in *detect_leaks=1*) export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ;; esac
MPIRUN="mpirun --oversubscribe"
if ! $MPIRUN -np 2 "$SB" version >"$TMP/probe" 2>&1; then
  echo "skip: mpirun cannot start two ranks with this selectivbench: $(tail -1 "$TMP/probe")"
  exit 77
fi
KILLS=${KILLS:-6}
SEED=${SEED:-$$}
RANDOM=$SEED
echo "test_mpi_kill: $KILLS kills, SEED=$SEED"

# four runs of a second or two, with checkpoints along the way (an evaluation every 5,000
# samples)
sed 's/^  - 640$/  - 24000/' "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/slow.yaml"
grep -q '^  - 24000$' "$TMP/slow.yaml" || fail "could not write the slow grid"

# "hash status test_acc test_loss", sorted
runs_of() {
  "$SB" results --db "$1" --json | grep -o '"hash":"[0-9a-f]*","status":"[a-z]*"\|"test_acc":[^,]*,"test_loss":[^,]*' |
    paste -d' ' - - | sort
}
"$SB" sweep "$TMP/slow.yaml" --threads 1 --quiet --results "$TMP/one" >"$TMP/one.out" 2>&1 ||
  fail "the uninterrupted sweep failed: $(cat "$TMP/one.out")"
want=$(runs_of "$TMP/one/selectivbench.db")

resumed=0
for round in $(seq "$KILLS"); do
  dir="$TMP/k$round"
  rank=$((RANDOM % 3))
  delay_ms=$((300 + RANDOM % 3000))
  $MPIRUN -np 3 "$SB" sweep "$TMP/slow.yaml" --threads 1 --results "$dir" >"$dir.out" 2>&1 &
  job=$!
  sleep "$((delay_ms / 1000)).$(printf '%03d' $((delay_ms % 1000)))"
  pid=""
  for p in $(pgrep -f "sweep $TMP/slow.yaml --threads 1 --results $dir\$"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then
      pid=$p
    fi
  done
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  wait "$job"
  # the same command until it finishes (a kill after the sweep's end leaves nothing to do)
  tries=0
  until $MPIRUN -np 3 "$SB" sweep "$TMP/slow.yaml" --threads 1 --results "$dir" >"$dir.rerun" 2>&1; do
    tries=$((tries + 1))
    [ $tries -lt 3 ] || { fail "round $round: the rerun failed 3 times: $(tail -3 "$dir.rerun")"; break; }
  done
  got=$(runs_of "$dir/selectivbench.db")
  [ "$got" = "$want" ] || fail "round $round (rank $rank killed at $delay_ms ms): $got, want $want"
  for f in "$TMP/one/checkpoints/"*.safetensors; do
    cmp -s "$f" "$dir/checkpoints/$(basename "$f")" ||
      fail "round $round (rank $rank killed at $delay_ms ms): $(basename "$f") differs"
  done
  "$SB" results --db "$dir/selectivbench.db" --check 2>&1 | grep -q ": ok$" ||
    fail "round $round: integrity check"
  n=$(grep -l "resuming at update" "$dir"/logs/*.log 2>/dev/null | wc -l)
  resumed=$((resumed + n))
  echo "round $round: rank $rank killed at $delay_ms ms ($([ -n "$pid" ] && echo killed || echo "already gone")); $n run(s) continued from a checkpoint"
  rm -rf "$dir"
done
echo "test_mpi_kill: $KILLS rounds, $resumed runs continued from their checkpoints; $failures failures"
[ "$failures" -eq 0 ]

#!/bin/sh
# test_plan.sh - `selectivbench plan` on a tiny grid written here: its JSON has as many runs
# as the dry run, core-hours > 0, a wall time on 2 ranks no longer than on 1, one per_run
# entry a run; the second call takes every calibration from the cache (SB_CACHE_DIR) and
# says so; a damaged cache is measured again and rewritten; bad inputs give one error line;
# `sweep` prints the plan's total before it starts; `train` prints the plan of a run planned
# over ten minutes before its first update (issue 38), and none for a short run.
#
# usage: test_plan.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"
export SB_CACHE_DIR="$TMP/cache"
cache="$SB_CACHE_DIR/plan-calibration.json"

# 2 models x 2 widths x 2 seeds: 8 runs of 4 shapes (the seed does not change the cost)
cat >"$TMP/grid.yaml" <<'YAML'
program: train.py
method: grid
parameters:
  model:
    values: [transformer, gru]
  feat_size:
    values: [16, 32]
  seed:
    values: [1, 2]
command:
  - ${env}
  - python
  - ${program}
  - "--vocab"
  - 9
  - "--amb"
  - 8
  - "--grammar_scale"
  - True
  - "--train_seqlen_max"
  - 20
  - "--test_seqlen_max"
  - 20
  - "--dataset_size"
  - 640
  - "--test_size"
  - 40
  - "--batch_size"
  - 32
  - "--layers"
  - 1
  - ${args}
YAML

dry=$("$SB" sweep "$TMP/grid.yaml" --dry_run | tail -n 1)
[ "$dry" = "8 runs" ] || fail "dry run: '$dry', expected '8 runs'"

# a number of the JSON in $TMP/out
num() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" "$TMP/out" | head -n 1; }

expect_ok plan "$TMP/grid.yaml" --json --ranks 1 --threads 1 --calibration_seconds 0.1
runs=$(num runs)
core1=$(num core_hours)
wall1=$(num wall_hours)
[ "$runs" = 8 ] || fail "plan: runs '$runs', the dry run has 8: $(head -c 300 "$TMP/out")"
grep -q '^{"runs":8,"core_hours":[0-9.e+-]*,"wall_hours":[0-9.e+-]*,"per_run":\[{' "$TMP/out" ||
  fail "plan --json does not start with runs, core_hours, wall_hours, per_run: $(head -c 200 "$TMP/out")"
[ "$(grep -o '"hash":"[0-9a-f]\{16\}"' "$TMP/out" | wc -l)" -eq 8 ] ||
  fail "plan --json: not 8 per_run entries with a hash"
for key in train_frames eval_frames flops peak_bytes seconds feat_size seed; do
  [ "$(grep -o "\"$key\":" "$TMP/out" | wc -l)" -eq 8 ] || fail "plan --json: per_run lacks $key"
done
awk -v c="$core1" -v w="$wall1" 'BEGIN { exit !(c > 0 && w > 0 && w * 1.000001 >= c) }' ||
  fail "plan on 1 rank of 1 thread: core-hours $core1, wall hours $wall1 (want > 0, wall = core)"
[ "$(grep -c '^plan: calibration [1-4]/4: .*(measured in ' "$TMP/err")" -eq 4 ] ||
  fail "plan: not 4 measured calibration lines: $(cat "$TMP/err")"
[ -s "$cache" ] || fail "plan: no cache file $cache"

# the second call: every calibration from the cache, the same totals
expect_ok plan "$TMP/grid.yaml" --json --ranks 2 --threads 1 --calibration_seconds 0.1
[ "$(num core_hours)" = "$core1" ] || fail "cached plan: core-hours $(num core_hours), was $core1"
wall2=$(num wall_hours)
awk -v a="$wall2" -v b="$wall1" 'BEGIN { exit !(a > 0 && a <= b) }' ||
  fail "wall hours on 2 ranks $wall2 > on 1 rank $wall1"
grep -q '^plan: 4 calibrations: 0 measured, 4 from the cache' "$TMP/err" &&
  [ "$(grep -c '^plan: calibration [1-4]/4: .*(cached)' "$TMP/err")" -eq 4 ] ||
  fail "second plan does not use the cache: $(cat "$TMP/err")"

# the text table: a row per (model, width), the totals, early stopping not foreseen
expect_ok plan "$TMP/grid.yaml" --ranks 3 --threads 1
[ "$(grep -c '^\(transformer\|gru\) *\(16\|32\) *2 ' "$TMP/out")" -eq 4 ] ||
  fail "plan table: not 4 rows of 2 runs: $(cat "$TMP/out")"
grep -q '^total: .* core-hours; wall time on 3 ranks of 1 thread: ' "$TMP/out" &&
  grep -q '^early stopping: not foreseen' "$TMP/out" || fail "plan table totals: $(cat "$TMP/out")"

# a damaged cache: measured again (said on stderr), rewritten, then read
printf '{"version": 4, "calibrations": [\n{"machine": "x", "thr' >"$cache"
expect_ok plan "$TMP/grid.yaml" --json --threads 1 --calibration_seconds 0.1
grep -q 'calibration cache .* was damaged or of an older version: measured again and rewritten' "$TMP/err" &&
  grep -q '^plan: 4 calibrations: 4 measured' "$TMP/err" ||
  fail "damaged cache: $(cat "$TMP/err")"
expect_ok plan "$TMP/grid.yaml" --json --threads 1
grep -q '^plan: 4 calibrations: 0 measured, 4 from the cache' "$TMP/err" ||
  fail "the rewritten cache does not read: $(cat "$TMP/err")"
head -c 4000 /dev/urandom >"$cache"
expect_ok plan "$TMP/grid.yaml" --json --threads 1 --calibration_seconds 0.1 --filter feat_size=16
grep -q 'was damaged' "$TMP/err" && [ "$(num runs)" = 4 ] ||
  fail "random bytes as the cache: $(cat "$TMP/err")"

# bad inputs: one error line each
expect_error 1 "nope.yaml" plan "$TMP/nope.yaml"
expect_error 2 "ranks" plan "$TMP/grid.yaml" --ranks 0
expect_error 2 "threads" plan "$TMP/grid.yaml" --threads -1
expect_error 2 "name one sweep file" plan
expect_error 2 "model takes transformer, gru" plan "$TMP/grid.yaml" --filter model=mamba
expect_error 2 "--shard" plan "$TMP/grid.yaml" --shard 2/2

# sweep prints the plan's total before it starts (from the cache: nothing measured)
"$SB" sweep "$TMP/grid.yaml" --limit 1 --threads 1 --quiet --results "$TMP/sw" >"$TMP/out" 2>&1 ||
  fail "sweep --limit 1: $(tail -n 3 "$TMP/out")"
grep -q '^plan: 1 run, [0-9.e+-]* core-hours, about .* on 1 worker of 1 thread, [0-9.e+-]* GiB at most per run (calibrated on this machine' \
  "$TMP/out" || fail "sweep: no plan line: $(head -n 3 "$TMP/out")"

# the dry run's time is the plan's, from the cache: three calls print the same line (issue 34)
for i in 1 2 3; do
  "$SB" sweep "$TMP/grid.yaml" --dry_run --threads 1 2>&1 | grep '^plan: ' >"$TMP/dry$i"
done
grep -q '^plan: 8 runs, [0-9.e+-]* core-hours, about .* on 1 worker of 1 thread, [0-9.e+-]* GiB at most per run (' \
  "$TMP/dry1" || fail "sweep --dry_run: no plan line: $(cat "$TMP/dry1")"
cmp -s "$TMP/dry1" "$TMP/dry2" && cmp -s "$TMP/dry1" "$TMP/dry3" ||
  fail "three dry runs differ: $(cat "$TMP/dry1" "$TMP/dry2" "$TMP/dry3")"
# plan's default threads are a sweep's: the cores / --ranks
expect_ok plan "$TMP/grid.yaml" --ranks 1
cores=$(nproc)
grep -q "^total: .* core-hours; wall time on 1 rank of $cores thread" "$TMP/out" ||
  fail "plan's default threads, want $cores: $(grep '^total' "$TMP/out")"

# train: the paper-size defaults announce their plan, then stop at the first update on SIGTERM
checks=$((checks + 1))
"$SB" train --threads 1 --results "$TMP/paper" >"$TMP/paper.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q '^  plan: ' "$TMP/paper.out" && kill -0 $pid 2>/dev/null; do
  sleep 0.1
  i=$((i + 1))
done
kill -TERM $pid 2>/dev/null # (SIGINT: ignored by a background job of sh)
wait $pid
grep -q '^  plan: about [0-9:.]* [a-z ]*on 1 thread and [0-9.e+-]* GiB at most (.*); smaller: --dataset_size' \
  "$TMP/paper.out" || fail "train at the paper's size: no plan line: $(head -n 4 "$TMP/paper.out")"
# a short run says nothing of a plan
expect_ok train --model gru --vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 10 \
  --test_seqlen_max 10 --dataset_size 64 --test_size 8 --feat_size 8 --layers 1 --threads 1 \
  --results "$TMP/short"
grep -q 'plan:' "$TMP/out" && fail "a short run printed a plan: $(grep 'plan:' "$TMP/out")"

echo "test_plan: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

#!/bin/sh
# test_alive.sh - a run shows that it is alive, and a dead run does not pass for a live one:
#   - progress inside a run: off a terminal, `train --progress_every 0` prints a plain
#     "progress:" line after every update but the last (step, samples, running loss and
#     accuracy, lr, tokens/s, ETA); the running loss is the mean since the last evaluation
#     (at an evaluation's update it equals that evaluation's train loss); a sweep worker's
#     log gets the same lines; a negative interval is a usage error;
#   - kill -9: a run whose process is gone reads `interrupted` (not `running`) with its
#     reason, in the table and in JSON, and `--status interrupted` finds it; `train
#     --resume` continues it (attempt 2) and finishes it; a sweep killed with -9, run again,
#     continues its run from the checkpoint;
#   - sweep --dry_run summarises the axes (varied parameters with their values, the fixed
#     ones, narrowed by --filter) and estimates the cost (runs x samples, frames, parameters,
#     FLOPs; a time whose form only is checked), the count staying the last line.
# Every wait polls for its condition (at most a minute), never a fixed sleep; nothing is timed.
#
# usage: test_alive.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

# ---- progress lines off a terminal ---------------------------------------------------------
# 150 updates of 16 samples, evaluated every 50
short="--model gru --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 \
--test_seqlen_max 20 --dataset_size 2400 --test_size 12 --batch_size 16 --test_bs 6 \
--feat_size 16 --layers 1 --epoch_size 800 --threads 1"
# shellcheck disable=SC2086
expect_ok train $short --results "$TMP/p" --progress_every 0
grep '^  progress: ' "$TMP/out" >"$TMP/progress"
[ "$(wc -l <"$TMP/progress")" -eq 149 ] ||
  fail "--progress_every 0: $(wc -l <"$TMP/progress") progress lines, want 149 (updates 1-149)"
head -n 1 "$TMP/progress" |
  grep -q '^  progress: step 1/150 (16 samples): loss [0-9.]* acc [0-9.]* lr 0.00e+00 | [0-9]* tok/s, ETA [0-9:]*$' ||
  fail "first progress line: $(head -n 1 "$TMP/progress")"
# samples = 16 x step on every line, steps 1..149 in order
awk '{split($3, s, "/"); if (s[1] != NR || substr($4, 2) != 16 * NR) bad = 1} END {exit bad}' \
  "$TMP/progress" || fail "progress lines: steps or samples out of order: $(head -n 3 "$TMP/progress")"
# the running loss at update 100 is the mean of updates 51-100: the evaluation's train loss
at100=$(sed -n 's/^  progress: step 100\/150 ([0-9]* samples): loss \([0-9.]*\) .*/\1/p' "$TMP/progress")
eval100=$(sed -n 's/^  step 100\/150 ([0-9]* samples): train loss \([0-9.]*\) .*/\1/p' "$TMP/out")
[ -n "$at100" ] && [ "$at100" = "$eval100" ] ||
  fail "running loss at update 100 '$at100', the evaluation's train loss '$eval100'"
# the default: no line per update (nothing here is timed, so no count is asserted)
# shellcheck disable=SC2086
expect_error 2 "progress_every" train $short --results "$TMP/p" --progress_every -1

# ---- kill -9: interrupted once the process is gone, then resumed -----------------------------
# 1500 updates (a few seconds on one thread), evaluated every 100
long="--model gru --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 \
--test_seqlen_max 20 --dataset_size 24000 --test_size 12 --batch_size 16 --test_bs 6 \
--feat_size 16 --layers 1 --epoch_size 1600 --threads 1"
db="$TMP/k/selectivbench.db"
# shellcheck disable=SC2086
"$SB" train $long --results "$TMP/k" >"$TMP/k.out" 2>&1 &
pid=$!
poll has_eval "$TMP/k.out"
# and its checkpoint: the evaluation line comes before its save (a loaded machine can kill in
# between, leaving nothing to resume)
k_ckpt() { ls "$TMP"/k/checkpoints/*.safetensors >/dev/null 2>&1; }
poll k_ckpt
[ "$(field "$db" status)" = running ] || fail "while it trains the run is $(field "$db" status)"
kill -9 $pid
wait $pid 2>/dev/null
[ "$(field "$db" status)" = interrupted ] ||
  fail "after kill -9 the run is '$(field "$db" status)', want interrupted"
expect_ok results "$TMP/k"
grep -q ' interrupted ' "$TMP/out" && grep -q 'its process ended without finishing (killed?)' "$TMP/out" ||
  fail "results after kill -9: $(cat "$TMP/out")"
expect_ok results "$TMP/k" --status interrupted
grep -q '^1 of 1 runs' "$TMP/out" || fail "--status interrupted after kill -9: $(cat "$TMP/out")"
expect_ok results "$TMP/k" --status running
grep -q '^0 of 1 runs' "$TMP/out" || fail "--status running after kill -9: $(cat "$TMP/out")"
# shellcheck disable=SC2086
"$SB" train $long --results "$TMP/k" --resume >"$TMP/k2.out" 2>&1 ||
  fail "train --resume after kill -9: $(cat "$TMP/k2.out")"
grep -q 'resuming at update [1-9]' "$TMP/k2.out" || fail "--resume did not continue: $(cat "$TMP/k2.out")"
[ "$(field "$db" status)" = finished ] && [ "$(field "$db" attempts)" = 2 ] ||
  fail "after --resume: status $(field "$db" status), attempts $(field "$db" attempts)"

# ---- a sweep killed with -9, run again: its run continues from the checkpoint ---------------
# one gru run of 750 updates; its worker prints a progress line after every update
sed -e 's/- 640$/- 24000/' -e 's/values: \[transformer, gru\]/values: [gru]/' \
  -e 's/values: \[1, 2\]/values: [1]/' -e 's/^  - \${args}$/  - "--progress_every"\n  - 0\n  - ${args}/' \
  "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/one.yaml"
grep -q 'progress_every' "$TMP/one.yaml" || fail "the sweep file was not written: $(cat "$TMP/one.yaml")"
evaluated() { grep -q '^  step [0-9]*/[0-9]* (' "$TMP"/sw/logs/*.log 2>/dev/null; }
setsid "$SB" sweep "$TMP/one.yaml" --threads 1 --results "$TMP/sw" >"$TMP/sw.out" 2>&1 &
pid=$!
poll evaluated
sw_ckpt() { ls "$TMP"/sw/checkpoints/*.safetensors >/dev/null 2>&1; }
poll sw_ckpt
kill -9 -"$pid"
wait $pid 2>/dev/null
grep -q '^  progress: step 1/750 (32 samples): ' "$TMP"/sw/logs/*.log ||
  fail "the sweep worker's log has no progress lines: $(head -n 5 "$TMP"/sw/logs/*.log)"
[ "$(field "$TMP/sw/selectivbench.db" status)" = interrupted ] ||
  fail "sweep killed with -9: its run is '$(field "$TMP/sw/selectivbench.db" status)'"
"$SB" sweep "$TMP/one.yaml" --threads 1 --results "$TMP/sw" --quiet >"$TMP/sw2.out" 2>&1 ||
  fail "the sweep run again failed: $(cat "$TMP/sw2.out")"
[ "$(field "$TMP/sw/selectivbench.db" status)" = finished ] &&
  [ "$(field "$TMP/sw/selectivbench.db" attempts)" = 2 ] ||
  fail "sweep again: $(field "$TMP/sw/selectivbench.db" status), attempts $(field "$TMP/sw/selectivbench.db" attempts)"
grep -q 'resuming at update [1-9]' "$TMP"/sw/logs/*.log ||
  fail "sweep again: the run was not continued from its checkpoint"

# ---- sweep --dry_run: the axes and the cost ------------------------------------------------
# tiny/task2: feat_size x model x seed vary (2 x 5 x 2 = 20 runs of 2000 samples)
expect_ok sweep tiny/task2 --dry_run --threads 1
grep -v '^selectivbench train ' "$TMP/out" >"$TMP/summary"
grep -q '^axes: 3 of 12 parameters vary (20 runs selected of a grid of 20)$' "$TMP/summary" &&
  grep -q '^  feat_size  *2 values: 16, 32$' "$TMP/summary" &&
  grep -q '^  model  *5 values: transformer, mamba, gla, gated_delta_net, delta_net$' "$TMP/summary" &&
  grep -q '^  seed  *2 values: 1, 2$' "$TMP/summary" &&
  grep -q '^fixed: amb=6, amb_depth=6, d_state=16, layers=2, lr=0.003, ' "$TMP/summary" ||
  fail "sweep --dry_run axes: $(cat "$TMP/summary")"
grep -q '^cost (estimate): 20 runs x 2000 samples = 40k samples, [0-9.]*[kM] frames; [0-9.]*k to [0-9.]*k parameters per run; [0-9.]*[MGT] training FLOPs (3 x forward FLOPs per frame x frames)$' \
  "$TMP/summary" || fail "sweep --dry_run cost: $(cat "$TMP/summary")"
# the time is the plan's (cached calibrations, else FLOP rates): nothing timed, the same line
# from call to call
grep -q '^plan: 20 runs, [0-9.e+-]* core-hours, about .* on 1 worker of 1 thread, [0-9.e+-]* GiB at most per run (' "$TMP/summary" ||
  fail "sweep --dry_run time: $(cat "$TMP/summary")"
grep '^plan: ' "$TMP/summary" >"$TMP/plan1"
"$SB" sweep tiny/task2 --dry_run --threads 1 2>/dev/null | grep '^plan: ' >"$TMP/plan2"
cmp -s "$TMP/plan1" "$TMP/plan2" || fail "two dry runs: $(cat "$TMP/plan1" "$TMP/plan2")"
[ "$(tail -n 1 "$TMP/out")" = "20 runs" ] || fail "sweep --dry_run: last line $(tail -n 1 "$TMP/out")"
# a filter narrows the axes: model fixed to gla, 4 runs
expect_ok sweep tiny/task2 --dry_run --threads 1 --filter model=gla
grep -q '^axes: 2 of 12 parameters vary (4 runs selected of a grid of 20)$' "$TMP/out" &&
  grep -q '^fixed: .*model=gla' "$TMP/out" && ! grep -q '^  model ' "$TMP/out" &&
  grep -q '^cost (estimate): 4 runs x 2000 samples = 8k samples, ' "$TMP/out" ||
  fail "sweep --dry_run --filter model=gla: $(grep -v '^selectivbench' "$TMP/out")"
# one run: its parameters are the model's at the task's sizes (vocab 7: 7 inputs; 6 letters,
# all ambiguous with depth 6, and '#': 37 classes), as `models` counts them
expect_ok sweep tiny/task2 --dry_run --threads 1 --filter model=gla --filter feat_size=16 \
  --filter seed=1
got=$(sed -n 's/^cost (estimate): 1 runs x 2000 samples = 2k samples, .* frames; \([0-9.k]*\) parameters per run; .*/\1/p' "$TMP/out")
want=$("$SB" models --feat_size 16 --d_state 16 --inp 7 --classes 37 --layers 2 --json |
  grep -o '"model":"gla","params":[0-9]*' | sed 's/.*://' | awk '{printf "%.3gk", $1 / 1000}')
[ -n "$got" ] && [ "$got" = "$want" ] || fail "one gla run: $got parameters, models says $want"

echo "test_alive: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

#!/bin/sh
# test_sweep.sh - sweeps: the paper's files expand to W&B's run counts, bad files give one
# clear error line naming the line, a sweep runs and resumes, and a sweep killed with
# SIGKILL in the middle completes when run again, every run in the database exactly once,
# the database intact.
#
# usage: test_sweep.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

# ---- the paper's grids ----------------------------------------------------------------
for pair in task1_complexity:10584 task1_model_size:1512 task2:1512 task3:1344 task4:896; do
  name=${pair%%:*}
  want=${pair##*:}
  got=$("$SB" sweep "$SRC/configs/paper/$name.yaml" --dry_run | tail -n 1)
  [ "$got" = "$want runs" ] || fail "$name: '$got', expected '$want runs'"
done
n=$("$SB" sweep "$SRC/configs/paper/task4.yaml" --dry_run --filter model=gru --filter seed=1 |
  tail -n 1)
[ "$n" = "0 runs" ] || fail "filter on a model not in task4: $n"
n=$("$SB" sweep "$SRC/configs/paper/task4.yaml" --dry_run --filter model=mamba --shard 1/4 |
  tail -n 1)
[ "$n" = "32 runs" ] || fail "task4 mamba shard 1/4: $n (expected 32)"
# the learning check's `model: values: [all]` is the registry, in its order, two seeds each
registry=$("$SB" models | awk 'NR > 2 && NF == 0 {exit} NR > 2 {print $1}')
expanded=$("$SB" sweep "$SRC/configs/checks/learning.yaml" --dry_run | sed -n 's/.*--model=\([a-z0-9_]*\) --seed=1$/\1/p')
[ -n "$registry" ] && [ "$registry" = "$expanded" ] ||
  fail "learning.yaml's models [all] expand to '$expanded', the registry has '$registry'"

# ---- bad files --------------------------------------------------------------------------
printf 'method: grid\nparameters:\n  lr:\n    values: [1, 2\n' >"$TMP/broken.yaml"
"$SB" sweep "$TMP/broken.yaml" --dry_run 2>"$TMP/err" >/dev/null
rc=$?
[ $rc -eq 2 ] && grep -q "broken.yaml', line" "$TMP/err" || fail "malformed YAML: rc $rc, $(cat "$TMP/err")"
printf 'method: grid\nparameters:\n  lr:\n    values: [1]\nbogus: 3\n' >"$TMP/key.yaml"
"$SB" sweep "$TMP/key.yaml" --dry_run 2>"$TMP/err" >/dev/null
grep -q "line 5: unknown key 'bogus'" "$TMP/err" || fail "unknown key: $(cat "$TMP/err")"
printf 'method: random\nparameters:\n  lr:\n    values: [1]\n' >"$TMP/random.yaml"
"$SB" sweep "$TMP/random.yaml" --dry_run 2>"$TMP/err" >/dev/null
grep -q "only method: grid" "$TMP/err" || fail "method random: $(cat "$TMP/err")"
"$SB" sweep "$TMP/nosuch.yaml" 2>"$TMP/err" >/dev/null
[ $? -eq 1 ] && grep -q "cannot read sweep file" "$TMP/err" || fail "missing file: $(cat "$TMP/err")"
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --shard 3/2 --dry_run 2>"$TMP/err" >/dev/null
grep -q "shard" "$TMP/err" || fail "bad shard accepted"

# ---- a sweep runs, then resumes ---------------------------------------------------------
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --workers 2 --results "$TMP/r" --quiet >"$TMP/out" ||
  fail "tiny sweep failed: $(cat "$TMP/out")"
grep -q "4 trained" "$TMP/out" || fail "tiny sweep: $(cat "$TMP/out")"
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --results "$TMP/r" --quiet >"$TMP/out"
grep -q "0 trained, 0 failed, 4 already finished" "$TMP/out" || fail "resume: $(cat "$TMP/out")"
"$SB" results --db "$TMP/r/selectivbench.db" --json >"$TMP/runs.json"
[ "$(grep -o '"status":"finished"' "$TMP/runs.json" | wc -l)" -eq 4 ] || fail "results --json"

# ---- progress ---------------------------------------------------------------------------
# not on a terminal: a line per ended run, with its accuracy, and sweep lines
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --workers 2 --results "$TMP/p" >"$TMP/out" ||
  fail "tiny sweep with progress failed: $(cat "$TMP/out")"
[ "$(grep -c '^#[0-3] \[[0-9a-f]\{16\}\] .*: finished, test acc 0\.[0-9]\{4\}' "$TMP/out")" -eq 4 ] ||
  fail "a line per finished run: $(cat "$TMP/out")"
grep -q '^sweep: 4/4 runs (4 done, 0 failed' "$TMP/out" || fail "sweep line: $(cat "$TMP/out")"
# a worker's progress records: about twice a second, and always the last step
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --dry_run --limit 1 | head -n 1 | cut -d' ' -f3- \
  >"$TMP/args"
# shellcheck disable=SC2046
SELECTIVBENCH_PROGRESS_FD=7 "$SB" train $(cat "$TMP/args") --results "$TMP/w" --quiet \
  7>"$TMP/records" >/dev/null 2>&1 || fail "train with a progress pipe failed"
last=$(tail -n 1 "$TMP/records")
steps=$(echo "$last" | cut -d' ' -f2)
total=$(echo "$last" | cut -d' ' -f3)
case "$last" in
P\ *) [ "$steps" = "$total" ] && [ "$total" -gt 0 ] || fail "last progress record: '$last'" ;;
*) fail "no progress record: '$(cat "$TMP/records")'" ;;
esac
[ "$(echo "$last" | wc -w)" -eq 8 ] || fail "progress record fields: '$last'"

# configs/paper holds the reference's five sweep files unchanged (SHA-256 of
# ../shared/reference/wb_configs/*.yaml as shipped with the task)
while read -r sum name; do
  got=$(sha256sum "$SRC/configs/paper/$name" | cut -d' ' -f1)
  [ "$got" = "$sum" ] || fail "configs/paper/$name differs from the reference's file"
done <<'SUMS'
f9176696c84c07ff608d36f1660a6be03554c51e1f7d1729516892acefc203a1 task1_complexity.yaml
05bd857bea12a9d557be79226a1af719e55879c4b4345b12cc088cb8427b16f7 task1_model_size.yaml
cedbe4fe0bc0ee413b5c0a87a5619ceda84e5c195fb00cab3ad5c3287864d31d task2.yaml
3524cee38a9500c4d30dd1bf3bde1b3dd47f84f97743d01ebf2ff15dd9f1671a task3.yaml
e63bdc103cf5b1b1c6e8cce9c61d2079e0a0acca8c2a26cde79346823dffd153 task4.yaml
SUMS

# `{value: x}` fixes a parameter; --limit keeps the first N runs
sed -e 's/^  lr:$/  lr:\n    value: 0.005\n  lr_unused:/' "$SRC/tests/data/sweeps/tiny.yaml" |
  sed -e '/^  lr_unused:$/,+1d' >"$TMP/value.yaml"
"$SB" sweep "$TMP/value.yaml" --dry_run >"$TMP/out" 2>&1 || fail "value.yaml: $(cat "$TMP/out")"
[ "$(tail -n 1 "$TMP/out")" = "4 runs" ] || fail "value.yaml: $(tail -n 1 "$TMP/out")"
[ "$(grep -c -- '--lr=0.005' "$TMP/out")" -eq 4 ] || fail "{value: x} not passed to every run"
n=$("$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --dry_run --limit 3 | tail -n 1)
[ "$n" = "3 runs" ] || fail "--limit 3: '$n'"

# ---- a failed run is recorded with its reason and the sweep goes on ----------------------
# test_pretrained True comes first in the grid and has no checkpoint to evaluate
sed -e 's/values: \[transformer, gru\]/values: [gru]/' -e 's/values: \[1, 2\]/values: [1]/' \
  -e 's/^  lr:$/  test_pretrained:\n    values: [True, False]\n  lr:/' \
  "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/fail.yaml"
"$SB" sweep "$TMP/fail.yaml" --workers 1 --results "$TMP/f" --db "$TMP/f.db" --quiet >"$TMP/out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "1 trained, 1 failed" "$TMP/out" ||
  fail "sweep with a failing run: rc $rc, $(cat "$TMP/out")"
[ -f "$TMP/f.db" ] && [ ! -f "$TMP/f/selectivbench.db" ] || fail "sweep --db: the database is not where asked"
"$SB" results --db "$TMP/f.db" --json >"$TMP/f.json"
grep -q '"status":"failed"' "$TMP/f.json" && grep -q '"status":"finished"' "$TMP/f.json" ||
  fail "failed and finished runs not both recorded: $(cat "$TMP/f.json")"
grep -q '"reason":"no checkpoint at' "$TMP/f.json" || fail "the failed run has no reason recorded"

# on a terminal: a live line per running run (step, loss, accuracy, tokens/s) under the
# sweep line, redrawn in place (cursor-up + clear), and the per-run end lines
if command -v script >/dev/null 2>&1; then
  script -qec "$SB sweep $SRC/tests/data/sweeps/tiny.yaml --workers 2 --results $TMP/tty" \
    /dev/null >"$TMP/tty.out" 2>&1 || fail "sweep in a pseudo-terminal failed"
  tr '\r' '\n' <"$TMP/tty.out" >"$TMP/tty.txt"
  grep -E -q '^  #[0-3] .*: step [0-9]+/[0-9]+ loss [0-9.]+ acc [0-9.]+ [0-9.]+k? tok/s' \
    "$TMP/tty.txt" || fail "sweep on a terminal: no live run line: $(head -c 400 "$TMP/tty.txt")"
  grep -q "$(printf '\033')\[[0-9]A" "$TMP/tty.out" || fail "sweep on a terminal: block not redrawn"
  grep -c '^sweep: [0-4]/4 runs' "$TMP/tty.txt" | grep -q -v '^0$' || fail "no sweep line on a terminal"
fi

# ---- kill -9 in the middle ----------------------------------------------------------------
sed -e 's/- 640$/- 40000/' -e 's/values: \[1, 2\]/values: [1, 2, 3]/' \
  "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/slow.yaml"
"$SB" sweep "$TMP/slow.yaml" --workers 2 --results "$TMP/k" --quiet >/dev/null 2>&1 &
pid=$!
# wait until one run has finished and another is running, then kill the sweep
i=0
while [ $i -lt 600 ]; do
  sleep 0.1
  i=$((i + 1))
  [ -f "$TMP/k/selectivbench.db" ] || continue
  "$SB" results --db "$TMP/k/selectivbench.db" --json >"$TMP/k.json" 2>/dev/null || continue
  nf=$(grep -o '"status":"finished"' "$TMP/k.json" | wc -l)
  nr=$(grep -o '"status":"running"' "$TMP/k.json" | wc -l)
  [ "$nf" -ge 1 ] && [ "$nr" -ge 1 ] && break
done
kill -9 $pid
wait $pid 2>/dev/null
sleep 0.3
left=$(pgrep -f "selectivbench train.*$TMP/k" | wc -l)
[ "$left" -eq 0 ] || fail "$left training processes survived the killed sweep"
"$SB" sweep "$TMP/slow.yaml" --workers 2 --results "$TMP/k" --quiet >"$TMP/out" ||
  fail "the resumed sweep failed: $(cat "$TMP/out")"
"$SB" results --db "$TMP/k/selectivbench.db" --json >"$TMP/k.json"
nf=$(grep -o '"status":"finished"' "$TMP/k.json" | wc -l)
nh=$(grep -o '"hash":"[0-9a-f]*"' "$TMP/k.json" | sort -u | wc -l)
[ "$nf" -eq 6 ] && [ "$nh" -eq 6 ] || fail "after the resume: $nf finished runs, $nh distinct (want 6, 6)"
"$SB" results --db "$TMP/k/selectivbench.db" --status running | grep -q "0 of" ||
  fail "runs left running after the resume"

"$SB" results --db "$TMP/k/selectivbench.db" --check | grep -q ": ok$" ||
  fail "integrity check of the database after kill -9"

echo "sweep checks done, $failures failures"
[ "$failures" -eq 0 ]

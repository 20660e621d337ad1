#!/bin/sh
# test_sweep.sh - sweeps: the paper's files expand to W&B's run counts, bad files give one
# clear error line naming the line (a key given twice at any level), grids of 10^9 and
# 10^18 runs are counted and refused by the cap (also under ulimit -v) or listed lazily with
# --limit/--filter/--shard, a grid over INT64_MAX is an error, the dry run refuses exactly the
# runs the sweep refuses (same reason, exit 1), results' filters refuse unknown values, a
# sweep runs and resumes, and a sweep killed with SIGKILL in the middle completes when run
# again, every run in the database exactly once, the database intact; every file under
# configs/ expands, and the study's files state their cost and command.
#
# usage: test_sweep.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

# ---- the paper's grids ----------------------------------------------------------------
# (the transformer runs at width 960 that train.py skips are excluded: the dry run lists them
# and says how many, and exits 0 as they are not an error of the sweep)
for row in task1_complexity:10584:168 task1_model_size:1512:24 task2:1512:24 task3:1344:24 \
  task4:896:0; do
  name=${row%%:*}
  want=${row#*:}
  refused=${want#*:}
  want=${want%%:*}
  "$SB" sweep "$SRC/configs/paper/$name.yaml" --dry_run >"$TMP/out" 2>"$TMP/err"
  rc=$?
  got=$(tail -n 1 "$TMP/out")
  if [ "$refused" -eq 0 ]; then
    [ "$got" = "$want runs" ] && [ ! -s "$TMP/err" ] || fail "$name: '$got', expected '$want runs'"
  else
    [ "$rc" -eq 0 ] && [ ! -s "$TMP/err" ] &&
      [ "$got" = "$want runs, $refused excluded (the reference does not run them either)" ] &&
      [ "$(grep -c '^run [0-9]* excluded: --feat_size 960 with the transformer: train.py skips this run' "$TMP/out")" = "$refused" ] ||
      fail "$name: rc $rc '$got' $(cat "$TMP/err"), expected '$want runs, $refused excluded ...'"
  fi
done
# a filter narrows a parameter to values it takes: another value is an error listing them
expect_error 2 "model takes transformer, mamba2, mamba" sweep "$SRC/configs/paper/task4.yaml" \
  --dry_run --filter model=gru --filter seed=1
expect_error 2 "one of the parameters of sweep file" sweep "$SRC/configs/paper/task4.yaml" \
  --dry_run --filter modl=gru
n=$("$SB" sweep "$SRC/configs/paper/task4.yaml" --dry_run --filter model=mamba --shard 1/4 |
  tail -n 1)
[ "$n" = "32 runs" ] || fail "task4 mamba shard 1/4: $n (expected 32)"
# the shards of a filtered selection are disjoint and cover it, in grid order
"$SB" sweep "$SRC/configs/paper/task4.yaml" --dry_run --list --filter model=mamba |
  grep "^$SB train " >"$TMP/whole"
: >"$TMP/shards"
for i in 0 1 2; do
  "$SB" sweep "$SRC/configs/paper/task4.yaml" --dry_run --list --filter model=mamba --shard $i/3 |
    grep "^$SB train " | awk -v i=$i '{print NR * 3 - 3 + i, $0}' >>"$TMP/shards"
done
sort -n "$TMP/shards" | cut -d' ' -f2- >"$TMP/merged"
[ "$(wc -l <"$TMP/whole")" -eq 128 ] && cmp -s "$TMP/whole" "$TMP/merged" ||
  fail "task4 mamba: shards 0..2 of 3 do not interleave back into the 128 filtered runs"
# the learning check's `model: values: [all]` is the registry, in its order, two seeds each
registry=$("$SB" models | awk 'NR > 2 && NF == 0 {exit} NR > 2 {print $1}')
expanded=$("$SB" sweep "$SRC/configs/checks/learning.yaml" --dry_run --list | sed -n 's/.*--model=\([a-z0-9_]*\) --precision=fp32 --seed=1$/\1/p')
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

# a key given twice in one mapping, at any level, is an error naming the file and the line
printf 'method: grid\nparameters:\n  lr:\n    values: [1]\nmethod: grid\n' >"$TMP/dup1.yaml"
printf 'method: grid\nparameters:\n  lr:\n    values: [1]\n  seed:\n    values: [1]\n  lr:\n    values: [2]\n' >"$TMP/dup2.yaml"
printf 'method: grid\nparameters:\n  lr:\n    values: [1]\n    values: [2]\n' >"$TMP/dup3.yaml"
expect_error 2 "dup1.yaml', line 5: key 'method' is given twice in one mapping (first on line 1)" \
  sweep "$TMP/dup1.yaml" --dry_run
expect_error 2 "dup2.yaml', line 7: key 'lr' is given twice in one mapping (first on line 3)" \
  sweep "$TMP/dup2.yaml" --dry_run
expect_error 2 "dup3.yaml', line 5: key 'values' is given twice in one mapping (first on line 4)" \
  sweep "$TMP/dup3.yaml"

# ---- grids are counted, never listed ------------------------------------------------------
# big.yaml N: 10^N runs (N parameters of 10 values each) around tiny.yaml's quick run
big_grid() {
  printf 'method: grid\nparameters:\n'
  i=0
  for p in seed gpu_device pt_epochs n_head dt_rank patience task_seed rope_base test_bs \
    dropout wd warmup_steps test_seqlen_min train_seqlen_min grad_acc epoch_size amb_depth \
    d_state test_size; do
    [ $i -lt "$1" ] || break
    case $p in
    rope_base) v='[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]' ;;
    test_bs | test_size) v='[40, 50, 60, 70, 80, 90, 100, 110, 120, 130]' ;;
    dropout | wd) v='[0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09]' ;;
    gpu_device | warmup_steps) v='[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]' ;;
    *) v='[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]' ;;
    esac
    printf '  %s:\n    values: %s\n' $p "$v"
    i=$((i + 1))
  done
  printf 'command:\n'
  for w in --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 20 --test_seqlen_max 20 \
    --dataset_size 640 --test_size 40 --batch_size 32 --layers 1 --model gru --feat_size 16 \
    --lr 0.002; do
    printf '  - "%s"\n' "$w"
  done
  printf '  - ${args}\n'
}
big_grid 9 >"$TMP/big9.yaml"
big_grid 18 >"$TMP/big18.yaml"
big_grid 19 >"$TMP/big19.yaml"
cap="select fewer with --limit, --shard or --filter"
expect_error 2 "1000000000 runs selected of a grid of 1000000000, more than the 10000000 one sweep takes; $cap" \
  sweep "$TMP/big9.yaml" --dry_run
expect_error 2 "333333334 runs selected of a grid of 1000000000" sweep "$TMP/big9.yaml" --dry_run \
  --shard 0/3
expect_error 2 "1000000000000000000 runs selected of a grid of 1000000000000000000" \
  sweep "$TMP/big18.yaml" --dry_run
expect_error 2 "1000000000000000000 runs selected of a grid of 1000000000000000000" \
  sweep "$TMP/big18.yaml" --results "$TMP/big" --quiet
expect_error 2 "big19.yaml': its grid has more than 9223372036854775807 runs" \
  sweep "$TMP/big19.yaml" --dry_run
# the same under a 600 MB address-space limit: refused, never an empty grid (not in the
# sanitizer build: ASan reserves terabytes of address space and cannot start under ulimit -v)
before=$failures
if [ "${SB_SANITIZED:-0}" = 1 ]; then
  echo "skipped under ASan: the grid checks under ulimit -v"
else
  (
    ulimit -v 600000
    expect_error 2 "1000000000 runs selected of a grid of 1000000000" sweep "$TMP/big9.yaml" \
      --dry_run
    expect_error 2 "1000000000 runs selected of a grid of 1000000000" sweep "$TMP/big9.yaml" \
      --results "$TMP/big" --quiet
    expect_error 2 "1000000000000000000 runs selected" sweep "$TMP/big18.yaml" --dry_run
    expect_ok sweep "$TMP/big9.yaml" --dry_run --limit 2
    [ "$(grep -c "^$SB train " "$TMP/out")" -eq 2 ] &&
      [ "$(tail -n 1 "$TMP/out")" = "2 runs" ] ||
      fail "big9 --dry_run --limit 2 under ulimit -v: $(cat "$TMP/out")"
    [ "$failures" -eq "$before" ] # the subshell's failures reach the parent through its status
  ) || fail "the grid checks under ulimit -v 600000"
fi
# --limit, and filters and a shard on a 10^18 grid, listed at once
expect_ok sweep "$TMP/big9.yaml" --dry_run --limit 2
[ "$(tail -n 1 "$TMP/out")" = "2 runs" ] && grep -q -- '--test_bs=40$' "$TMP/out" &&
  grep -q -- '--test_bs=50$' "$TMP/out" || fail "big9 --dry_run --limit 2: $(cat "$TMP/out")"
expect_ok sweep "$TMP/big18.yaml" --dry_run --filter seed=3 --filter wd=0.05 --shard 5/1000000000 \
  --limit 3
[ "$(tail -n 1 "$TMP/out")" = "3 runs" ] &&
  [ "$(grep -c -- '--seed=3 .*--wd=0.05$' "$TMP/out")" -eq 3 ] ||
  fail "big18 filters + shard + limit: $(cat "$TMP/out")"
# a real sweep of the 10^9 grid with --limit 1 runs exactly one run
"$SB" sweep "$TMP/big9.yaml" --limit 1 --results "$TMP/big" --quiet >"$TMP/out" 2>&1 ||
  fail "big9 --limit 1: $(cat "$TMP/out")"
grep -q "^sweep .*big9.yaml: 1 runs selected of 1000000000: 1 trained, 0 failed" "$TMP/out" ||
  fail "big9 --limit 1: $(cat "$TMP/out")"
"$SB" results --db "$TMP/big/selectivbench.db" | tail -n 1 | grep -q '^1 of 1 runs$' ||
  fail "big9 --limit 1: the database does not hold exactly one run"

# ---- one check for the dry run and the sweep ------------------------------------------------
# every selected run is checked as the sweep checks it: a value the key refuses (lr abc, -1,
# NaN) and a model the registry does not have are refused with the same reason in both; the
# dry run prints each refused run, "N runs, M refused" and exits 1 with the first reason
for bad in 'abc:is not a finite number' '-1:--lr -1 is out of range' \
  '.nan:is not a finite number' 'bogus_model:unknown --model'; do
  value=${bad%%:*}
  says=${bad#*:}
  # runs 0 and 1 are good, runs 2 and 3 (the second value) refused
  if [ "$value" = bogus_model ]; then
    sed -e 's/values: \[transformer, gru\]/values: [gru, bogus]/' \
      "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/bad.yaml"
  else
    sed -e "s/values: \[0.002\]/values: [0.002, $value]/" \
      -e 's/values: \[transformer, gru\]/values: [gru]/' \
      "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/bad.yaml"
  fi
  expect_error 1 "2 of 4 runs refused; the first, run 2: .*$says" sweep "$TMP/bad.yaml" --dry_run
  cp "$TMP/err" "$TMP/dry_err"
  [ "$(tail -n 1 "$TMP/out")" = "4 runs, 2 refused" ] &&
    [ "$(grep -c "^$SB train " "$TMP/out")" -eq 2 ] &&
    [ "$(grep -c "^run [23] refused: .*$says" "$TMP/out")" -eq 2 ] ||
    fail "dry run of lr/model '$value': $(cat "$TMP/out")"
  expect_error 1 "2 of 4 runs refused" sweep "$TMP/bad.yaml" --hashes
  [ "$(grep -c "^[23] [0-9a-f]\{16\} [0-9a-f]\{16\} refused: .*$says\|^[23] refused: .*$says" \
    "$TMP/out")" -eq 2 ] || fail "--hashes of lr/model '$value': $(cat "$TMP/out")"
  rm -rf "$TMP/bad"
  "$SB" sweep "$TMP/bad.yaml" --results "$TMP/bad" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ $rc -eq 1 ] && cmp -s "$TMP/err" "$TMP/dry_err" ||
    fail "sweep of lr/model '$value': rc $rc, '$(cat "$TMP/err")' is not the dry run's '$(cat "$TMP/dry_err")'"
  grep -q "4 runs selected of 4: 2 trained, 0 failed, 0 already finished, 2 refused" "$TMP/out" &&
    [ "$(grep -c "^#[23] refused: .*$says" "$TMP/out")" -eq 2 ] ||
    fail "sweep of lr/model '$value': $(cat "$TMP/out")"
done
# a sweep in which every run is refused exits 1, quiet or not
sed -e 's/values: \[0.002\]/values: [abc]/' "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/allbad.yaml"
expect_error 1 "4 of 4 runs refused; the first, run 0: --lr: 'abc' is not a finite number" \
  sweep "$TMP/allbad.yaml" --results "$TMP/allbad" --quiet
expect_error 1 "4 of 4 runs refused" sweep "$TMP/allbad.yaml" --dry_run
# a run the reference does not run either (the transformer at width 960) is excluded, in the
# dry run and the sweep alike, and is not an error: exit 0; `train` refuses it (exit 2)
sed -e 's/values: \[transformer, gru\]/values: [transformer]/' \
  -e 's/values: \[16\]/values: [16, 960]/' "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/excl.yaml"
"$SB" sweep "$TMP/excl.yaml" --dry_run >"$TMP/out" 2>"$TMP/err" &&
  [ "$(tail -n 1 "$TMP/out")" = "4 runs, 2 excluded (the reference does not run them either)" ] &&
  [ "$(grep -c '^run [0-9] excluded: --feat_size 960 with the transformer' "$TMP/out")" -eq 2 ] &&
  [ ! -s "$TMP/err" ] || fail "dry run with excluded runs: $(cat "$TMP/out" "$TMP/err")"
"$SB" sweep "$TMP/excl.yaml" --results "$TMP/excl" >"$TMP/out" 2>"$TMP/err" &&
  grep -q "4 runs selected of 4: 2 trained, 0 failed, 0 already finished, 0 refused, 2 excluded" \
    "$TMP/out" && [ "$(grep -c '^#[0-9] excluded: --feat_size 960' "$TMP/out")" -eq 2 ] ||
  fail "sweep with excluded runs: $(cat "$TMP/out" "$TMP/err")"
expect_error 2 "feat_size 960 with the transformer: train.py skips this run" train \
  --model transformer --feat_size 960 --only_createset
# an unknown parameter is refused before any run, alike
sed -e 's/^  lr:$/  bogus:/' "$SRC/tests/data/sweeps/tiny.yaml" >"$TMP/unknown.yaml"
expect_error 2 "parameter 'bogus' is not a train flag" sweep "$TMP/unknown.yaml" --dry_run
cp "$TMP/err" "$TMP/dry_err"
expect_error 2 "parameter 'bogus' is not a train flag" sweep "$TMP/unknown.yaml" --results "$TMP/u"
cmp -s "$TMP/err" "$TMP/dry_err" || fail "unknown parameter: the sweep and the dry run differ"

# ---- a sweep runs, then resumes ---------------------------------------------------------
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --workers 2 --results "$TMP/r" --quiet >"$TMP/out" ||
  fail "tiny sweep failed: $(cat "$TMP/out")"
grep -q "4 trained" "$TMP/out" || fail "tiny sweep: $(cat "$TMP/out")"
"$SB" sweep "$SRC/tests/data/sweeps/tiny.yaml" --results "$TMP/r" --quiet >"$TMP/out"
grep -q "0 trained, 0 failed, 4 already finished" "$TMP/out" || fail "resume: $(cat "$TMP/out")"
"$SB" results --db "$TMP/r/selectivbench.db" --json >"$TMP/runs.json"
[ "$(grep -o '"status":"finished"' "$TMP/runs.json" | wc -l)" -eq 4 ] || fail "results --json"
# results' filters take closed sets: an unknown status, model, key or value is a usage error
db="$TMP/r/selectivbench.db"
expect_error 2 "--status: 'bogus' is not one of: running, finished, failed, diverged" results \
  --db "$db" --status bogus
expect_error 2 "--model: 'bogus' is not one of: transformer, gru" results --db "$db" --model bogus
expect_error 2 "--filter 'protocol=bogus': --protocol: 'bogus' is not one of: reference, clean" \
  results --db "$db" --filter protocol=bogus
expect_error 2 "--filter 'nokey=1': 'nokey' is not a configuration key" results --db "$db" \
  --filter nokey=1
expect_error 2 "--filter 'model=bogus': unknown model 'bogus'" results --db "$db" \
  --filter model=bogus
expect_error 2 "--filter 'seed=x'" results --db "$db" --filter seed=x
expect_ok results --db "$db" --status finished --model gru --filter seed=2 --filter protocol=reference
[ "$(tail -n 1 "$TMP/out")" = "1 of 2 runs" ] || fail "results filters: $(cat "$TMP/out")"
expect_ok results --db "$db" --status failed
[ "$(tail -n 1 "$TMP/out")" = "0 of 4 runs" ] || fail "results --status failed: $(cat "$TMP/out")"

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

# ---- every shipped sweep file ----------------------------------------------------------
# each file under configs/ expands with no error; the study's files (claims, scale) say in
# their header comment what they cost and the command that runs them
for f in "$SRC"/configs/*/*.yaml; do
  "$SB" sweep "$f" --dry_run >"$TMP/out" 2>"$TMP/err" ||
    fail "$f: the dry run failed: $(head -n 1 "$TMP/err")"
  tail -n 1 "$TMP/out" | grep -q '^[1-9][0-9]* runs' || fail "$f: no runs: $(tail -n 1 "$TMP/out")"
done
for f in "$SRC"/configs/claims/*.yaml "$SRC"/configs/scale/*.yaml; do
  sed -n '/^[^#]/q;p' "$f" >"$TMP/header"
  grep -q '^# Cost' "$TMP/header" && grep -q 'selectivbench sweep configs/' "$TMP/header" ||
    fail "$f: its header comment lacks the cost or the command"
done

echo "sweep checks done, $failures failures"
[ "$failures" -eq 0 ]

#!/bin/sh
# test_documented.sh - commands as the docs write them (issue 38, item 5): results, report and
# --slurm folders are created with their parents (docs/cluster.md's `--results shards/$i`);
# `report --results DIR` reads DIR's database, as the generated sweep.sbatch header says;
# `sweep --dry_run` prints at most 20 command lines before its summary (`--list`: all);
# `results --run` prints each flag as it reads back (--lr 0.003); the top-level help
# describes the demo that runs.
#
# usage: test_documented.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

tiny="--model gru --vocab 7 --amb 6 --amb_depth 6 --train_seqlen_max 20 --test_seqlen_max 20 \
  --dataset_size 64 --test_size 8 --batch_size 16 --feat_size 16 --layers 1 --lr 0.003"

# ---- folders with their parents ------------------------------------------------------------
expect_ok train $tiny --results "$TMP/a/b/c" --quiet
[ -s "$TMP/a/b/c/selectivbench.db" ] || fail "train --results a/b/c: no database"
expect_ok sweep tiny/task2 --filter model=gla --limit 1 --threads 1 --quiet --results "$TMP/shards/0"
[ -s "$TMP/shards/0/selectivbench.db" ] || fail "sweep --results shards/0: no database"
expect_ok sweep tiny/task2 --slurm "$TMP/slurm/task2" --filter model=gla
[ -s "$TMP/slurm/task2/sweep.sbatch" ] || fail "sweep --slurm slurm/task2: no script"
expect_ok report "$TMP/a/b/c" --out "$TMP/r/s/t"
[ -s "$TMP/r/s/t/report.md" ] || fail "report --out r/s/t: no report.md"
printf 'x' >"$TMP/file"
expect_error 1 "exists and is not a folder" train $tiny --results "$TMP/file/sub"

# ---- report --results, as the sbatch header prints it ---------------------------------------
expect_ok report --results "$TMP/a/b/c" --claims
grep -q "^- gating" "$TMP/out" || fail "report --results DIR --claims: $(head -n 3 "$TMP/out")"
line=$(grep -o 'report --results [^ ]*' "$TMP/slurm/task2/sweep.sbatch" | head -n 1)
[ -n "$line" ] || fail "sweep.sbatch: no 'report --results' line"

# ---- the dry run: 20 command lines, then the summary; --list: every one ----------------------
"$SB" sweep "$(dirname "$0")/../../configs/lite/task2.yaml" --dry_run >"$TMP/dry" 2>&1 || fail "dry run: $(tail -n 2 "$TMP/dry")"
[ "$(grep -c '^[^ ]* train --' "$TMP/dry")" -eq 20 ] || fail "dry run: not 20 command lines"
grep -q '^\.\.\. the train flags of [0-9]* more runs (--list prints every one)$' "$TMP/dry" ||
  fail "dry run: no '... more runs' line"
n=$(tail -n 1 "$TMP/dry" | sed 's/ runs.*//')
"$SB" sweep "$(dirname "$0")/../../configs/lite/task2.yaml" --dry_run --list >"$TMP/dry_all" 2>&1
[ "$(grep -c '^[^ ]* train --' "$TMP/dry_all")" -eq "$n" ] || fail "dry run --list: not $n command lines"

# ---- results --run: flags as they read back -------------------------------------------------
run=$("$SB" results --db "$TMP/a/b/c" --json | grep -o '"hash":"[0-9a-f]*"' | head -n 1 | cut -d'"' -f4)
expect_ok results --db "$TMP/a/b/c" --run "$run"
grep -q -- '--lr 0.003 ' "$TMP/out" || fail "results --run: $(grep -- '--lr' "$TMP/out")"

# ---- the top-level help describes the demo ---------------------------------------------------
"$SB" --help >"$TMP/help" 2>&1
grep -q "sweeps of five models" "$TMP/help" || fail "help: $(grep demo "$TMP/help")"

echo "test_documented: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

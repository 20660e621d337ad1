#!/bin/sh
# test_walks.sh - interleaved walks (--walk_len, issue 37) through everything a task has:
# `data --show` marks each element's walk and `--json --batch` is vocab + walks wide;
# `ceiling --lengths` prints the memory-demand table of docs/reading-results.md exactly;
# a tiny `train` records the run with its ceiling and effective memory; `eval` and `probe`
# read its checkpoint; a sweep file over walk_len is counted, planned, filtered and trained,
# and `report --x walk_len` and `--x memory_demand` draw it; bad settings give one error line.
#
# usage: test_walks.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

task="--vocab 7 --amb 6 --amb_depth 6 --train_seqlen_max 24 --test_seqlen_max 24 --walk_len 8"

# ---- data: the walk of each element, the tags in the width --------------------------------
expect_ok data $task --dataset_size 20 --test_size 4 --show 1
grep -q "interleaved walks: one per 8 elements (train 3, test 3 walks a sample)" "$TMP/out" ||
  fail "data --show: no walks line: $(head -n 5 "$TMP/out")"
[ "$(grep -o '[A-Z#][0-9]*@[0-2]' "$TMP/out" | wc -l)" -eq 24 ] ||
  fail "data --show: not 24 elements marked with a walk: $(cat "$TMP/out")"
expect_ok data $task --dataset_size 20 --test_size 4 --samples 0,1 --json --batch
grep -q '"shape":\[2,48,24,10\]' "$TMP/out" ||
  fail "data --json --batch: want width 7 letters + 3 walks: $(head -c 300 "$TMP/out")"

# ---- ceiling: the demand table of docs/reading-results.md --------------------------------
expect_ok ceiling --vocab 13 --amb 12 --amb_depth 12 --walk_len 25 --dataset_size 1000 \
  --test_size 200 --lengths 25,50,100,200,400,800
grep -E '^ +[0-9]+ +[0-9]+ +[01]\.[0-9]{4} ' "$TMP/out" >"$TMP/rows"
grep -E '^ +[0-9]+ +[0-9]+ +[01]\.[0-9]{4} ' "$(dirname "$0")/../../docs/reading-results.md" >"$TMP/doc_rows"
[ "$(wc -l <"$TMP/rows")" -eq 6 ] && cmp -s "$TMP/rows" "$TMP/doc_rows" ||
  fail "ceiling --lengths differs from docs/reading-results.md: $(cat "$TMP/rows") / $(cat "$TMP/doc_rows")"
expect_ok ceiling $task --dataset_size 40 --test_size 8 --json
grep -q '"window_acc":{"0":[^}]*"32":[^}]*}' "$TMP/out" ||
  fail "ceiling --json: windows up to 32: $(cat "$TMP/out")"
expect_ok ceiling $task --dataset_size 40 --test_size 8
grep -q "^memory demand: [0-9.]* elements" "$TMP/out" ||
  fail "ceiling: no memory demand line: $(tail -n 5 "$TMP/out")"

# ---- train, results, eval, probe ----------------------------------------------------------
small="$task --dataset_size 96 --test_size 12 --batch_size 16 --test_bs 6 --feat_size 16 \
  --layers 1 --epoch_size 48"
"$SB" train --model gru $small --results "$TMP/t" --quiet >"$TMP/train" 2>&1 ||
  fail "train: $(cat "$TMP/train")"
"$SB" results --db "$TMP/t/selectivbench.db" --json >"$TMP/runs.json" ||
  fail "results --json"
grep -q '"walk_len":8' "$TMP/runs.json" || fail "results: the run's config lacks walk_len"
grep -E -q '"ceiling":[01][.0-9e-]*' "$TMP/runs.json" &&
  grep -E -q '"effective_memory":([0-9][.0-9e+-]*|">32")' "$TMP/runs.json" ||
  fail "results: no ceiling or effective memory: $(cat "$TMP/runs.json")"
ckpt=$(find "$TMP/t" -name '*.safetensors' ! -name '*.optim.*' | head -n 1)
[ -n "$ckpt" ] || fail "train left no checkpoint: $(find "$TMP/t")"
if [ -n "$ckpt" ]; then
  expect_ok eval "$ckpt" --test_size 12 --quiet
  expect_ok probe "$ckpt" --out "$TMP/probe" --samples 8 --probe_samples 32
  [ -s "$TMP/probe/probe.json" ] || fail "probe wrote no probe.json: $(ls "$TMP/probe")"
fi

# ---- a sweep over walk_len: counted, planned, filtered, trained, drawn ---------------------
cat >"$TMP/walks.yaml" <<'YAML'
program: train.py
method: grid
parameters:
  model:
    values: [gru]
  walk_len:
    values: [6, 24]
  seed:
    values: [1, 2]
command:
  - ${env}
  - python
  - ${program}
  - "--vocab"
  - 7
  - "--amb"
  - 6
  - "--amb_depth"
  - 6
  - "--train_seqlen_max"
  - 24
  - "--test_seqlen_max"
  - 24
  - "--dataset_size"
  - 64
  - "--test_size"
  - 8
  - "--batch_size"
  - 16
  - "--feat_size"
  - 16
  - "--layers"
  - 1
  - ${args}
YAML
[ "$("$SB" sweep "$TMP/walks.yaml" --dry_run | tail -n 1)" = "4 runs" ] ||
  fail "sweep --dry_run: not 4 runs"
expect_ok plan "$TMP/walks.yaml" --threads 1 --calibration_seconds 0.1
grep -q '^total: ' "$TMP/out" || fail "plan: no total: $(cat "$TMP/out")"
expect_ok sweep "$TMP/walks.yaml" --results "$TMP/sw" --threads 1 --quiet
[ "$("$SB" results --db "$TMP/sw/selectivbench.db" --filter walk_len=6 --json |
  grep -o '"status":"finished"' | wc -l)" -eq 2 ] || fail "results --filter walk_len=6: not 2 runs"
expect_ok report --db "$TMP/sw/selectivbench.db" --x walk_len --out "$TMP/rep"
ls "$TMP"/rep/*.png >/dev/null 2>&1 || fail "report --x walk_len drew nothing: $(cat "$TMP/out")"
# the derived axis: each run against its task's memory demand (walk_len 6: 4 walks, 24: 1)
expect_ok report --db "$TMP/sw/selectivbench.db" --x memory_demand --out "$TMP/rep2"
ls "$TMP"/rep2/*memory_demand*.png >/dev/null 2>&1 ||
  fail "report --x memory_demand drew nothing: $(cat "$TMP/out"; ls "$TMP/rep2")"
grep -q "memory_demand" "$TMP/rep2/report.md" || fail "report.md: no memory_demand table"
expect_error 2 "nor memory_demand" report --db "$TMP/sw/selectivbench.db" --x nope

# ---- bad settings: one error line each -----------------------------------------------------
expect_error 2 "--walk_len with --grammar_gap True" train $task --grammar_gap True
expect_error 2 "more than 64" data --train_seqlen_max 200 --test_seqlen_max 200 --walk_len 1
expect_error 2 "walk_len" train --walk_len -3
expect_error 2 "--lengths" ceiling $task --lengths 25,x
expect_error 2 "--export with --walk_len" data $task --dataset_size 20 --test_size 4 \
  --export "$TMP/export"

echo "test_walks: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

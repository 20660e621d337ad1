#!/bin/sh
# test_ids.sh - one id per run: `train` prints it first and last, `results` shows it with
# the run's checkpoint path, and `eval` and `probe` take it (in full or a unique prefix,
# from any folder with --results) with the same numbers as the checkpoint file itself; a
# sweep's run lines name the parameters it varies, so two different runs never read the
# same.
#
# usage: test_ids.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

tiny="--model gru --feat_size 8 --layers 1 --dataset_size 64 --test_size 16 \
--train_seqlen_max 8 --test_seqlen_max 8 --amb 3 --grammar_scale True --epoch_size 32"

# train: the run id on the first and on the last line of the run
cd "$TMP" || exit 1
expect_ok train $tiny
id=$(sed -n '1s/^run \([0-9a-f]*\): .*/\1/p' "$TMP/out")
[ ${#id} -eq 16 ] || fail "train: no run id on its first line: $(head -n 1 "$TMP/out")"
grep -q "^run $id finished: test acc" "$TMP/out" || fail "train: the last lines lack run $id: $(cat "$TMP/out")"
ckpt=$(sed -n 's/^checkpoint: //p' "$TMP/out")
[ -s "$ckpt" ] || fail "train: no checkpoint file '$ckpt'"
# the run hash is that id (the checkpoint's name is the training hash, not an id to use)
[ "$("$SB" train $tiny --print_hashes | cut -d' ' -f1)" = "$id" ] || fail "--print_hashes: not $id"

# results: the id in the run column, and the checkpoint in --json, --csv and --run
expect_ok results
sed -n 2p "$TMP/out" | grep -q "^$id " || fail "results: no run $id: $(cat "$TMP/out")"
expect_ok results --json
grep -q "\"hash\":\"$id\"" "$TMP/out" || fail "results --json: no hash $id"
grep -q "\"checkpoint\":\"$ckpt\"" "$TMP/out" || fail "results --json: no checkpoint $ckpt"
expect_ok results --csv --columns run,checkpoint
[ "$(sed -n 2p "$TMP/out")" = "$id,$ckpt" ] || fail "results --csv: $(cat "$TMP/out")"
prefix=$(echo "$id" | cut -c1-6)
expect_ok results --run "$prefix"
grep -q "^checkpoint  $ckpt$" "$TMP/out" || fail "results --run: no checkpoint line: $(cat "$TMP/out")"

# eval: the checkpoint file, the full id and a prefix give the same numbers
expect_ok eval "$ckpt" --json
by_file=$(grep -o '"test_acc":[^,]*,"test_loss":[^,]*' "$TMP/out")
[ -n "$by_file" ] || fail "eval CKPT: no metrics: $(cat "$TMP/out")"
for arg in "$id" "$prefix"; do
  expect_ok eval "$arg" --json
  grep -q "\"run\":\"$id\"" "$TMP/out" || fail "eval $arg: not run $id: $(cat "$TMP/out")"
  [ "$(grep -o '"test_acc":[^,]*,"test_loss":[^,]*' "$TMP/out")" = "$by_file" ] ||
    fail "eval $arg: $(cat "$TMP/out"), the file gives $by_file"
done
expect_ok eval "$prefix"
grep -q "^run $id, .*test acc" "$TMP/out" || fail "eval $prefix: $(cat "$TMP/out")"
# from another folder: --results names the results folder (the stored path is relative)
mkdir -p "$TMP/elsewhere"
cd "$TMP/elsewhere" || exit 1
expect_ok eval "$prefix" --results "$TMP/results" --json
[ "$(grep -o '"test_acc":[^,]*,"test_loss":[^,]*' "$TMP/out")" = "$by_file" ] ||
  fail "eval $prefix --results: $(cat "$TMP/out")"
expect_error 1 "there is no database at 'results/selectivbench.db'" eval "$prefix"
cd "$TMP" || exit 1
expect_error 2 "no run in the results database has an id starting with 'ffff'" eval ffff
expect_error 2 "give 4 to 16 of its lowercase hex digits" eval abc
expect_error 2 "name the checkpoint first, a run id or a file" eval --json

# probe: by prefix, the same checkpoint as by file
expect_ok probe "$prefix" --json --section readout --probe_samples 8 --out "$TMP/p_id"
grep -q "^{\"checkpoint\":\"$ckpt\"" "$TMP/out" ||
  fail "probe $prefix: not the checkpoint $ckpt: $(head -c 300 "$TMP/out")"
grep -q '"readout":{' "$TMP/out" || fail "probe $prefix: no readout: $(head -c 300 "$TMP/out")"

# a sweep: its run lines name what it varies (amb and seed here); no two lines the same
"$SB" sweep tiny/task1_complexity --filter model=gla --results "$TMP/sw" >"$TMP/sweep.out" 2>&1 ||
  fail "sweep: $(tail -n 3 "$TMP/sweep.out")"
grep '^#[0-9]* \[' "$TMP/sweep.out" | sed 's/^#[0-9]* \[[0-9a-f]*\] \([^:]*\):.*/\1/' >"$TMP/labels"
[ "$(wc -l <"$TMP/labels")" -eq 4 ] || fail "sweep: not 4 run lines: $(cat "$TMP/sweep.out")"
[ "$(sort -u "$TMP/labels" | wc -l)" -eq 4 ] || fail "sweep: run lines repeat: $(cat "$TMP/labels")"
grep -qx "gla amb=4 seed=1" "$TMP/labels" || fail "sweep: no 'gla amb=4 seed=1': $(cat "$TMP/labels")"
# results on it: the keys the sweep varies are columns, with the grammar's TE
expect_ok results "$TMP/sw"
# (the grammar as trained: grammar_scale moves vocab and amb_depth with amb)
head -n 1 "$TMP/out" | grep -q "seed  *vocab  *amb  *amb_depth  *TE" ||
  fail "results: no varied columns: $(head -n 1 "$TMP/out")"

echo "test_ids: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

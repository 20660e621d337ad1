#!/bin/sh
# test_curves.sh - learning curves (issue 16, item 2): `results --curves RUN` prints every
# evaluation a run stored (table, CSV, JSON), as many as the database holds, steps in
# order, the values `train` printed; a unique prefix of the run id is enough; an unknown,
# malformed or ambiguous id is one error line and exit 2; without RUN every run's curve,
# each line naming its run; `report` draws the learning curves and links them.
# Curves by default (issue 38, item 2): a run whose --epoch_size cadence evaluates once gets
# 10 points spread over its training (--curve_points), each with train and test loss and
# accuracy and the learning rate; the weights, the final metrics and the run id are those of
# --curve_points 0; a report whose runs have fewer than 3 points draws no curve figure and
# says why.
#
# usage: test_curves.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

tiny="--model gru --vocab 7 --amb 6 --amb_depth 6 --train_seqlen_max 20 --test_seqlen_max 20 \
--dataset_size 96 --test_size 12 --batch_size 16 --test_bs 6 --layers 1 --epoch_size 32 \
--curve_points 0 --results $TMP/r"
db="$TMP/r/selectivbench.db"
# shellcheck disable=SC2086
expect_ok train $tiny --feat_size 16
cp "$TMP/out" "$TMP/train16"
run=$(sed -n 's/^run \([0-9a-f]\{16\}\):.*/\1/p' "$TMP/train16")
[ -n "$run" ] || fail "train printed no run id: $(head -n 2 "$TMP/train16")"
# shellcheck disable=SC2086
expect_ok train $tiny --feat_size 24
run24=$(sed -n 's/^run \([0-9a-f]\{16\}\):.*/\1/p' "$TMP/out")

# ---- CSV: one line per stored evaluation, steps in order, the values train printed -------
expect_ok results --curves "$run" --db "$db" --csv
cp "$TMP/out" "$TMP/curve.csv"
head -n 1 "$TMP/curve.csv" | grep -q "^run,step,samples,split,loss,acc,lr,tokens_per_s,wall_s$" ||
  fail "results --curves --csv header: $(head -n 1 "$TMP/curve.csv")"
rows=$(($(wc -l <"$TMP/curve.csv") - 1))
if command -v sqlite3 >/dev/null 2>&1; then
  stored=$(sqlite3 "$db" "SELECT count(*) FROM evaluations e JOIN runs r ON e.run_id = r.id \
WHERE r.hash = '$run'")
  [ "$rows" -eq "$stored" ] || fail "results --curves: $rows rows, the database has $stored"
fi
printed=$(grep -c "^  step [0-9]*/[0-9]* (" "$TMP/train16")
# train prints one line per evaluation, with a train, a test and a validation row each
[ "$rows" -eq $((3 * printed)) ] && [ "$rows" -ge 6 ] ||
  fail "results --curves: $rows rows for $printed evaluations printed by train"
[ "$(grep -c ',valid,' "$TMP/curve.csv")" -eq "$printed" ] ||
  fail "results --curves: not one validation row per evaluation: $(cat "$TMP/curve.csv")"
awk -F, -v run="$run" 'NR > 1 {
    if ($1 != run) { print "row of another run: " $0; bad++ }
    if ($2 + 0 < last) { print "steps out of order: " $0; bad++ }
    last = $2 + 0
  } END { exit bad > 0 }' "$TMP/curve.csv" >"$TMP/check" || fail "curve CSV: $(cat "$TMP/check")"
# each "step S/N (K samples): train loss L acc A | test loss L acc A" line against the CSV
sed -n 's/^  step \([0-9]*\)\/[0-9]* (\([0-9]*\) samples): train loss \([0-9.]*\) acc \([0-9.]*\) | test loss \([0-9.]*\) acc \([0-9.]*\) .*/\1 \2 \3 \4 \5 \6/p' \
  "$TMP/train16" >"$TMP/printed"
[ "$(wc -l <"$TMP/printed")" -eq "$printed" ] || fail "could not read train's lines: $(cat "$TMP/train16")"
while read -r step samples tl ta sl sa; do
  for split in train test; do
    if [ "$split" = train ]; then loss=$tl acc=$ta; else loss=$sl acc=$sa; fi
    awk -F, -v step="$step" -v samples="$samples" -v want_split="$split" -v loss="$loss" \
      -v acc="$acc" '$2 == step && $4 == want_split {
        found = 1
        if ($3 != samples || sprintf("%.4f", $5) != loss || sprintf("%.4f", $6) != acc)
          { print "step " step " " want_split ": " $0 " but train printed " samples " " loss " " acc; exit 1 }
      } END { if (!found) { print "no " want_split " row for step " step; exit 1 } }' \
      "$TMP/curve.csv" >"$TMP/check" || fail "$(cat "$TMP/check")"
  done
done <"$TMP/printed"

# ---- JSON and the table: the same evaluations ---------------------------------------------
expect_ok results --curves "$run" --db "$db" --json
n_json=$(grep -o '"step":' "$TMP/out" | wc -l)
[ "$n_json" -eq "$rows" ] || fail "results --curves --json: $n_json points, CSV has $rows"
grep -q "^{\"curves\":\[{\"run\":\"$run\",\"points\":\[{\"step\":" "$TMP/out" ||
  fail "results --curves --json: $(head -c 300 "$TMP/out")"
expect_ok results --curves "$run" --db "$db"
head -n 1 "$TMP/out" | grep -q "^run  *step  *samples  *split  *loss  *acc  *lr  *wall s$" ||
  fail "results --curves table header: $(head -n 1 "$TMP/out")"
grep -q "^$rows evaluations of 1 run$" "$TMP/out" || fail "results --curves table: $(tail -n 1 "$TMP/out")"

# ---- a prefix is enough; a results folder stands for its database -------------------------
prefix=$(echo "$run" | cut -c 1-6)
expect_ok results --curves "$prefix" "$TMP/r" --csv
cmp -s "$TMP/out" "$TMP/curve.csv" || fail "results --curves PREFIX DIR differs from the full id"

# ---- every run: a run column tells them apart ----------------------------------------------
expect_ok results --curves --db "$db" --csv
runs=$(tail -n +2 "$TMP/out" | cut -d, -f1 | sort -u | tr '\n' ' ')
want=$(printf '%s\n%s\n' "$run" "$run24" | sort | tr '\n' ' ')
[ "$runs" = "$want" ] || fail "results --curves (every run): runs '$runs', expected '$want'"

# ---- bad ids: one line, exit 2 ------------------------------------------------------------
expect_error 2 "no run in the results database has an id starting with 'ffff0000'" \
  results --curves ffff0000 --db "$db"
expect_error 2 "is not a run hash" results --curves nothex --db "$db"
expect_error 2 "choose one of --json and --csv" results --curves "$run" --db "$db" --json --csv
if command -v sqlite3 >/dev/null 2>&1; then
  # two runs whose ids share their first 8 digits
  shared=$(echo "$run" | cut -c 1-8)
  sqlite3 "$db" "UPDATE runs SET hash = '${shared}00000000' WHERE hash = '$run24'" ||
    fail "sqlite3 could not rename a run"
  expect_error 2 "matches several runs" results --curves "$shared" --db "$db"
  sqlite3 "$db" "UPDATE runs SET hash = '$run24' WHERE hash = '${shared}00000000'"
fi

# ---- report: learning curves drawn and linked ---------------------------------------------
expect_ok report --db "$db" --out "$TMP/report"
[ -s "$TMP/report/fig2b_curves.png" ] && [ -s "$TMP/report/fig2b_curves.svg" ] ||
  fail "report: no learning-curve figure: $(ls "$TMP/report")"
grep -q "(fig2b_curves.png)" "$TMP/report/report.md" || fail "report.md does not link the curves"
grep -q '"name": "fig2b_curves"' "$TMP/report/report.json" || fail "report.json: no curve figure"

# ---- curves by default: 10 points where --epoch_size gives one ----------------------------
# 320 samples, 20 updates of 16: the default --epoch_size (5000) evaluates at the last update
# only; the curve's points come at updates ceil(k 20 / 10) = 2, 4, ..., 18 and the last
plain="--model gru --vocab 7 --amb 6 --amb_depth 6 --train_seqlen_max 20 --test_seqlen_max 20 \
--dataset_size 320 --test_size 12 --batch_size 16 --test_bs 6 --layers 1 --feat_size 16"
# shellcheck disable=SC2086
expect_ok train $plain --results "$TMP/c10" --ckpt "$TMP/c10/w.safetensors"
cp "$TMP/out" "$TMP/train_c10"
# shellcheck disable=SC2086
expect_ok train $plain --curve_points 0 --results "$TMP/c0" --ckpt "$TMP/c0/w.safetensors"
cp "$TMP/out" "$TMP/train_c0"
id10=$(sed -n 's/^run \([0-9a-f]\{16\}\):.*/\1/p' "$TMP/train_c10")
id0=$(sed -n 's/^run \([0-9a-f]\{16\}\):.*/\1/p' "$TMP/train_c0")
[ -n "$id10" ] && [ "$id10" = "$id0" ] || fail "--curve_points changes the run id: '$id10' vs '$id0'"
cmp -s "$TMP/c10/w.safetensors" "$TMP/c0/w.safetensors" &&
  cmp -s "$TMP/c10/w.optim.safetensors" "$TMP/c0/w.optim.safetensors" ||
  fail "the curve's extra evaluations change the weights or the optimiser state"
for k in test_acc test_loss train_acc train_loss valid_acc; do
  a=$(field "$TMP/c10/selectivbench.db" $k)
  b=$(field "$TMP/c0/selectivbench.db" $k)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$k with the curve's points: '$a', without: '$b'"
done
expect_ok results --curves "$id10" --db "$TMP/c10/selectivbench.db" --csv
cp "$TMP/out" "$TMP/c10.csv"
steps=$(awk -F, '$4 == "test" {printf "%s ", $2}' "$TMP/c10.csv")
[ "$steps" = "2 4 6 8 10 12 14 16 18 20 " ] || fail "the curve's test points at updates '$steps'"
[ "$(awk -F, '$4 == "train"' "$TMP/c10.csv" | wc -l)" -eq 10 ] ||
  fail "not a training row per point: $(cat "$TMP/c10.csv")"
# the validation split is read at the last update only (the curve's points read the test)
[ "$(awk -F, '$4 == "valid" {print $2}' "$TMP/c10.csv")" = 20 ] ||
  fail "validation rows: $(awk -F, '$4 == "valid"' "$TMP/c10.csv")"
awk -F, 'NR > 1 && ($5 == "" || $6 == "" || $7 == "" || $7 + 0 < 0) { print; bad++ }
  END { exit bad > 0 }' "$TMP/c10.csv" >"$TMP/check" ||
  fail "curve points without a loss, an accuracy or a learning rate: $(cat "$TMP/check")"
[ "$(grep -c "^  step [0-9]*/20 (" "$TMP/train_c10")" -eq 10 ] ||
  fail "train printed no line per curve point: $(cat "$TMP/train_c10")"
expect_ok results --curves "$id0" --db "$TMP/c0/selectivbench.db" --csv
[ "$(awk -F, '$4 == "test"' "$TMP/out" | wc -l)" -eq 1 ] ||
  fail "--curve_points 0: want the one evaluation: $(cat "$TMP/out")"

# ---- a report of one-point runs draws no curve figure, and says so --------------------------
# shellcheck disable=SC2086
expect_ok train $plain --curve_points 0 --feat_size 24 --results "$TMP/c0"
expect_ok report --db "$TMP/c0/selectivbench.db" --out "$TMP/report0"
[ -s "$TMP/report0/fig2b.png" ] || fail "report of one-point runs: no accuracy figure: $(ls "$TMP/report0")"
[ ! -e "$TMP/report0/fig2b_curves.png" ] || fail "report drew curves of one point per run"
grep -q "No learning-curve figure: no run here has 3 or more evaluations" "$TMP/report0/report.md" ||
  fail "report.md does not say why the curves are missing"
grep -q '"name": "fig2b_curves"' "$TMP/report0/report.json" &&
  fail "report.json lists a curve figure that was not drawn"

echo "curve checks: $checks commands, $failures failures"
[ "$failures" -eq 0 ]

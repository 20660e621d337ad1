#!/bin/sh
# test_curves.sh - learning curves (issue 16, item 2): `results --curves RUN` prints every
# evaluation a run stored (table, CSV, JSON), as many as the database holds, steps in
# order, the values `train` printed; a unique prefix of the run id is enough; an unknown,
# malformed or ambiguous id is one error line and exit 2; without RUN every run's curve,
# each line naming its run; `report` draws the learning curves and links them.
#
# usage: test_curves.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

tiny="--model gru --vocab 7 --amb 6 --amb_depth 6 --train_seqlen_max 20 --test_seqlen_max 20 \
--dataset_size 96 --test_size 12 --batch_size 16 --test_bs 6 --layers 1 --epoch_size 32 \
--results $TMP/r"
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

echo "curve checks: $checks commands, $failures failures"
[ "$failures" -eq 0 ]

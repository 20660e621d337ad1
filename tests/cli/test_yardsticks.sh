#!/bin/sh
# test_yardsticks.sh - every run carries its yardsticks: after a tiny `train`, `results`
# shows the ceiling and the effective memory of every finished run (table, JSON, CSV);
# runs recorded without them are backfilled and written back; `report` lists a single run
# with them under "Other runs" and draws the effective-memory figure of a sweep; and in a
# small trained sweep no run beats its task's ceiling by more than 2 standard errors.
#
# usage: test_yardsticks.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# ---- a tiny train: the run has its yardsticks ------------------------------------------
"$SB" train --model gru --vocab 7 --amb 6 --amb_depth 6 --train_seqlen_max 20 \
  --test_seqlen_max 20 --dataset_size 96 --test_size 12 --batch_size 16 --test_bs 6 \
  --feat_size 16 --layers 1 --epoch_size 48 --results "$TMP/t" --quiet >"$TMP/out" 2>&1 ||
  fail "tiny train failed: $(cat "$TMP/out")"
grep -q "warning" "$TMP/out" && fail "tiny train warned: $(cat "$TMP/out")"
db="$TMP/t/selectivbench.db"
"$SB" results --db "$db" --json >"$TMP/runs.json" 2>"$TMP/err" || fail "results --json: $(cat "$TMP/err")"
[ -s "$TMP/err" ] && fail "results --json wrote on stderr: $(cat "$TMP/err")"
nf=$(grep -o '"status":"finished"' "$TMP/runs.json" | wc -l)
nc=$(grep -o '"ceiling":[01][.0-9e-]*' "$TMP/runs.json" | wc -l)
nm=$(grep -E -o '"effective_memory":([0-9][.0-9e+-]*|">32")' "$TMP/runs.json" | wc -l)
[ "$nf" -eq 1 ] && [ "$nc" -eq "$nf" ] && [ "$nm" -eq "$nf" ] ||
  fail "results --json: $nf finished runs, $nc ceilings, $nm effective memories: $(cat "$TMP/runs.json")"
"$SB" results --db "$db" >"$TMP/table" || fail "results table"
head -n 1 "$TMP/table" | grep -q "ceiling  *eff mem" || fail "results table header: $(head -n 1 "$TMP/table")"
"$SB" results --db "$db" --csv >"$TMP/runs.csv" || fail "results --csv"
head -n 1 "$TMP/runs.csv" | grep -q ",ceiling,effective_memory," || fail "results --csv header"

# ---- runs recorded before the yardsticks existed are backfilled -------------------------
if command -v sqlite3 >/dev/null 2>&1; then
  sqlite3 "$db" "UPDATE runs SET ceiling = NULL, effective_memory = NULL; DELETE FROM ceilings;" ||
    fail "sqlite3 could not clear the yardsticks"
  "$SB" results --db "$db" --json >"$TMP/again.json" || fail "results --json after clearing"
  cmp -s "$TMP/runs.json" "$TMP/again.json" || fail "backfilled yardsticks differ: $(cat "$TMP/again.json")"
  [ "$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE ceiling IS NOT NULL")" -eq 1 ] &&
    [ "$(sqlite3 "$db" "SELECT count(*) FROM ceilings")" -eq 1 ] ||
    fail "backfilled yardsticks not written back"
fi

# ---- the report lists them: a single run makes no figure, it is under "Other runs" -------
"$SB" report --db "$db" --out "$TMP/report" >"$TMP/out" 2>&1 || fail "report: $(cat "$TMP/out")"
grep -q '1 run under "Other runs"' "$TMP/out" || fail "report: the run is not under other runs: $(cat "$TMP/out")"
grep -q "| ceiling | chance | eff. memory | runs |" "$TMP/report/report.md" ||
  fail "report.md: no yardstick columns under Other runs"
# report.md ends with the findings; report --claims prints them alone and writes nothing
grep -q "^## The paper's findings" "$TMP/report/report.md" || fail "report.md: no findings section"
"$SB" report --db "$db" --claims --out "$TMP/claims_out" >"$TMP/claims" 2>&1 ||
  fail "report --claims: $(cat "$TMP/claims")"
grep -q "^- gating, not shown: no pair of models that differ on the forgetting axis alone" \
  "$TMP/claims" ||
  fail "report --claims: one run should leave every finding not shown: $(cat "$TMP/claims")"
[ "$(grep -c '^- .*, not shown' "$TMP/claims")" -eq 6 ] ||
  fail "report --claims: one line per finding, each not shown: $(cat "$TMP/claims")"
# --json: the same verdicts for programs, a JSON array
"$SB" report --db "$db" --claims --json >"$TMP/claims.json" 2>&1 ||
  fail "report --claims --json: $(cat "$TMP/claims.json")"
[ "$(head -c 1 "$TMP/claims.json")" = "[" ] &&
  [ "$(grep -c '"verdict": *"not shown"' "$TMP/claims.json")" -eq 6 ] &&
  [ "$(grep -c '"seeds": *0,' "$TMP/claims.json")" -eq 6 ] ||
  fail "report --claims --json: six objects, each not shown, 0 seeds: $(cat "$TMP/claims.json")"
"$SB" report --db "$db" --json >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q -- "--json goes with --claims" "$TMP/err" ||
  fail "report --json without --claims: $(cat "$TMP/err")"
[ ! -e "$TMP/claims_out" ] || fail "report --claims wrote figures"
# --filter: the findings of a slice, named on the first line; only with --claims, real keys
"$SB" report --db "$db" --claims --filter seed=1 --filter model=gru >"$TMP/claims" 2>&1 ||
  fail "report --claims --filter: $(cat "$TMP/claims")"
[ "$(head -n 1 "$TMP/claims")" = "Runs whose configuration has seed=1, model=gru." ] ||
  fail "report --claims --filter: first line: $(head -n 1 "$TMP/claims")"
# --filter without --claims: the figures of those runs only (seed 99 matches none of them)
"$SB" report --db "$db" --out "$TMP/report_all" >"$TMP/out" 2>&1 || fail "report: $(cat "$TMP/out")"
n_all=$(grep -o '^[0-9]* runs read' "$TMP/out" | cut -d' ' -f1)
"$SB" report --db "$db" --filter seed=99 --out "$TMP/report_none" >"$TMP/out" 2>&1 ||
  fail "report --filter seed=99: $(cat "$TMP/out")"
grep -q '^0 runs read, 0 used' "$TMP/out" || fail "report --filter seed=99: $(cat "$TMP/out")"
[ -n "$n_all" ] && [ "$n_all" -gt 0 ] || fail "report read no run: $n_all"
# a list of values: any of them (the one run has seed 1)
"$SB" report --db "$db" --filter seed=99,1 --out "$TMP/report_list" >"$TMP/out" 2>&1 ||
  fail "report --filter seed=99,1: $(cat "$TMP/out")"
[ "$(grep -o '^[0-9]* runs read' "$TMP/out" | cut -d' ' -f1)" = "$n_all" ] ||
  fail "report --filter seed=99,1 should read every run: $(cat "$TMP/out")"
"$SB" results --db "$db" --filter seed=99,1 >"$TMP/out" 2>&1 && grep -q "^$n_all of $n_all runs" "$TMP/out" ||
  fail "results --filter seed=99,1: $(cat "$TMP/out")"
"$SB" results --db "$db" --filter seed=1,x >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "'x' is not an integer" "$TMP/err" ||
  fail "results --filter seed=1,x: $(cat "$TMP/err")"
for bad in "--filter nokey=1" "--claims --filter nokey=1" "--claims --filter seed"; do
  # shellcheck disable=SC2086
  "$SB" report --db "$db" $bad >/dev/null 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] ||
    fail "report $bad: exit $rc, $(cat "$TMP/err")"
done
"$SB" report --db "$TMP/nosuch.db" --claims >/dev/null 2>"$TMP/err" && fail "report --claims: a missing database was accepted"
[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "no results database" "$TMP/err" ||
  fail "report --claims on a missing database: $(cat "$TMP/err")"

# ---- no run beats its ceiling: a small sweep of three tiny models -------------------------
# the clean protocol (test samples disjoint from the training ones), where the ideal
# observer bounds every model
cat >"$TMP/sweep.yaml" <<'YAML'
program: train.py
method: grid
metric:
  name: test_acc
  goal: maximize
parameters:
  model:
    values: [transformer, gru, mamba]
  seed:
    values: [1]
  feat_size:
    values: [32]
  lr:
    values: [0.005]
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
  - 30
  - "--test_seqlen_max"
  - 30
  - "--dataset_size"
  - 6000
  - "--test_size"
  - 100
  - "--batch_size"
  - 32
  - "--layers"
  - 2
  - "--protocol"
  - clean
  - ${args}
YAML
"$SB" sweep "$TMP/sweep.yaml" --workers 2 --results "$TMP/s" --quiet >"$TMP/out" 2>&1 ||
  fail "sweep failed: $(cat "$TMP/out")"
"$SB" results --db "$TMP/s/selectivbench.db" --csv >"$TMP/s.csv" || fail "results --csv of the sweep"
awk -F, '
  NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  {
    n++
    acc = $col["test_acc"]; c = $col["ceiling"]; se = $col["ceiling_se"]
    if ($col["status"] != "finished" || c == "" || se == "") { print "no yardsticks: " $0; bad++; next }
    if (acc + 0 > c + 2 * se) { printf "%s: test acc %s above ceiling %s + 2 x %s\n", $col["model"], acc, c, se; bad++ }
  }
  END { if (n != 3) { print n " runs, expected 3"; bad++ } exit bad > 0 }
' "$TMP/s.csv" >"$TMP/check" || fail "ceiling check: $(cat "$TMP/check")"

# ---- the report draws them: the sweep's three models make a figure ------------------------
"$SB" report --db "$TMP/s/selectivbench.db" --out "$TMP/s_report" >"$TMP/out" 2>&1 ||
  fail "report of the sweep: $(cat "$TMP/out")"
ls "$TMP/s_report"/*_memory.png >/dev/null 2>&1 || fail "report: no effective-memory figure: $(ls "$TMP/s_report")"
grep -q "| ceiling | eff. memory |" "$TMP/s_report/report.md" || fail "report.md: no yardstick columns"

echo "yardstick checks done, $failures failures"
[ "$failures" -eq 0 ]

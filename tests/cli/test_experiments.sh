#!/bin/sh
# test_experiments.sh - figures never mix experiments (issue 38, item 1): one database holds
# gru runs of two tasks (vocab 7 and 9), two dataset sizes and two widths, two seeds each;
# `report` draws one figure set per experiment (fig2b_e1 ... titled by the keys that set it
# apart), each point of two seeds, never four; `report --x feat_size` and `results --group`
# keep them apart the same way (the dashboard's groups: test_browser); a database of one
# experiment keeps the plain figure names; a grammar_scale run shows, filters and groups by
# the grammar it trained (vocab 5, amb_depth 4 at amb 4), not its raw flags; `report --claims`
# tests a finding per experiment (two tasks: two slices of two seeds, never one of four).
#
# usage: test_experiments.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# a grid over the width and the seed; VOCAB and DATASET set the experiment
grid() {
  cat <<YAML
program: train.py
method: grid
parameters:
  model:
    values: [gru]
  feat_size:
    values: [16, 24]
  seed:
    values: [1, 2]
command:
  - \${env}
  - python
  - \${program}
  - "--vocab"
  - $1
  - "--amb"
  - 6
  - "--amb_depth"
  - 3
  - "--train_seqlen_max"
  - 16
  - "--test_seqlen_max"
  - 16
  - "--dataset_size"
  - $2
  - "--test_size"
  - 8
  - "--batch_size"
  - 16
  - "--layers"
  - 1
  - \${args}
YAML
}
for e in "7 64" "7 96" "9 64"; do
  set -- $e
  grid "$1" "$2" >"$TMP/g_$1_$2.yaml"
  "$SB" sweep "$TMP/g_$1_$2.yaml" --results "$TMP/r" --threads 1 --quiet >"$TMP/out" 2>&1 ||
    fail "sweep vocab $1 dataset $2: $(tail -n 2 "$TMP/out")"
done

# ---- the paper's figures: three fig2b sets, each of 2 widths x 2 seeds ----------------------
expect_ok report --db "$TMP/r" --out "$TMP/rep"
md="$TMP/rep/report.md"
for k in 1 2 3; do
  [ -s "$TMP/rep/fig2b_e$k.png" ] || fail "report: no fig2b_e$k.png: $(ls "$TMP/rep")"
done
[ -e "$TMP/rep/fig2b_e4.png" ] && fail "report: a fourth experiment"
[ -e "$TMP/rep/fig2b.png" ] && fail "report: a figure that pools the experiments"
[ "$(grep -c '^| gru | [0-9.]* | [0-9.]* | [0-9.]* | 2 |' "$md")" -eq 6 ] ||
  fail "report.md: want 6 points (3 experiments x 2 widths) of 2 seeds: $(grep '^| gru' "$md")"
grep -q '^| gru | [0-9.]* | [0-9.]* | [0-9.]* | [1-9][0-9]* |' "$md" &&
  [ "$(grep -c '^| gru | [0-9.]* | [0-9.]* | [0-9.]* | 4 |' "$md")" -eq 0 ] ||
  fail "report.md: a point of 4 seeds pools two experiments"
grep -q 'one lr / warm-up per point; dataset_size=64, vocab=7\.$' "$md" &&
  grep -q 'dataset_size=96, vocab=7\.$' "$md" && grep -q 'dataset_size=64, vocab=9\.$' "$md" ||
  fail "report.md: the experiments' labels: $(grep 'per point' "$md")"

# ---- report --x feat_size: the same three experiments ---------------------------------------
expect_ok report --db "$TMP/r" --x feat_size --out "$TMP/repx"
[ "$(ls "$TMP"/repx/scale_feat_size_e[123].png 2>/dev/null | wc -l)" -eq 3 ] ||
  fail "report --x feat_size: not 3 figures: $(ls "$TMP/repx")"

# ---- results --group: six groups of two seeds, each labelled apart ---------------------------
expect_ok results --db "$TMP/r" --group model,feat_size
[ "$(grep -c '^gru  *[0-9]*  *2  ' "$TMP/out")" -eq 6 ] &&
  grep -q '^6 groups of 12 finished runs' "$TMP/out" ||
  fail "results --group: want 6 groups of 2 runs: $(cat "$TMP/out")"
head -n 1 "$TMP/out" | grep -q ' apart$' &&
  [ "$(grep -c 'dataset_size=96, vocab=7$' "$TMP/out")" -eq 2 ] ||
  fail "results --group: the apart column: $(cat "$TMP/out")"
expect_ok results --db "$TMP/r" --group model,feat_size --json
[ "$(grep -o '"apart":"[^"]*"' "$TMP/out" | wc -l)" -eq 6 ] || fail "results --group --json: apart"

# ---- one experiment: the plain names ---------------------------------------------------------
expect_ok report --db "$TMP/r" --filter dataset_size=96 --out "$TMP/rep1"
[ -s "$TMP/rep1/fig2b.png" ] && [ ! -e "$TMP/rep1/fig2b_e1.png" ] ||
  fail "report of one experiment: $(ls "$TMP/rep1")"

# ---- the task as trained: grammar_scale resolved in the table, filters and groups -------------
"$SB" train --model gru --amb 4 --grammar_scale True --train_seqlen_max 12 --test_seqlen_max 12 \
  --dataset_size 32 --test_size 8 --batch_size 16 --feat_size 16 --layers 1 --results "$TMP/gs" \
  --quiet >"$TMP/out" 2>&1 || fail "grammar_scale run: $(cat "$TMP/out")"
expect_ok results --db "$TMP/gs" --columns model,vocab,amb,amb_depth --csv
grep -q '^gru,5,4,4$' "$TMP/out" || fail "results: not the grammar as trained: $(cat "$TMP/out")"
expect_ok results --db "$TMP/gs" --filter vocab=5 --csv
[ "$(grep -c '^[0-9a-f]' "$TMP/out")" -eq 1 ] || fail "results --filter vocab=5: $(cat "$TMP/out")"
expect_ok results --db "$TMP/gs" --filter vocab=41 --csv
[ "$(grep -c '^[0-9a-f]' "$TMP/out")" -eq 0 ] || fail "results --filter vocab=41 matched the raw flag"

# ---- report --claims: the gating finding per experiment, its seeds never pooled -------------
# delta_net against gated_delta_net (they differ on the forgetting axis alone), seeds 1 and 2,
# on two tasks: two slices of two seeds each, labelled by what sets them apart
for v in 7 9; do
  grid "$v" 64 | sed -e 's/values: \[gru\]/values: [delta_net, gated_delta_net]/' \
    -e 's/values: \[16, 24\]/values: [16]/' >"$TMP/c_$v.yaml"
  "$SB" sweep "$TMP/c_$v.yaml" --results "$TMP/c" --threads 1 --quiet >"$TMP/out" 2>&1 ||
    fail "sweep delta_net/gated_delta_net vocab $v: $(tail -n 2 "$TMP/out")"
done
"$SB" report --db "$TMP/c" --claims --json >"$TMP/claims.json" 2>"$TMP/err" ||
  fail "report --claims --json: $(cat "$TMP/err")"
tr -d '\n' <"$TMP/claims.json" | sed 's/}, *{/}\n{/g' | grep '"id": *"gating"' >"$TMP/gating"
[ "$(wc -l <"$TMP/gating")" -eq 2 ] || fail "report --claims: want 2 gating slices: $(cat "$TMP/gating")"
for v in 7 9; do
  grep "\"slice\": *\"[^\"]*vocab=$v" "$TMP/gating" | grep -q '"seeds": *2,' ||
    fail "report --claims: no gating slice of vocab $v with 2 seeds: $(cat "$TMP/gating")"
done
grep -q '"seeds": *4,' "$TMP/claims.json" && fail "report --claims pooled the two tasks' seeds"

echo "test_experiments: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

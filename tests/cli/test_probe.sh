#!/bin/sh
# test_probe.sh - `selectivbench probe` (docs/probe.md): every registered model's checkpoint
# probes with --json and every section present; on a model trained long enough to learn,
# the last block's linear readout of the current state is at least the model's own test
# accuracy (within 5 points); bad input gives one error line and the right exit code.
#
# usage: test_probe.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# (a) every registered model: a tiny checkpoint probes, every section is in the JSON
all_models=$("$SB" train --model nosuch 2>&1 | sed -n 's/.*available: //p' | tr -d ',')
[ -n "$all_models" ] || fail "no model list in the unknown-model error"
retnet_ck=
gated_models=""
for m in $all_models; do
  expect_ok train --model "$m" --vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 10 \
    --test_seqlen_max 10 --dataset_size 32 --test_size 4 --batch_size 16 --feat_size 32 \
    --layers 2 --results "$TMP/all" --json
  ck=$(grep -o '"checkpoint":"[^"]*"' "$TMP/out" | cut -d'"' -f4)
  [ -s "$ck" ] || { fail "train --model $m wrote no checkpoint"; continue; }
  [ "$m" = retnet ] && retnet_ck=$ck
  expect_ok probe "$ck" --json --probe_samples 16 --retention_samples 1 --out "$TMP/p_$m"
  j=$(cat "$TMP/out")
  for key in '"readout":{' '"retention":{' '"depths":\[' '"model_test_acc":'; do
    echo "$j" | grep -q "$key" || fail "probe $m: no $key in $(echo "$j" | head -c 300)"
  done
  echo "$j" | grep -q '"gates":{' || echo "$j" | grep -q '"gates":null,"gates_reason":"model' ||
    fail "probe $m: neither gates nor a reason: $(echo "$j" | head -c 300)"
  [ "$(echo "$j" | grep -o '"name":"block 2"' | wc -l)" -eq 1 ] || fail "probe $m: no block 2"
  for f in probe.json readout.png retention.png; do
    [ -s "$TMP/p_$m/$f" ] || fail "probe $m: no $f in the output folder"
  done
  # a layer type with input-dependent gates (a probe_gates hook in its record) reports them
  # with their gap selectivity and a figure; one without says why (RetNet's fixed decays,
  # S4D's input-independent kernel): the expectation comes from the model, not a name list
  if echo "$j" | grep -q '"gates":null'; then
    [ ! -e "$TMP/p_$m/gates.png" ] || fail "probe $m: gates.png without gates"
  else
    echo "$j" | grep -q '"gap_selectivity":' || fail "probe $m: no gap selectivity"
    [ -s "$TMP/p_$m/gates.png" ] || fail "probe $m: no gates.png"
  fi
  echo "$j" | grep -q '"gates":null' || gated_models="$gated_models $m"
done

# the models whose probe reported gates are those whose layer record has a probe_gates hook
want_gated=$("$SB" models --json | tr '{' '\n' | sed -n 's/^"model":"\([a-z0-9_]*\)".*"probe_gates":1.*/\1/p' | tr '\n' ' ')
[ -n "$want_gated" ] && [ "$(echo $gated_models)" = "$(echo $want_gated)" ] ||
  fail "probe reported gates for '$gated_models'; the records with probe_gates: '$want_gated'"

# (b) a model that learned: the last block's readout of the current state (j = 0) is not
# worse than the model's own test accuracy by more than 5 points
expect_ok train --model gru --amb 4 --grammar_scale True --train_seqlen_max 30 \
  --test_seqlen_max 30 --dataset_size 2000 --test_size 100 --batch_size 32 --feat_size 32 \
  --layers 2 --lr 0.003 --warmup_steps 6 --results "$TMP/learn" --json
ck=$(grep -o '"checkpoint":"[^"]*"' "$TMP/out" | cut -d'"' -f4)
expect_ok probe "$ck" --json --section readout
acc=$(grep -o '"model_test_acc":[0-9.e-]*' "$TMP/out" | cut -d: -f2)
last=$(grep -o '"acc":\[[^],]*' "$TMP/out" | tail -n 1 | cut -d[ -f2)
awk -v a="$acc" -v r="$last" 'BEGIN { exit !(a > 0.5 && r >= a - 0.05) }' ||
  fail "readout of the last block ($last) is worse than the model's test acc ($acc) - 0.05"
[ -s "${ck%.safetensors}_probe/readout.png" ] || fail "probe: no figure next to the checkpoint"

# (c) bad input: one error line, non-zero exit
expect_error 1 "No such file" probe "$TMP/nosuch.safetensors"
expect_error 2 "name the checkpoint" probe --json
expect_error 2 "another task" probe "$ck" --amb 3
expect_error 2 "another task" probe "$ck" --seed 7
expect_error 2 "another model" probe "$ck" --model transformer
expect_error 2 "not one of" probe "$ck" --section bogus
expect_error 2 "out of range" probe "$ck" --probe_samples 0
expect_error 1 "cannot create the output folder" probe "$ck" --out /dev/null/x
expect_error 2 "model 'retnet' has no input-dependent gates" probe "$retnet_ck" --section gates
expect_ok probe "$retnet_ck" --section retention --json --out "$TMP/r"
grep -q '"gates":null' "$TMP/out" || fail "probe retnet --section retention: gates not null"
printf 'not a checkpoint' >"$TMP/corrupt.safetensors"
expect_error 1 "corrupt" probe "$TMP/corrupt.safetensors"

echo "$checks probe checks, $failures failures"
[ "$failures" -eq 0 ]

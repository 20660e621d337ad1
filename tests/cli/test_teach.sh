#!/bin/sh
# test_teach.sh - errors that teach, and help that lists everything:
#   - an impossible grammar is refused at once (exit 2), naming the flags that fix it with
#     values that work (and those values do build a grammar);
#   - an unknown model in a sweep's run (the library's run check) gets a did-you-mean;
#   - an unknown flag in a sweep file's command (a worker's flag) and an unknown sweep
#     parameter get one too;
#   - every subcommand's --help exits 0 with its usage and its flags, and every flag that
#     takes a value says its default (no-ops aside).
#
# usage: test_teach.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"

# ---- impossible grammars ------------------------------------------------------------------
# --amb 4 with the default depth 40: 196 states, the 36 plain letters reached with 0.4/40
expect_error 2 "no grammar of --vocab 41 --amb 4 --amb_depth 40 can be generated in practice: with transition density 0.4 / 40, one of its 196 states has no successor in all but 1.1e-08 of the attempts; use --amb_depth 19 or less, or --amb 7 or more" \
  grammar --amb 4
expect_ok grammar --amb 4 --amb_depth 19
grep -q "states" "$TMP/out" || fail "grammar --amb 4 --amb_depth 19: $(head -n 3 "$TMP/out")"
expect_ok grammar --amb 7
# the same check refuses the run of train (before any data is made) and of a sweep
expect_error 2 "use --amb_depth 19 or less" train --amb 4 --results "$TMP/r"
expect_error 2 "raise --transition_density" grammar --vocab 6 --amb 0 --amb_depth 1 \
  --transition_density 0
# the paper's grammars are not refused
expect_ok grammar --vocab 41 --amb 40 --amb_depth 40
expect_ok grammar --grammar_scale True --amb 2

# ---- sweeps: models, worker flags, parameters --------------------------------------------
sweep_file() { # sweep_file MODEL FLAG PARAM: a one-run sweep file on stdout
  cat <<EOF
program: train.py
method: grid
parameters:
  model:
    values: [$1]
  $3:
    values: [1]
command:
  - \${env}
  - python
  - \${program}
  - "--vocab"
  - 9
  - "--amb"
  - 8
  - "--grammar_scale"
  - True
  - "$2"
  - 1
  - \${args}
EOF
}
sweep_file glaa --threads seed >"$TMP/model.yaml"
expect_error 1 "run 0: unknown --model 'glaa'; did you mean 'gla'?" sweep "$TMP/model.yaml" --dry_run
sweep_file gla --thredas seed >"$TMP/flag.yaml"
expect_error 1 "run 0: unknown flag --thredas; did you mean --threads?" sweep "$TMP/flag.yaml" \
  --dry_run
expect_error 1 "unknown flag --thredas; did you mean --threads?" sweep "$TMP/flag.yaml" \
  --results "$TMP/sw" --quiet
sweep_file gla --threads sed >"$TMP/param.yaml"
expect_error 2 "parameter 'sed' is not a train flag; did you mean 'seed'?" sweep "$TMP/param.yaml" \
  --dry_run

# ---- every subcommand's --help ------------------------------------------------------------
for cmd in grammar data train eval probe ceiling sweep plan results report models bench demo; do
  expect_ok "$cmd" --help
  head -n 1 "$TMP/out" | grep -q "^usage: selectivbench $cmd" ||
    fail "$cmd --help: first line $(head -n 1 "$TMP/out")"
  [ "$(grep -c '^  --[a-z]' "$TMP/out")" -ge 3 ] || fail "$cmd --help lists no flags: $(cat "$TMP/out")"
  grep -q '^  --threads ' "$TMP/out" || fail "$cmd --help does not list --threads"
  # a flag with a value (--name METAVAR) says its default, unless it is a no-op
  grep -E '^  --[a-z_0-9]+ [^ ]' "$TMP/out" | grep -v -e 'default' -e 'no-op' -e 'ignored' \
    >"$TMP/nodefault"
  [ -s "$TMP/nodefault" ] && fail "$cmd --help: flags without a default: $(cat "$TMP/nodefault")"
done
# the key table's defaults reach every command that takes its keys
for cmd in train eval probe ceiling; do
  "$SB" $cmd --help | grep -q -- '^  --protocol reference|clean .*(default reference)$' ||
    fail "$cmd --help: --protocol has no default"
  "$SB" $cmd --help | grep -q -- '^  --lr X .*(default 0.001)$' || fail "$cmd --help: --lr default"
done
"$SB" grammar --help | grep -q -- '^  --amb N .*(default 40)$' || fail "grammar --help: --amb default"

echo "test_teach: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

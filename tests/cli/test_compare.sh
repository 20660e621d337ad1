#!/bin/sh
# test_compare.sh - bench/compare.sh without torch: bad arguments exit 2 with one line; no
# torch gives one "skipped:" line and exit 77; with a stand-in interpreter that "has torch"
# and answers for tools/torch_bench.py with a fixed JSON line, the table has a row per model
# with our real `bench` figures and the ratio to the stand-in's tokens/s. Needs a python3
# for the table (no torch); without one that last part is left out, saying so.
#
# usage: test_compare.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$SRC/tests/cli/common.sh"
COMPARE=$SRC/bench/compare.sh
export SB

# compare_fails EXIT NEEDLE ARGS: exit code EXIT and one stderr line containing NEEDLE
compare_fails() {
  want=$1
  needle=$2
  shift 2
  checks=$((checks + 1))
  "$COMPARE" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "compare.sh $* exited $rc, expected $want: $(cat "$TMP/err")"
  elif [ "$(wc -l <"$TMP/err")" -ne 1 ] || ! grep -q -- "$needle" "$TMP/err"; then
    fail "compare.sh $*: expected one stderr line with '$needle', got: $(cat "$TMP/err")"
  fi
}

compare_fails 2 "--config huge is not small or large" --config huge gru
compare_fails 2 "unknown flag --fast" --fast gru
compare_fails 2 "--steps x is not a positive integer" --steps x gru
compare_fails 2 "name at least one model" --config small
SB=/nonexistent compare_fails 2 "/nonexistent is not an executable" gru

# no torch: one line on stdout, exit 77
checks=$((checks + 1))
SB_PYTHON=/nonexistent/python3 "$COMPARE" gru >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 77 ] || fail "without torch compare.sh exited $rc, expected 77"
[ "$(wc -l <"$TMP/out")" -eq 1 ] && grep -q "^skipped: python3-torch not installed" "$TMP/out" ||
  fail "without torch: expected one 'skipped:' line, got: $(cat "$TMP/out" "$TMP/err")"

real_python=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import json' >/dev/null 2>&1; then
    real_python=$(command -v "$py")
    break
  fi
done
if [ -z "$real_python" ]; then
  echo "note: no python3: the table part of test_compare is left out"
else
  # a stand-in interpreter: "imports torch", answers for torch_bench.py, runs the rest
  cat >"$TMP/fakepython" <<EOF
#!/bin/sh
case "\$1" in
-c) exit 0 ;;
*torch_bench.py) echo '{"model": "'"\$3"'", "config": "\$4", "torch": "stand-in", "threads": 2, "params": 1, "step_ms": 1.0, "tokens_per_s": 1000, "peak_mib": 50.0}' ;;
*) exec "$real_python" "\$@" ;;
esac
EOF
  chmod +x "$TMP/fakepython"
  touch "$TMP/ssm_models.py"
  SB_PYTHON=$TMP/fakepython compare_fails 2 "set SB_REFERENCE_MODELS" --config small gru

  checks=$((checks + 1))
  SB_PYTHON=$TMP/fakepython SB_REFERENCE_MODELS=$TMP/ssm_models.py \
    "$COMPARE" --config small --steps 1 --threads 1 gru gla >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq 0 ] || fail "compare.sh with the stand-in exited $rc: $(cat "$TMP/err")"
  grep -q "^| model | config | ours tok/s | PyTorch tok/s | ratio | ours MiB | PyTorch MiB |$" \
    "$TMP/out" || fail "no table header: $(cat "$TMP/out")"
  grep -q "PyTorch stand-in, 2 threads; config small" "$TMP/out" ||
    fail "no header line naming the PyTorch side: $(cat "$TMP/out")"
  for m in gru gla; do
    row=$(grep "^| $m | small | " "$TMP/out")
    [ -n "$row" ] || fail "no row for $m: $(cat "$TMP/out")"
    # ratio = our tokens/s / 1000 (the stand-in's) to one decimal (ours is rounded: 0.051)
    ours=$(echo "$row" | cut -d'|' -f4 | tr -d ' ,')
    ratio=$(echo "$row" | cut -d'|' -f6 | tr -d ' x')
    "$real_python" -c "import sys; sys.exit(abs($ratio - $ours / 1000) > 0.051)" ||
      fail "$m: ratio $ratio, expected $ours / 1000 to one decimal: $row"
    echo "$row" | grep -q "| 50 |$" || fail "$m: PyTorch MiB should be 50: $row"
  done
fi

echo "test_compare: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

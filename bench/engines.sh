#!/bin/sh
# engines.sh - the default engine table (--gemm auto) against each engine named explicitly,
# in one run: training tokens/s of auto, openblas and onednn in turn (interleaved, so that
# a change of load hits all three alike, in an order that turns from round to round), REPS
# rounds, the median of each, and the default's ratio to the faster engine. The table of docs/performance.md, "Which engine computes a
# product".
#
# usage: bench/engines.sh lite|big [OUT]
#   lite  every training configuration of configs/lite (seed 1; task4 trains task2's runs,
#         so it adds none), each cut to SAMPLES training samples and 50 test samples
#   big   `bench` at B16 T400 L4, 41 inputs, 1601 classes, d 128 and 256, every model
#         (MODELS to choose), STEPS timed steps (median) after bench's warm-up
#   OUT   the table (markdown) also goes there
# Environment: SB (the binary; default build/selectivbench), REPS (3), THREADS (2),
#   SAMPLES (960), STEPS (2), MODELS, WIDTHS ("128 256"), FILES (the lite files), ONLY (an
#   extended regular expression: only the rows whose name matches, e.g. to measure the rows
#   under 0.95 again with more rounds).
# Several minutes per configuration at d256: `big` takes about an hour for every model.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
SB=${SB:-$here/build/selectivbench}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
SAMPLES=${SAMPLES:-960}
STEPS=${STEPS:-2}
WIDTHS=${WIDTHS:-128 256}
FILES=${FILES:-task1_complexity task1_model_size task2 task3}
mode=${1:-}
out=${2:-/dev/null}
case $mode in lite | big) ;; *)
  echo "engines.sh: usage: bench/engines.sh lite|big [OUT]" >&2
  exit 2
  ;;
esac
[ -x "$SB" ] || {
  echo "engines.sh: no binary at $SB (./run.sh build)" >&2
  exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median of the numbers on stdin
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# tokens/s of one short training run: train ARGS... (--force: the engine is not in the run
# hash, so a second run would read the first one's row; one results folder per configuration
# keeps the task's ideal observer, computed once, in its database)
train_rate() {
  "$SB" train "$@" --results "$tmp/r" --force --threads "$THREADS" 2>&1 |
    sed -n 's/.* \([0-9][0-9]*\) tokens\/s, .*/\1/p' | tail -n 1
}

bench_rate() {
  "$SB" bench --batch_size 16 --frames 400 --layers 4 --inp 41 --classes 1601 --steps "$STEPS" \
    --no_peak --threads "$THREADS" --json "$@" 2>/dev/null |
    sed -n 's/.*"tokens_per_s": *\([0-9.e+]*\).*/\1/p' | head -n 1
}

# row NAME CMD...: REPS interleaved rounds of the three engines, one table row
row() {
  name=$1
  shift
  : >"$tmp/auto"
  : >"$tmp/openblas"
  : >"$tmp/onednn"
  r=0
  while [ "$r" -lt "$REPS" ]; do
    # the order turns from round to round: no engine always runs first or last
    case $((r % 3)) in
    0) order="auto openblas onednn" ;;
    1) order="openblas onednn auto" ;;
    *) order="onednn auto openblas" ;;
    esac
    for e in $order; do
      v=$("$@" --gemm "$e")
      [ -n "$v" ] && echo "$v" >>"$tmp/$e"
    done
    r=$((r + 1))
  done
  med_auto=$(median <"$tmp/auto")
  med_openblas=$(median <"$tmp/openblas")
  med_onednn=$(median <"$tmp/onednn")
  awk -v n="$name" -v a="$med_auto" -v o="$med_openblas" -v d="$med_onednn" 'BEGIN {
    best = o > d ? o : d
    printf "| %s | %.0f | %.0f | %.0f | %.2f |\n", n, a, o, d, (best > 0 ? a / best : 0) }' |
    tee -a "$out"
}

echo "| configuration | default (auto) tokens/s | openblas | onednn | default / faster |" | tee "$out"
echo "|---|---:|---:|---:|---:|" | tee -a "$out"
if [ "$mode" = lite ]; then
  for f in $FILES; do
    "$SB" sweep "$here/configs/lite/$f.yaml" --dry_run --list 2>/dev/null | grep -- '--seed=1 ' |
      sed -e 's/^[^ ]* train //' -e 's/--dataset_size [0-9]*/--dataset_size '"$SAMPLES"'/' \
        -e 's/--test_size [0-9]*/--test_size 50/' -e 's/--save_model True/--save_model False/' \
        >"$tmp/cmds"
    while read -r cmd; do
      model=$(echo "$cmd" | sed -n 's/.*--model=\([a-z0-9_]*\).*/\1/p')
      width=$(echo "$cmd" | sed -n 's/.*--feat_size=\([0-9]*\).*/\1/p')
      amb=$(echo "$cmd" | sed -n 's/.*--amb=\([0-9]*\).*/\1/p')
      if [ -n "${ONLY:-}" ] && ! echo "$f $model d$width amb$amb" | grep -Eq -- "$ONLY"; then
        continue
      fi
      rm -rf "$tmp/r"
      # shellcheck disable=SC2086
      row "$f $model d$width amb$amb" train_rate $cmd </dev/null
    done <"$tmp/cmds"
  done
else
  models=${MODELS:-$("$SB" models 2>/dev/null | awk '/^  [a-z]/ && NF > 3 && $2 ~ /^[0-9]+$/ {print $1}')}
  for width in $WIDTHS; do
    for m in $models; do
      row "$m B16 T400 d$width L4" bench_rate --model "$m" --feat_size "$width"
    done
  done
fi

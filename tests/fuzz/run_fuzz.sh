#!/bin/sh
# Runs every libFuzzer target of tests/fuzz/ for SECONDS each (`./run.sh fuzz [SECONDS]`,
# docs/fuzzing.md), one after the other, seeded with a scratch copy of its committed corpus
# tests/fuzz/corpus/<target>/ (new inputs stay in BUILD/fuzz-work/, not in the repository).
# A crash, leak, timeout (-timeout=10) or memory blow-up (-rss_limit_mb=2048) is copied to
# BUILD/crashes/ and named; the script then goes on with the other targets and exits 1.
#
#   tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS
set -u
build=${1:?usage: run_fuzz.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run_fuzz.sh BUILD_DIR SECONDS}
build=$(cd "$build" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1

failed=0
mkdir -p "$build/crashes"
for dir in tests/fuzz/corpus/*/; do
  target=$(basename "$dir")
  bin="$build/tests/fuzz/fuzz_$target"
  work="$build/fuzz-work/$target"
  if [ ! -x "$bin" ]; then
    echo "fuzz: error: $bin is missing (tests/fuzz/corpus/$target/ has no target)" >&2
    failed=1
    continue
  fi
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp "$dir"* "$work/corpus/"
  (cd "$work" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$work/" corpus >"$work/log" 2>&1)
  rc=$?
  # "#123 DONE cov: 456 ft: 789 corp: 12/3456b ..." and the final stats
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/log" | tail -n 1 | sed 's/.*DONE *//')
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  if [ "$rc" -eq 0 ]; then
    echo "fuzz_$target: ${runs:-?} runs in ${seconds} s: $done_line"
    continue
  fi
  failed=1
  found=0
  for artifact in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* \
                  "$work"/slow-unit-*; do
    [ -f "$artifact" ] || continue
    kept="$build/crashes/${target}-$(basename "$artifact")"
    cp "$artifact" "$kept"
    echo "fuzz_$target: FAILED (exit $rc): the input is $kept" >&2
    found=1
  done
  [ "$found" -eq 1 ] || echo "fuzz_$target: FAILED (exit $rc) without an input; see $work/log" >&2
  # the report: from the sanitizer's or the target's first word to the end, at most 80 lines
  echo "---- $work/log:" >&2
  sed -n '/ERROR: \|runtime error: \|invariant broken\|ALARM: /,$p' "$work/log" | head -n 80 >&2
  echo "----" >&2
  echo "reproduce: $bin FILE; replay it in the test suite by adding it to $dir" >&2
done
exit "$failed"

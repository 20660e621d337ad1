#!/bin/sh
# test_portable.sh - no result depends on the instruction set the binary was built for.
#
# The default build uses -march=native (SB_NATIVE=ON). This test configures a second build
# with -DSB_NATIVE=OFF (the compiler's baseline: SSE2 on x86-64) in BUILD_DIR/portable, with
# the same compiler and build type, builds only the CLI and the golden tests (the float
# library, not the double one: about half the objects), runs those tests there, and then
# compares the native binary with the portable one:
#   (a) task data, byte for byte: grammar --json (paper grammar and a small one), data
#       --checksum (gaps, noise, distractors), data --samples --json, ceiling --json
#   (b) a short training run of every registered model (tiny task, fixed seed, 1 thread):
#       the test metrics and the checkpoint's weights byte for byte. Both on OpenBLAS
#       (--gemm openblas): the portable build has no oneDNN, and under --gemm auto the
#       native one may give a product class to oneDNN by timing (it did with
#       OPENBLAS_CORETYPE=Haswell, whose slower kernels lose more classes): that is another
#       engine, not another instruction set.
# The portable build is also the build without oneDNN (-DSB_ONEDNN=OFF): its configure step
# must say so, it must refuse --gemm onednn and --precision bf16 with one line each, and
# (a), (b) and the golden tests pass in it (products this small run on OpenBLAS anyway).
# (b) is exact, not a tolerance: our float kernels sum in orders that do not depend on the
# vector width (fixed 8-lane partial sums, src/ops/ssm_math.h and fastmath.h), fused
# multiply-adds are written as fma() where they are wanted (-ffp-contract=off everywhere
# else; src/ops/s4_kernel.c says where gcc 12 needed that), and OpenBLAS, FFTW and libm pick
# their kernels at run time from the CPU, the same for both binaries. docs/performance.md
# ("Native and portable builds") has what differed before and the measured speed ratio.
#
# The second build took 42 s from scratch on the 2 shared cores of the development machine
# (the whole test 55 s); later runs rebuild only what changed. `ctest -LE portable` skips it.
#
# usage: test_portable.sh SOURCE_DIR BUILD_DIR C_COMPILER BUILD_TYPE WERROR SELECTIVBENCH
set -u
SRC=$1
BUILD=$2
CC_PATH=$3
TYPE=$4
WERROR=$5
SB=$6
. "$(dirname "$0")/common.sh"

PORT="$BUILD/portable"
JOBS=$(nproc 2>/dev/null || echo 2)
# the golden tests that need only the float library: task data against the reference's
# vectors, ten training updates against PyTorch, 1 vs 2 threads for every model, the CLI's
# JSON and the configuration hashes
GOLDEN="test_rng test_grammar test_sequence test_assembly test_batch test_trajectory
test_every_model test_cli_json test_hashes"

t0=$(date +%s)
if ! cmake -S "$SRC" -B "$PORT" -DCMAKE_C_COMPILER="$CC_PATH" -DCMAKE_BUILD_TYPE="$TYPE" \
  -DSB_NATIVE=OFF -DSB_ONEDNN=OFF -DSB_SANITIZE=OFF -DSB_BUILD_TESTS=ON -DSB_WERROR="$WERROR" \
  >"$TMP/configure.log" 2>&1; then
  cat "$TMP/configure.log" >&2
  echo "FAIL: configuring the portable build" >&2
  exit 1
fi
# test_hashes is a script: it needs the CLI only
targets=$(echo "$GOLDEN" | tr ' ' '\n' | grep -v '^test_hashes$' | sed 's/^/--target /' |
  tr '\n' ' ')
# shellcheck disable=SC2086
if ! cmake --build "$PORT" -j "$JOBS" --target selectivbench $targets >"$TMP/build.log" 2>&1; then
  tail -n 40 "$TMP/build.log" >&2
  echo "FAIL: building the portable binary and golden tests" >&2
  exit 1
fi
t1=$(date +%s)
echo "portable build (SB_NATIVE=OFF, $JOBS jobs): $((t1 - t0)) s"
PSB="$PORT/selectivbench"
"$PSB" bench --help >/dev/null 2>&1 || fail "the portable selectivbench does not run"

# ---- a build without oneDNN: says so when configured, refuses what needs oneDNN -------------
checks=$((checks + 1))
grep -q "oneDNN not found or SB_ONEDNN=OFF: GEMMs use OpenBLAS alone" "$TMP/configure.log" ||
  fail "configuring without oneDNN does not say so"
for flag in "--gemm onednn" "--precision bf16"; do
  checks=$((checks + 1))
  # shellcheck disable=SC2086
  "$PSB" train --model gru --vocab 5 --amb 4 --grammar_scale True --dataset_size 64 --batch_size 16 \
    --test_size 8 --results "$TMP/no_onednn" $flag >/dev/null 2>"$TMP/err"
  rc=$?
  [ $rc -ne 0 ] && [ "$(grep -c 'error:' "$TMP/err")" -eq 1 ] &&
    grep -q "no oneDNN" "$TMP/err" ||
    fail "$flag without oneDNN: rc $rc, $(cat "$TMP/err")"
done

# ---- the golden tests in the portable build ------------------------------------------------
regex="^($(echo "$GOLDEN" | tr '\n' ' ' | sed 's/ *$//; s/ /|/g'))\$"
checks=$((checks + 1))
if ! (cd "$PORT" && ctest -R "$regex" --output-on-failure >"$TMP/ctest.log" 2>&1); then
  cat "$TMP/ctest.log" >&2
  fail "golden tests in the portable build"
fi
grep -E "tests passed|Total Test time" "$TMP/ctest.log"

# ---- native and portable binaries give the same output -------------------------------------
# same_output LABEL ARGS: both binaries exit 0 and print the same stdout, after the sed
# expression $FILTER (which removes timings) is applied to both
FILTER='s/^//'
same_output() {
  label=$1
  shift
  checks=$((checks + 1))
  "$SB" "$@" >"$TMP/native.out" 2>"$TMP/native.err" ||
    { fail "$label: native exited $?: $(cat "$TMP/native.err")"; return; }
  "$PSB" "$@" >"$TMP/portable.out" 2>"$TMP/portable.err" ||
    { fail "$label: portable exited $?: $(cat "$TMP/portable.err")"; return; }
  sed -E "$FILTER" "$TMP/native.out" >"$TMP/n"
  sed -E "$FILTER" "$TMP/portable.out" >"$TMP/p"
  [ -s "$TMP/n" ] || fail "$label: no output"
  cmp -s "$TMP/n" "$TMP/p" ||
    fail "$label: native and portable differ: $(diff "$TMP/n" "$TMP/p" | head -n 6 | cut -c1-300)"
}

# (a) task data
same_output "grammar --json (paper)" grammar --json
same_output "grammar --json (small)" grammar --vocab 9 --amb 5 --amb_depth 4 --seed 3 --json
task2="--vocab 12 --amb 3 --amb_depth 4 --train_seqlen_max 60 --dataset_size 3000
--train_gap_max 1.0 --train_noise 0.2 --grammar_gap True --gap_prob 0.5 --gap_start 5"
FILTER='s/ in [0-9.]+ s .*$//' # "checksum H  split train: ... symbols in 0.01 s (rates, threads)"
# shellcheck disable=SC2086
same_output "data --checksum" data $task2 --checksum --threads 1
grep -q '^checksum [0-9a-f]' "$TMP/n" || fail "data --checksum: no checksum line: $(cat "$TMP/n")"
FILTER='s/^//'
# shellcheck disable=SC2086
same_output "data --samples --json" data $task2 --samples 0-40 --json
# shellcheck disable=SC2086
same_output "data --samples --json (test split)" data $task2 --split test --samples 0-20 --json
small_task="--vocab 9 --amb 8 --amb_depth 4 --train_seqlen_max 30 --test_seqlen_max 30
--dataset_size 300 --test_size 40 --train_gap_max 0.5 --train_noise 0.2"
FILTER='s/"seconds":[^,}]*//g'
# shellcheck disable=SC2086
same_output "ceiling --json" ceiling $small_task --json --threads 1
FILTER='s/^//'

# (b) every registered model trains to the same weights
models=$("$SB" train --model nosuch 2>&1 | sed -n 's/.*available: //p' | tr -d ',')
[ -n "$models" ] || fail "no model list in the unknown-model error"
# the run's metrics, without the timings and the checkpoint's path
metrics() {
  sed 's/"tokens_per_s":[^,]*,//; s/"wall_s":[^,]*,//; s/"checkpoint":"[^"]*",//' "$1"
}
for m in $models; do
  for side in native portable; do
    bin=$SB
    [ "$side" = portable ] && bin=$PSB
    "$bin" train --model "$m" --vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 12 \
      --test_seqlen_max 12 --dataset_size 64 --test_size 16 --batch_size 16 --feat_size 32 \
      --layers 2 --epoch_size 64 --seed 7 --threads 1 --gemm openblas --results "$TMP/$side" --json \
      >"$TMP/$side.json" 2>"$TMP/$side.err" || fail "train --model $m ($side): $(cat "$TMP/$side.err")"
  done
  checks=$((checks + 1))
  [ "$(metrics "$TMP/native.json")" = "$(metrics "$TMP/portable.json")" ] ||
    fail "train --model $m: metrics differ: $(metrics "$TMP/native.json") / $(metrics "$TMP/portable.json")"
  ck_n=$(grep -o '"checkpoint":"[^"]*"' "$TMP/native.json" | cut -d'"' -f4)
  ck_p=$(grep -o '"checkpoint":"[^"]*"' "$TMP/portable.json" | cut -d'"' -f4)
  checks=$((checks + 1))
  [ -s "$ck_n" ] && cmp -s "$ck_n" "$ck_p" || fail "train --model $m: the weights differ"
done

echo "$checks portable checks, $failures failures ($(($(date +%s) - t0)) s)"
[ "$failures" -eq 0 ]

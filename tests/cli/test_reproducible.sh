#!/bin/sh
# test_reproducible.sh - the same command gives the same bits under the default settings
# (issue 34, item 3; docs/training.md, "Reproducibility"):
#   - one `train` command (default engine table and threads) run twice, while another
#     selectivbench process trains beside it, writes byte-identical weights and optimiser
#     state and stores the same metrics, threads, engine table and fingerprint; the model is
#     wide enough that oneDNN computes its large products (the default table sends products
#     of 16 MFLOP and more there: 32 samples x 64 frames x 64 x 64 x 2 is 16.8 MFLOP);
#   - the run interrupted (SIGTERM after its first evaluation) and resumed with the printed
#     command finishes byte-identical to the uninterrupted one;
#   - `eval` of the checkpoint gives the run's own test metrics;
#   - nothing is written to the cache folder ($XDG_CACHE_HOME/selectivbench): no measurement
#     decides how a run computes.
#
# usage: test_reproducible.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"
export XDG_CACHE_HOME="$TMP/cache"

# 12 updates of 32 samples, three evaluations; no --gemm, no --threads: the defaults
flags="--model gla --vocab 9 --amb 8 --grammar_scale True --train_seqlen_max 64 \
--test_seqlen_max 64 --dataset_size 384 --test_size 32 --batch_size 32 --test_bs 32 \
--feat_size 64 --layers 2 --epoch_size 128"

# a neighbour: another run training all along (a sweep worker, a test suite beside us)
neighbour() {
  while :; do
    "$SB" train --model transformer --vocab 9 --amb 8 --grammar_scale True --dataset_size 2000 \
      --train_seqlen_max 64 --test_seqlen_max 64 --feat_size 64 --layers 2 --save_model False \
      --results "$TMP/neighbour" --force --quiet >/dev/null 2>&1
  done
}
neighbour &
npid=$!
stop_neighbour() {
  kill $npid 2>/dev/null
  pkill -f -- "--results $TMP/neighbour" 2>/dev/null
  wait $npid 2>/dev/null
}
trap 'stop_neighbour; rm -rf "$TMP"' EXIT

same_files() { # DIR_A DIR_B: weights and optimiser state byte for byte
  cmp -s "$1/w.safetensors" "$2/w.safetensors" && cmp -s "$1/w.optim.safetensors" "$2/w.optim.safetensors"
}
stored() { # DIR: what the database stores of its one run
  for k in test_acc test_loss train_acc train_loss threads engine fingerprint; do
    printf '%s=%s ' "$k" "$(field "$1/selectivbench.db" $k)"
  done
}

for run in a b; do
  # shellcheck disable=SC2086
  "$SB" train $flags --quiet --results "$TMP/$run" --ckpt "$TMP/$run/w.safetensors" >"$TMP/$run.out" 2>&1 ||
    fail "run $run failed: $(cat "$TMP/$run.out")"
done
same_files "$TMP/a" "$TMP/b" || fail "the same command twice beside a neighbour: the weights differ"
[ "$(stored "$TMP/a")" = "$(stored "$TMP/b")" ] ||
  fail "the same command twice: stored $(stored "$TMP/a") / $(stored "$TMP/b")"
case "$(stored "$TMP/a")" in
*"engine=auto-1 "* | *"engine=openblas "*) ;; # openblas: a build without oneDNN
*) fail "the default run records engine table '$(field "$TMP/a/selectivbench.db" engine)'" ;;
esac
[ "$(field "$TMP/a/selectivbench.db" threads)" -ge 1 ] 2>/dev/null || fail "no thread count stored"

# ---- interrupted after its first evaluation, then resumed: the same bits -----------------------
# shellcheck disable=SC2086
"$SB" train $flags --results "$TMP/c" --ckpt "$TMP/c/w.safetensors" --progress_every 1 \
  >"$TMP/c.out" 2>"$TMP/c.err" &
pid=$!
has_ckpt() { [ -f "$TMP/c/w.optim.safetensors" ]; }
poll has_ckpt
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 75 ]; then
  resume=$(sed -n 's/.*; resume with: //p' "$TMP/c.err")
  sh -c "$resume" >"$TMP/c2.out" 2>&1 || fail "the resume failed: $(cat "$TMP/c2.out")"
  grep -q "resuming at update [1-9]" "$TMP/c2.out" || fail "not resumed: $(head -n 3 "$TMP/c2.out")"
  grep -q "not bit-identical" "$TMP/c2.out" && fail "the resume reports another fingerprint"
elif [ $rc -ne 0 ]; then
  fail "the interrupted run exited $rc: $(cat "$TMP/c.err")"
fi # 0: it finished before the signal came, nothing to resume
same_files "$TMP/a" "$TMP/c" || fail "interrupted and resumed: the weights differ from the uninterrupted run's"
[ "$(stored "$TMP/a")" = "$(stored "$TMP/c")" ] ||
  fail "interrupted and resumed: stored $(stored "$TMP/c"), uninterrupted $(stored "$TMP/a")"

# ---- eval gives the run's own test numbers -------------------------------------------------
expect_ok eval "$TMP/a/w.safetensors" --json
acc=$(sed -n 's/.*"test_acc": *\([0-9.e-]*\).*/\1/p' "$TMP/out")
[ -n "$acc" ] && awk -v a="$acc" -v b="$(field "$TMP/a/selectivbench.db" test_acc)" \
  'BEGIN { exit !(a == b) }' || fail "eval's test_acc $acc, the run's $(field "$TMP/a/selectivbench.db" test_acc)"

[ ! -e "$XDG_CACHE_HOME/selectivbench" ] || fail "something was written to the cache folder: $(ls "$XDG_CACHE_HOME/selectivbench")"

stop_neighbour
echo "reproducibility checks done, $failures failures"
[ "$failures" -eq 0 ]

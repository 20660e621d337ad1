#!/bin/sh
# sweep_by_seed.sh - a sweep file whose runs train at one test gap and are evaluated at
# others (configs/claims/mixing_prereg.yaml: test_dur 1.0 trains, 2.0 and 5.0 evaluate the
# saved weights), run one seed at a time: the seed's trainings first (--filter test_dur=T),
# then its evaluations. A seed is complete when both passes end, so a run stopped between
# seeds leaves only complete seeds behind, and one worker never trains weights another is
# still training.
#
# usage: tools/sweep_by_seed.sh FILE RESULTS TRAIN_TEST_DUR SEED... (nice 19, one worker of
#        one thread: run two of these with different seeds on a two-core machine)
set -eu
[ $# -ge 4 ] || {
  echo "usage: $0 FILE RESULTS TRAIN_TEST_DUR SEED..." >&2
  exit 2
}
SB=${SB:-$(dirname "$0")/../build/selectivbench}
file=$1 results=$2 dur=$3
shift 3
for seed in "$@"; do
  echo "== seed $seed: trainings ($(date +%T))"
  nice -n 19 "$SB" sweep "$file" --workers 1 --threads 1 --results "$results" \
    --filter "seed=$seed" --filter "test_dur=$dur" --quiet
  echo "== seed $seed: evaluations ($(date +%T))"
  nice -n 19 "$SB" sweep "$file" --workers 1 --threads 1 --results "$results" \
    --filter "seed=$seed" --quiet
  echo "== seed $seed: complete ($(date +%T))"
done

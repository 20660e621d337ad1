#!/bin/sh
# gemm_survey.sh - builds bench/gemm_survey.c against build/libselectivbench.a and runs it:
# each engine's GFLOP/s at the models' product shapes and the engine the default table gives
# (docs/performance.md, "Which engine computes a product").
# usage: bench/gemm_survey.sh [THREADS]   (after ./run.sh build; default 2 threads)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
lib=$here/build/libselectivbench.a
[ -f "$lib" ] || { echo "gemm_survey.sh: no $lib (./run.sh build first)" >&2; exit 2; }
exe=$(mktemp)
trap 'rm -f "$exe"' EXIT
# shellcheck disable=SC2046
cc -O2 -fopenmp -I"$here/src" -I"$here/include" $(pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-openmp) \
  "$here/bench/gemm_survey.c" "$lib" -o "$exe" -lopenblas -ldnnl -ljansson -lm
"$exe" "${1:-2}"

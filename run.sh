#!/bin/sh
# selectivbench: one entry point for the README commands and for developers.
#
#   ./run.sh demo     install what is missing, build, run `selectivbench demo`
#   ./run.sh test     install what is missing, build, run the whole test suite
#   ./run.sh test-torch  build, run the PyTorch round trip (ctest -L torch; skipped, with
#                     one line, without python3-torch)
#   ./run.sh asan     the test suite under AddressSanitizer + UBSan (build-asan/)
#   ./run.sh clang    build with clang, warnings as errors (build-clang/; needs clang)
#   ./run.sh bench    the benchmarks (selectivbench bench data)
#   ./run.sh build    install what is missing and build (build/selectivbench)
#   ./run.sh fmt      clang-format every C source
set -eu
cd "$(dirname "$0")"

JOBS=$(nproc 2>/dev/null || echo 2)

build() {
  # $1: build folder, then extra cmake flags
  dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  demo)
    scripts/install-deps.sh
    build build
    exec ./build/selectivbench demo "$@"
    ;;
  test)
    scripts/install-deps.sh
    build build -DSB_WERROR=ON
    cd build && exec ctest --output-on-failure "$@"
    ;;
  test-torch)
    scripts/install-deps.sh
    build build -DSB_WERROR=ON
    cd build && exec ctest -L torch -V "$@"
    ;;
  asan)
    scripts/install-deps.sh
    build build-asan -DSB_WERROR=ON -DSB_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    supp="$PWD/tests/lsan.supp"
    cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$supp" \
      exec ctest --output-on-failure "$@"
    ;;
  clang)
    scripts/install-deps.sh
    CC=clang
    export CC
    build build-clang -DSB_WERROR=ON
    ;;
  bench)
    scripts/install-deps.sh
    build build
    exec ./build/selectivbench bench data "$@"
    ;;
  build)
    scripts/install-deps.sh
    build build "$@"
    ;;
  fmt)
    exec clang-format -i $(find src include tests bench -name '*.[ch]' 2>/dev/null)
    ;;
  *)
    echo "usage: ./run.sh demo|test|test-torch|asan|clang|bench|build|fmt" >&2
    exit 2
    ;;
esac

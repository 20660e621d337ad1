#!/bin/sh
# selectivbench: one entry point for the README commands and for developers.
#
#   ./run.sh demo     install what is missing, build, run `selectivbench demo`
#   ./run.sh test     install what is missing (chromium included, for the dashboard's
#                     browser test), build, run the whole test suite
#   ./run.sh test-torch  build, run the PyTorch round trip (ctest -L torch; skipped, with
#                     one line, without python3-torch)
#   ./run.sh asan     the test suite under AddressSanitizer + UBSan (build-asan/)
#   ./run.sh clang    build with clang, warnings as errors (build-clang/; installs clang)
#   ./run.sh fuzz [S] every libFuzzer target of tests/fuzz/ for S seconds (default 60), with
#                     ASan + UBSan (build-fuzz/; installs clang; findings in build-fuzz/crashes/)
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
    scripts/install-deps.sh test
    build build -DSB_WERROR=ON
    cd build && exec ctest --output-on-failure "$@"
    ;;
  test-torch)
    scripts/install-deps.sh
    build build -DSB_WERROR=ON
    cd build && exec ctest -L torch -V "$@"
    ;;
  asan)
    scripts/install-deps.sh test
    build build-asan -DSB_WERROR=ON -DSB_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    supp="$PWD/tests/lsan.supp"
    cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$supp" \
      exec ctest -j "$JOBS" --output-on-failure "$@"
    ;;
  clang)
    scripts/install-deps.sh clang
    CC=clang
    export CC
    build build-clang -DSB_WERROR=ON
    ;;
  fuzz)
    seconds=${1:-60}
    case "$seconds" in
      '' | *[!0-9]* | 0)
        echo "usage: ./run.sh fuzz [SECONDS]: SECONDS per target, a positive integer" >&2
        exit 2
        ;;
    esac
    scripts/install-deps.sh fuzz
    # libFuzzer is clang's (Debian's clang-14 and libclang-rt-14-dev)
    CC=$(command -v clang-14 || command -v clang || echo clang)
    export CC
    cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_FUZZ=ON -DSB_BUILD_TESTS=OFF \
      -DSB_NATIVE=OFF -DSB_WERROR=ON >/dev/null
    cmake --build build-fuzz -j "$JOBS" --target fuzz
    exec tests/fuzz/run_fuzz.sh build-fuzz "$seconds"
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
    echo "usage: ./run.sh demo|test|test-torch|asan|clang|fuzz [SECONDS]|bench|build|fmt" >&2
    exit 2
    ;;
esac

#!/bin/sh
# selectivbench: one entry point for the README commands and for developers.
#
#   ./run.sh demo     install what is missing, build, run `selectivbench demo`
#   ./run.sh test     install what is missing (chromium included, for the dashboard's
#                     browser test), build, run the whole test suite
#   ./run.sh install [PREFIX]  build, then install selectivbench, the library, its header,
#                     pkg-config and CMake files under PREFIX (default: /usr/local as root,
#                     ~/.local for a user), and say whether PREFIX/bin is on PATH
#   ./run.sh test-torch  build, run the PyTorch round trip (ctest -L torch; skipped, with
#                     one line, without python3-torch)
#   ./run.sh test-cluster  install slurm-wlm and munge, build, run sweep --slurm's job
#                     array on a real single-node Slurm that the test starts and stops
#                     (tests/cluster/test_slurm_real.sh; root or sudo, about 5 minutes)
#   ./run.sh asan     the test suite under AddressSanitizer + UBSan (build-asan/)
#   ./run.sh clang    build with clang, warnings as errors (build-clang/; installs clang)
#   ./run.sh fuzz [S] every libFuzzer target of tests/fuzz/ for S seconds (default 60), with
#                     ASan + UBSan (build-fuzz/; installs clang; findings in build-fuzz/crashes/)
#   ./run.sh bench    the benchmarks (selectivbench bench data)
#   ./run.sh build    install what is missing and build (build/selectivbench)
#   ./run.sh fmt      clang-format every C source
#
# Every build prints one line (what it compiled, how long it took, where its log is) and,
# when it fails, the error lines of its log and a non-zero exit.
set -eu
USER_DIR=$PWD # where the user ran us: a relative install PREFIX is taken from there
cd "$(dirname "$0")"

JOBS=$(nproc 2>/dev/null || echo 2)

# demo, test, test-torch, bench, build and install share build/ and configure it with the
# same flags, so that whichever runs second compiles nothing again. Warnings are errors
# there too: the sources compile without a warning with Debian 12's gcc (the one platform
# this project supports, and what CI builds with), so -Werror costs a user nothing, and a
# flag that differed between demo and test would recompile every object.
MAIN_FLAGS="-DCMAKE_BUILD_TYPE=Release -DSB_WERROR=ON"

# build DIR [CMAKE FLAGS...]: configures and builds DIR (the target in $BUILD_TARGET, or
# all), the compiler's output in DIR/build.log. Prints one line; on failure the errors.
build() {
  dir=$1
  shift
  mkdir -p "$dir"
  log=$dir/build.log
  start=$(date +%s)
  printf 'selectivbench: building %s/ ... ' "$dir"
  if ! cmake -S . -B "$dir" "$@" >"$log" 2>&1; then
    build_failed "configuring $dir/" "$log" "$start"
  fi
  # shellcheck disable=SC2086
  if ! cmake --build "$dir" -j "$JOBS" ${BUILD_TARGET:+--target $BUILD_TARGET} >>"$log" 2>&1; then
    build_failed "building $dir/" "$log" "$start"
  fi
  compiled=$(grep -c 'Building C object' "$log" || true)
  total=$(grep -c '"file":' "$dir/compile_commands.json" 2>/dev/null) || total="?"
  if [ "$compiled" -eq 0 ]; then
    echo "up to date, nothing compiled ($(($(date +%s) - start)) s; log: $log)"
  else
    echo "compiled $compiled of $total objects in $(($(date +%s) - start)) s (log: $log)"
  fi
}

# build_failed WHAT LOG START: the error lines of the log (with the lines that follow each,
# where the compiler shows the source), or its tail when none is marked; exits 1.
build_failed() {
  echo "failed after $(($(date +%s) - $3)) s"
  echo "selectivbench: error: $1 failed; the errors (whole log: $2):" >&2
  if grep -q -E 'error:|Error:|CMake Error|undefined reference' "$2"; then
    grep -E -A 3 'error:|Error:|CMake Error|undefined reference' "$2" | head -n 60 >&2
  else
    tail -n 30 "$2" >&2
  fi
  exit 1
}

# install_to PREFIX: cmake --install of build/, one line, and how to reach PREFIX/bin.
install_to() {
  prefix=$1
  log=build/install.log
  if ! cmake --install build --prefix "$prefix" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "selectivbench: error: installing into $prefix failed (log: $log); as a user," \
      "install into a folder you own: ./run.sh install ~/.local" >&2
    exit 1
  fi
  # the library's users find libselectivbench.so through the loader's cache
  if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null 2>&1; then
    ldconfig || true
  fi
  echo "selectivbench: installed $prefix/bin/selectivbench, and the library, its header," \
    "pkg-config and CMake files under $prefix (list: build/install_manifest.txt)"
  case ":$PATH:" in
    *":$prefix/bin:"*)
      found=$(command -v selectivbench || true)
      if [ "$found" != "$prefix/bin/selectivbench" ]; then
        echo "selectivbench: note: $found comes first on PATH; run $prefix/bin/selectivbench" \
          "or put $prefix/bin earlier in PATH"
      fi
      ;;
    *)
      echo "selectivbench: note: $prefix/bin is not on your PATH; add it with"
      echo "    export PATH=\"$prefix/bin:\$PATH\""
      echo "  (and add that line to ~/.profile to keep it in new shells)"
      ;;
  esac
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  demo)
    scripts/install-deps.sh
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS
    exec ./build/selectivbench demo "$@"
    ;;
  test)
    scripts/install-deps.sh test
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS
    # one test per core, as the sanitized suite runs (the tests share no files or ports)
    cd build && exec ctest -j "$JOBS" --output-on-failure "$@"
    ;;
  test-torch)
    scripts/install-deps.sh
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS
    cd build && exec ctest -L torch -V "$@"
    ;;
  test-cluster)
    scripts/install-deps.sh cluster
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS
    # Slurm's own time-limit warning too (part 3: a few requeues of a one-minute limit)
    rc=0
    SB_CLUSTER_TIMELIMIT=${SB_CLUSTER_TIMELIMIT-1} tests/cluster/test_slurm_real.sh \
      build/selectivbench . || rc=$?
    [ "$rc" -eq 77 ] && exit 0 # skipped: its one line says why
    exit "$rc"
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
    BUILD_TARGET=fuzz build build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_FUZZ=ON \
      -DSB_BUILD_TESTS=OFF -DSB_NATIVE=OFF -DSB_WERROR=ON
    exec tests/fuzz/run_fuzz.sh build-fuzz "$seconds"
    ;;
  bench)
    scripts/install-deps.sh
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS
    exec ./build/selectivbench bench data "$@"
    ;;
  build)
    scripts/install-deps.sh
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS "$@"
    ;;
  install)
    if [ $# -gt 1 ]; then
      echo "usage: ./run.sh install [PREFIX]: PREFIX defaults to /usr/local as root, ~/.local" \
        "for a user" >&2
      exit 2
    fi
    if [ $# -eq 1 ]; then
      case "$1" in
        /*) prefix=$1 ;;
        *) prefix=$USER_DIR/$1 ;;
      esac
      [ "$prefix" = / ] || prefix=${prefix%/}
    elif [ "$(id -u)" -eq 0 ]; then
      prefix=/usr/local
    else
      prefix=$HOME/.local
    fi
    scripts/install-deps.sh
    # shellcheck disable=SC2086
    build build $MAIN_FLAGS
    install_to "$prefix"
    ;;
  fmt)
    exec clang-format -i $(find src include tests bench -name '*.[ch]' 2>/dev/null)
    ;;
  *)
    echo "usage: ./run.sh demo|test|install [PREFIX]|test-torch|test-cluster|asan|clang|fuzz [SECONDS]|bench|build|fmt" >&2
    exit 2
    ;;
esac

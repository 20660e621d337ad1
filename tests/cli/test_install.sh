#!/bin/sh
# The installed library: `cmake --install` into a temporary prefix, the example built against
# the installed copy with pkg-config (nothing from the source tree), run, its output checked;
# the .so's soname and exported symbols (exactly the public header's functions); the include
# folder holding only the public header; the CMake package found by find_package.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -u
build=${1:?usage: test_install.sh BUILD_DIR SOURCE_DIR}
src=$(cd "${2:?usage: test_install.sh BUILD_DIR SOURCE_DIR}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...: runs the command, reports a failure
  what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log"
  echo "FAIL: cmake --install"
  exit 1
}
libdir=$(dirname "$(find "$prefix" -name 'libselectivbench.so' | head -n 1)")
[ -n "$libdir" ] && [ -f "$libdir/pkgconfig/selectivbench.pc" ] || {
  echo "FAIL: no libselectivbench.so with pkgconfig/selectivbench.pc beside it under $prefix"
  find "$prefix"
  exit 1
}
check "the static library is installed" test -f "$libdir/libselectivbench.a"
check "the selectivbench binary is installed" test -x "$prefix/bin/selectivbench"
check "the CMake package files are installed" test -f "$libdir/cmake/selectivbench/selectivbenchConfig.cmake" \
  -a -f "$libdir/cmake/selectivbench/selectivbenchConfigVersion.cmake"
headers=$(cd "$prefix/include" && find . -type f | sort)
check "the include folder holds only selectivbench/selectivbench.h (found: $headers)" \
  test "$headers" = "./selectivbench/selectivbench.h"

# the soname: libselectivbench.so.MAJOR
if command -v readelf >/dev/null 2>&1; then
  soname=$(readelf -d "$libdir/libselectivbench.so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
  major=$(sed -n 's/^#define SB_VERSION_MAJOR \([0-9]*\).*/\1/p' "$prefix/include/selectivbench/selectivbench.h")
  check "soname $soname is libselectivbench.so.$major" test "$soname" = "libselectivbench.so.$major"
else
  echo "skip: no readelf (binutils) for the soname"
fi
# the exported functions are exactly those of the public header (the version script)
if command -v nm >/dev/null 2>&1; then
  grep -oE '\bsb_[a-z0-9_]+\(' "$prefix/include/selectivbench/selectivbench.h" | tr -d '(' |
    sort -u >"$tmp/declared"
  nm -D --defined-only "$libdir/libselectivbench.so" | awk '$2 == "T" {print $3}' |
    sed 's/@.*//' | sort -u >"$tmp/exported"
  check "the .so exports exactly the public header's functions" diff "$tmp/declared" "$tmp/exported"
else
  echo "skip: no nm (binutils) for the exported symbols"
fi

# A sanitizer build (SB_SANITIZE) makes a .so that needs the sanitizer runtimes, which must
# come first in a process: preload them for the programs below (the CLI and tests link them).
if command -v ldd >/dev/null 2>&1; then
  preload=$(ldd "$libdir/libselectivbench.so" | awk '/lib(asan|ubsan)\.so/ {printf "%s ", $3}')
  [ -n "$preload" ] && echo "sanitizer build: the programs run with LD_PRELOAD=$preload"
fi
run_prog() { # run_prog PROGRAM ARGS...: with the sanitizer runtimes preloaded when needed
  if [ -n "${preload:-}" ]; then
    LD_PRELOAD="$preload" ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$@"
  else
    "$@"
  fi
}

# the command line tool as installed: it runs from the prefix, away from the source tree, and
# found on PATH its hints name it as `selectivbench` (the program as it was run)
version=$(sed -n 's/^#define SB_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
  "$prefix/include/selectivbench/selectivbench.h" | paste -sd. -)
out=$(cd "$tmp" && "$prefix/bin/selectivbench" --version 2>&1)
check "the installed selectivbench --version prints 'selectivbench $version' (got: $out)" \
  test "$out" = "selectivbench $version"
out=$(cd "$tmp" && OMP_WAIT_POLICY=PASSIVE "$prefix/bin/selectivbench" models 2>&1)
check "the installed selectivbench models lists the models and the taxonomy" \
  sh -c 'echo "$1" | grep -q "^  transformer " && echo "$1" | grep -q "^Taxonomy"' _ "$out"
out=$(cd "$tmp" && PATH="$prefix/bin:$PATH" selectivbench frobnicate 2>&1)
check "on PATH, its hints say 'selectivbench' (got: $out)" \
  sh -c 'echo "$1" | grep -q "run '"'"'selectivbench --help'"'"'\$"' _ "$out"

# the example, built against the installed copy through pkg-config only
flags=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs selectivbench) || {
  echo "FAIL: pkg-config --cflags --libs selectivbench"
  exit 1
}
echo "pkg-config: $flags"
case "$flags" in *"$src"*) echo "FAIL: the flags point into the source tree"; fail=1 ;; esac
# shellcheck disable=SC2086
# the flags alone, as the README's line uses them: their rpath finds the library at run time
if ${CC:-cc} -std=c17 -Wall -Wextra -Werror -o "$tmp/train_tiny" "$src/examples/c/train_tiny.c" \
  $flags 2>"$tmp/cc.log"; then
  echo "ok: the example builds against the installed library"
  out=$(cd "$tmp" && OMP_WAIT_POLICY=PASSIVE run_prog ./train_tiny "$tmp/results" 2>&1)
  rc=$?
  echo "$out"
  check "the example exits 0" test $rc -eq 0
  check "the example prints the batch shape" sh -c 'echo "$1" | grep -q "batch inputs \[4\]\[[0-9]*\]\[[0-9]*\]"' _ "$out"
  check "the example reports progress" sh -c 'echo "$1" | grep -q "^step .* tokens/s"' _ "$out"
  check "the example reads its run back from the database" sh -c 'echo "$1" | grep -q "database .*: run [0-9a-f]\{16\} finished, test acc 0\.[0-9]*"' _ "$out"
  check "the example links the installed .so" sh -c \
    'so=$(ldd "$1" | awk "/libselectivbench/ { print \$3 }"); [ "$(dirname "$(realpath "$so")")" = "$(realpath "$2")" ]' \
    _ "$tmp/train_tiny" "$libdir"
else
  cat "$tmp/cc.log"
  echo "FAIL: the example does not build against the installed library"
  fail=1
fi

# the CMake package: find_package(selectivbench) and the imported target
mkdir -p "$tmp/cmake_user"
cat >"$tmp/cmake_user/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(user C)
find_package(selectivbench 0.1 REQUIRED)
add_executable(version_only version_only.c)
target_link_libraries(version_only PRIVATE selectivbench::selectivbench)
CMAKE
cat >"$tmp/cmake_user/version_only.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <selectivbench/selectivbench.h>
int main(void)
{
    printf("%s\n", sb_version());
    return strcmp(sb_version(), SB_VERSION_STRING) != 0;
}
C
if cmake -S "$tmp/cmake_user" -B "$tmp/cmake_user/build" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$tmp/cmake_user.log" 2>&1 && cmake --build "$tmp/cmake_user/build" >>"$tmp/cmake_user.log" 2>&1; then
  check "a CMake project finds the package and runs against it" run_prog "$tmp/cmake_user/build/version_only"
else
  cat "$tmp/cmake_user.log"
  echo "FAIL: find_package(selectivbench) and selectivbench::selectivbench"
  fail=1
fi

[ $fail -eq 0 ] && echo "ok: install, pkg-config, soname, exports, example, CMake package"
exit $fail

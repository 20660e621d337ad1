#!/bin/sh
# test_format.sh - every C source of the project as its .clang-format says (LLVM
# base, 4 spaces, 100 columns): clang-format 14, Debian 12's, over the .c and .h files of
# src/, include/, tests/, examples/ and bench/ (another clang-format version formats some
# constructs differently, so it is skipped with one line, as is a machine without one;
# scripts/install-deps.sh test installs it). A file that differs is named with the command
# that formats it.
#
# usage: test_format.sh SOURCE_DIR
set -u
src=$1
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "skipped: clang-format not installed (scripts/install-deps.sh test installs it)"
  exit 0
fi
version=$("$cf" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
  echo "skipped: clang-format $version is not 14 (Debian 12's), whose output the tree follows"
  exit 0
fi
cd "$src" || exit 1
files=$(find src include tests examples bench \( -name '*.c' -o -name '*.h' \) -type f \
  ! -path 'tests/fuzz/corpus/*' | sort)
n=0
bad=0
for f in $files; do
  n=$((n + 1))
  if ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    bad=$((bad + 1))
    [ "$bad" -le 20 ] && echo "FAIL: $f is not formatted: $cf -i $f"
  fi
done
echo "test_format: $n files, $bad not formatted"
[ "$bad" -eq 0 ]

#!/bin/sh
# test_docs_links.sh - every .md file the repository's text names exists.
#
# Looks at the README, every docs/ page, and the sources, tests and tools (src/, include/,
# tests/ without the fuzz corpora and recorded data, tools/, examples/, scripts/, run.sh,
# CMake files): each word ending in ".md" (a Markdown link, a path in backticks, a comment,
# a string the program prints) must name a file of the repository, taken from the naming
# file's folder or from the repository root. Web addresses are not checked, nor report.md,
# the name of the file `report` writes. A citation of a document that is not shipped (such
# as the spec/*.md files the code once cited) fails with the file and line.
# usage: test_docs_links.sh SOURCE_DIR
set -u
src=$(cd "${1:?usage: test_docs_links.sh SOURCE_DIR}" && pwd)
cd "$src" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files -- "$@"; }
else
  list() { find "$@" -type f 2>/dev/null; }
fi
files=$(list README.md run.sh CMakeLists.txt docs src include tests tools examples scripts cmake |
  grep -v -e '^tests/fuzz/corpus/' -e '^tests/data/.*\.\(json\|bin\|safetensors\|txt\|csv\)$' |
  grep -E '\.(md|c|h|def|map|sh|py|txt|cmake|in|yaml|html|js|css)$|(^|/)CMakeLists\.txt$|^run\.sh$')
for f in $files; do
  [ -f "$f" ] || continue
  dir=$(dirname "$f")
  # "file:line:word" for every word ending in .md, without web addresses
  grep -n -o -E '[A-Za-z0-9_./~:-]*[A-Za-z0-9_-]\.md\b' "$f" | while IFS=: read -r line word rest; do
    [ -n "$rest" ] && continue # a word with a colon: a web address (https://...) or similar
    case "$word" in
      *//*) continue ;;
      report.md | */report.md) continue ;; # the report's own output file
    esac
    path=${word#./}
    # an absolute path in a CMake file: ${CMAKE_SOURCE_DIR}/docs/... reads as /docs/...
    [ -e "$path" ] || path=${path#/}
    if [ ! -e "$dir/$path" ] && [ ! -e "$path" ]; then
      echo "FAIL: $f:$line names $word, which is not in the repository"
    fi
  done
done >"${TMPDIR:-/tmp}/docs_links.$$"
missing=$(grep -c '^FAIL' "${TMPDIR:-/tmp}/docs_links.$$")
cat "${TMPDIR:-/tmp}/docs_links.$$"
rm -f "${TMPDIR:-/tmp}/docs_links.$$"
n_files=$(echo "$files" | wc -l)
if [ "$missing" -gt 0 ]; then
  echo "FAIL: $missing citation(s) of .md files the repository does not have (in $n_files files)"
  exit 1
fi
echo "ok: every .md file named in $n_files files exists"

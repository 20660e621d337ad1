#!/bin/sh
# test_claims_docs.sh - the verdicts docs/claims.md shows are the ones `report --claims`
# computes from the committed databases, never typed in (issue 18).
#
# docs/claims.md marks each checked block with a line `<!-- claims-check -->`, then a line
# `` `selectivbench report ARGS` `` (ARGS: a database under docs/claims/ and its --claims
# flags), then the finding lines ("- gating, holds: ...") exactly as that command prints
# them. This test runs each command and compares the lines both ways; a database or slice
# whose numbers changed fails until the page is updated.
#
# usage: test_claims_docs.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

page="${SRC}/docs/claims.md"
[ -f "$page" ] || { echo "FAIL: no $page"; exit 1; }
# one file per block: its command's arguments on the first line, its finding lines after
awk -v dir="$TMP" '
  /^<!-- claims-check -->$/ { want = 1; next }
  want == 1 && /^`selectivbench report .*`$/ {
    n++; f = dir "/block" n; sub(/^`selectivbench report /, ""); sub(/`$/, "");
    print > f; want = 2; next
  }
  want == 1 && NF > 0 { print "malformed block after a claims-check marker: " $0 > (dir "/malformed"); want = 0 }
  want == 2 && /^- / { print >> f; next }
  want == 2 && NF > 0 { want = 0 }
' "$page"
[ -f "$TMP/malformed" ] && fail "$(cat "$TMP/malformed")"
blocks=0
for b in "$TMP"/block*; do
  [ -f "$b" ] || continue
  blocks=$((blocks + 1))
  args=$(head -n 1 "$b")
  tail -n +2 "$b" >"$TMP/documented"
  # shellcheck disable=SC2086
  (cd "$SRC" && "$SB" report $args) >"$TMP/report" 2>&1 || fail "report $args: $(cat "$TMP/report")"
  grep '^- ' "$TMP/report" >"$TMP/computed"
  [ -s "$TMP/documented" ] || fail "docs/claims.md: no finding lines under 'selectivbench report $args'"
  diff -u "$TMP/documented" "$TMP/computed" >"$TMP/diff" ||
    fail "docs/claims.md differs from 'selectivbench report $args': $(cat "$TMP/diff")"
done
[ "$blocks" -ge 3 ] || fail "docs/claims.md: $blocks checked blocks, expected at least 3"
echo "claims docs: $blocks blocks checked, $failures failures"
[ "$failures" -eq 0 ]

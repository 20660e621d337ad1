#!/bin/sh
# test_merge.sh - `results merge`: the shard databases of `sweep --shard i/N` merged into one
# hold exactly the runs of the unsharded sweep (the same hashes, statuses and metrics); a
# second merge adds nothing; a results folder stands for its database; bad input is one
# error line and a non-zero exit. (The rules run by run are tests/unit/test_results.c's
# test_merge.)
#
# usage: test_merge.sh PATH/TO/selectivbench SOURCE_DIR
set -u
SB=$1
SRC=$2
. "$(dirname "$0")/common.sh"

yaml="$SRC/tests/data/sweeps/tiny.yaml"
"$SB" sweep "$yaml" --threads 1 --quiet --results "$TMP/all" >"$TMP/all.out" 2>&1 ||
  fail "the unsharded sweep failed: $(cat "$TMP/all.out")"
for i in 0 1 2; do
  "$SB" sweep "$yaml" --shard "$i/3" --threads 1 --quiet --results "$TMP/s$i" >"$TMP/s$i.out" 2>&1 ||
    fail "shard $i/3 failed: $(cat "$TMP/s$i.out")"
done

# the runs as "hash status test_acc test_loss", sorted
runs_of() {
  "$SB" results --db "$1" --json | grep -o '"hash":"[0-9a-f]*","status":"[a-z]*"\|"test_acc":[^,]*,"test_loss":[^,]*' |
    paste -d' ' - - | sort
}
expect_ok results merge "$TMP/s0" "$TMP/s1/selectivbench.db" "$TMP/s2" --db "$TMP/merged.db"
[ "$(grep -c '^merged .* into .*: [0-9]* added' "$TMP/out")" -eq 3 ] || fail "merge: one line per source: $(cat "$TMP/out")"
[ "$(runs_of "$TMP/merged.db")" = "$(runs_of "$TMP/all/selectivbench.db")" ] ||
  fail "the merged shards differ from the unsharded sweep: $(runs_of "$TMP/merged.db") vs $(runs_of "$TMP/all/selectivbench.db")"
[ -n "$(runs_of "$TMP/merged.db")" ] || fail "the merged database has no runs"

# twice: nothing added, nothing replaced
expect_ok results merge "$TMP/s0" "$TMP/s1" "$TMP/s2" --db "$TMP/merged.db"
grep -v -q ': 0 added, 0 replaced' "$TMP/out" && fail "a second merge changed something: $(cat "$TMP/out")"
"$SB" results --db "$TMP/merged.db" --check | grep -q ": ok$" || fail "integrity check after merging"
# the unsharded sweep's database merged in: every run already there
expect_ok results merge "$TMP/all" --db "$TMP/merged.db"
grep -q ': 0 added, 0 replaced (further along there), [1-9][0-9]* already there, 0 kept (further along here), 0 conflicting' "$TMP/out" ||
  fail "merging the unsharded database: $(cat "$TMP/out")"

# bad input
expect_error 2 "give the databases to merge" results merge --db "$TMP/x.db"
expect_error 2 "give the databases to merge" results merge "$TMP/s0"
expect_error 2 "is the database merged into" results merge "$TMP/merged.db" --db "$TMP/merged.db"
expect_error 1 "cannot read results database" results merge "$TMP/missing.db" --db "$TMP/merged.db"
echo "not a database" >"$TMP/junk.db"
expect_error 1 "is not a SQLite database" results merge "$TMP/junk.db" --db "$TMP/merged.db"

echo "merge checks done, $failures failures"
[ "$failures" -eq 0 ]

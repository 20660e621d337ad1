# common.sh - what the CLI test scripts share, sourced after setting SB (the binary):
# a temporary folder $TMP removed on exit, the failure and check counters, and
#   fail MESSAGE                      count a failure and print it
#   expect_error EXIT_CODE NEEDLE ARGS: the command must exit with EXIT_CODE and print
#                                     exactly one stderr line, starting with "selectivbench"
#                                     and containing NEEDLE
#   expect_ok ARGS                    exit 0; stdout kept in $TMP/out, stderr in $TMP/err
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
checks=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

expect_error() {
  want=$1
  needle=$2
  shift 2
  checks=$((checks + 1))
  "$SB" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  lines=$(wc -l <"$TMP/err")
  if [ "$rc" -ne "$want" ]; then
    fail "'$*' exited $rc, expected $want (stderr: $(cat "$TMP/err"))"
  elif [ "$lines" -ne 1 ]; then
    fail "'$*' printed $lines lines on stderr, expected 1: $(cat "$TMP/err")"
  elif ! grep -q "^selectivbench" "$TMP/err"; then
    fail "'$*': error line does not start with 'selectivbench': $(cat "$TMP/err")"
  elif ! grep -q -- "$needle" "$TMP/err"; then
    fail "'$*': error line does not mention '$needle': $(cat "$TMP/err")"
  fi
}

expect_ok() {
  checks=$((checks + 1))
  "$SB" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq 0 ] || fail "'$*' exited $rc: $(cat "$TMP/err")"
}

# ---- runs in the background: polling and the stored fields ---------------------------------

# poll CMD...: runs the command every 0.1 s until it succeeds, for at most a minute.
poll() {
  i=0
  while [ $i -lt 600 ]; do
    "$@" && return 0
    sleep 0.1
    i=$((i + 1))
  done
  fail "timed out waiting for: $*"
  return 1
}

# has_eval FILE: train's output FILE has an evaluation line (its checkpoint follows).
has_eval() {
  grep -q '^  step [0-9]*/[0-9]* (' "$1" 2>/dev/null
}

# field DB KEY: KEY's values of every run of database DB, one per line ("status" ->
# finished, ...).
field() {
  "$SB" results --db "$1" --json 2>/dev/null | grep -o "\"$2\":[^,}]*" | sed 's/^[^:]*://; s/"//g'
}

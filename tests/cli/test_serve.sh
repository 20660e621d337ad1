#!/bin/bash
# test_serve.sh - `selectivbench serve` (docs/dashboard.md) without a browser, over bash's
# /dev/tcp: on a database of three tiny runs, the page and its files, /api/runs (every run,
# the keys the runs vary), /api/curve (a prefix resolves; the last test point is the run's
# test accuracy), /api/status, the figures; bad requests get 4xx and the server lives on
# (unknown paths, other methods, a 5 KB and a 100 KB query, malformed escapes, ../, a
# foreign Host, too many parameters, garbage); the database is never written; a run in
# progress shows in /api/status with its latest step, then as interrupted; SIGTERM stops the
# server with exit 0 and removes its temporary figures; bad flags are one error line.
#
# usage: test_serve.sh PATH/TO/selectivbench
set -u
SB=$1
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/serve_common.sh"

expect_code() { # expect_code WANT WHAT
  checks=$((checks + 1))
  [ "$code" = "$1" ] || fail "$2: HTTP $code, expected $1 (body: $(head -c 200 "$TMP/body"))"
}

expect_body() { # expect_body NEEDLE WHAT
  grep -qF -- "$1" "$TMP/body" || fail "$2: no '$1' in $(head -c 300 "$TMP/body")"
}

make_runs "$TMP/res"
db="$TMP/res/selectivbench.db"
db_sum_before=$(md5sum <"$db")
files_before=$(ls "$TMP/res")

mkdir -p "$TMP/tmpdir"
TMPDIR="$TMP/tmpdir" start_server --results "$TMP/res" || exit 1
grep -qx "serving $db at http://127.0.0.1:$PORT/ (Ctrl-C to stop)" "$TMP/serve.out" ||
  fail "serve's first line: $(cat "$TMP/serve.out")"

# (a) the page, embedded in the program
http GET /
expect_code 200 "GET /"
expect_body '<script src="/app.js" defer></script>' "GET /"
grep -qi '^Content-Type: text/html' "$TMP/head" || fail "GET /: $(cat "$TMP/head")"
grep -qi "^Content-Security-Policy: default-src 'self'" "$TMP/head" || fail "GET /: no CSP"
http GET /app.js
expect_code 200 "GET /app.js"
expect_body 'function drawCurves' "GET /app.js"
grep -qi '^Content-Type: text/javascript' "$TMP/head" || fail "GET /app.js: $(cat "$TMP/head")"
http GET /style.css
expect_code 200 "GET /style.css"

# (b) /api/runs: every run with its checkpoint, and the keys they vary as `results` shows
# them (the seed; not the task seed, which follows it)
http GET /api/runs
expect_code 200 "/api/runs"
for id in "$RUN_GRU1" "$RUN_GRU2" "$RUN_TF1"; do
  expect_body "{\"id\":\"$id\",\"status\":\"finished\"" "/api/runs"
done
[ "$(grep -o '"id":' "$TMP/body" | wc -l)" -eq 3 ] || fail "/api/runs: not 3 runs"
expect_body '"varied":["seed"]' "/api/runs"
expect_body "\"checkpoint\":\"$TMP/res/checkpoints/" "/api/runs"
expect_body "\"test_acc\":$ACC_GRU2," "/api/runs"
# the validation split's metrics too (the table's "valid acc" column)
[ "$(grep -o '"valid_acc":[0-9]' "$TMP/body" | wc -l)" -eq 3 ] || fail "/api/runs: not 3 validation accuracies"

# (b2) /api/groups: the groups over seeds of the runs a mask names, the very JSON `results
# --group ... --json` prints (one library rule, sb_run_table_groups): every run, the first two
# (mask 3: the gru seeds), a second group column; an unknown column and a malformed mask are
# 400 with the reason
db="$TMP/res/selectivbench.db"
same_groups() { # same_groups QUERY RESULTS_FLAGS...: the reply equals `results` JSON
  query=$1
  shift
  http GET "/api/groups?$query"
  checks=$((checks + 1))
  "$SB" results --db "$db" "$@" --json >"$TMP/groups_cli.json"
  [ "$code" = 200 ] && [ "$(cat "$TMP/body")" = "$(cat "$TMP/groups_cli.json")" ] ||
    fail "/api/groups?$query ($code): $(head -c 300 "$TMP/body"); results $*: $(head -c 300 "$TMP/groups_cli.json")"
}
same_groups "group=model" --group model
same_groups "group=model,seed" --group model,seed
same_groups "group=model&runs=7" --group model
grep -q "\"model\":\"gru\",\"n\":2,\"test_acc\"" "$TMP/body" || fail "/api/groups: no gru group of 2: $(cat "$TMP/body")"
http GET "/api/groups?group=model&runs=3"
expect_code 200 "/api/groups runs=3"
[ "$(grep -o '"model":' "$TMP/body" | wc -l)" -eq 1 ] && expect_body "\"runs\":[\"$RUN_GRU1\",\"$RUN_GRU2\"]" "/api/groups runs=3" ||
  fail "/api/groups?runs=3: not the gru group alone: $(cat "$TMP/body")"
http GET "/api/groups?group=modl"
expect_code 400 "/api/groups?group=modl"
expect_body "did you mean 'model'" "/api/groups?group=modl"
http GET "/api/groups?group=%9aodel" # not UTF-8: refused before it is quoted (fuzz_serve found it)
expect_code 400 "/api/groups?group=%9aodel"
expect_body "letters, digits and _" "/api/groups?group=%9aodel"
http GET "/api/groups?group=model&runs=1z"
expect_code 400 "/api/groups?runs=1z"
expect_body "byte 1 (0x7a) is not a hex digit" "/api/groups?runs=1z"
# a byte that is not UTF-8 in a quoted value: the reply is still JSON (fuzz_serve found it)
http GET "/api/groups?group=model&runs=%e0%23"
expect_code 400 "/api/groups?runs=%e0%23"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/body" 2>/dev/null ||
  ! command -v python3 >/dev/null || fail "/api/groups?runs=%e0%23: the reply is not JSON: $(head -c 200 "$TMP/body" | od -c | head -3)"
http GET "/api/groups?group=model&runs=ff"
expect_code 400 "/api/groups?runs=ff (runs 4-7 of 3)"
expect_body "the database has 3" "/api/groups?runs=ff"

# (c) /api/curve: a 6-digit prefix resolves; 10 evaluations, each on test and train: 4 every
# 64 samples (256 / 64: updates 4, 8, 12, 16) and 6 learning-curve points between them
# (updates 2, 5, 7, 10, 13, 15); the last test point is the run's test accuracy
http GET "/api/curve?run=${RUN_GRU1:0:6}"
expect_code 200 "/api/curve"
expect_body "\"id\":\"$RUN_GRU1\"" "/api/curve"
[ "$(grep -o '"split":"test"' "$TMP/body" | wc -l)" -eq 10 ] || fail "/api/curve: not 10 test points"
[ "$(grep -o '"split":"train"' "$TMP/body" | wc -l)" -eq 10 ] || fail "/api/curve: not 10 train points"
last_test=$(grep -o '"samples":[0-9]*,"split":"test","loss":[^,]*,"acc":[^,]*' "$TMP/body" | tail -n 1)
[ "$last_test" != "${last_test%\"acc\":$ACC_GRU1}" ] && [[ "$last_test" == '"samples":256,'* ]] ||
  fail "/api/curve: last test point '$last_test', expected 256 samples and acc $ACC_GRU1"

expect_body '"live":[]' "/api/curve (a run of under a second writes no live point)"

# (c2) /api/run: the run page's data; its command trains the same run hash; the probe
# figures `probe` writes beside the checkpoint are listed and served
http GET "/api/run?run=${RUN_TF1:0:6}"
expect_code 200 "/api/run"
expect_body "\"id\":\"$RUN_TF1\"" "/api/run"
expect_body '"command_has_run_hash":true' "/api/run"
grep -q '"checkpoint_file":{"path":"[^"]*","exists":true,"bytes":[0-9]' "$TMP/body" ||
  fail "/api/run: the checkpoint: $(grep -o '"checkpoint_file":{[^}]*}' "$TMP/body")"
command=$(grep -o '"command":"[^"]*"' "$TMP/body" | cut -d'"' -f4)
[[ "$command" == "selectivbench train --model transformer "* ]] || fail "/api/run command: $command"
# shellcheck disable=SC2086
[ "$("$SB" ${command#selectivbench } --print_hashes | cut -d' ' -f1)" = "$RUN_TF1" ] ||
  fail "/api/run: '$command' does not give run $RUN_TF1"
expect_body '"probe_figures":[]' "/api/run before probe"
"$SB" probe "$RUN_TF1" --results "$TMP/res" --section gates --probe_samples 16 >"$TMP/probe.out" 2>&1 ||
  fail "probe: $(tail -n 3 "$TMP/probe.out")"
http GET "/api/run?run=$RUN_TF1"
expect_body '"probe_figures":["gates"' "/api/run after probe"
http GET "/api/probe?run=$RUN_TF1&figure=gates"
expect_code 200 "/api/probe gates"
expect_body '<svg' "/api/probe gates"
http GET "/api/probe?run=$RUN_TF1&figure=nope"
expect_code 404 "/api/probe of a figure probe did not write"
http GET "/api/probe?run=$RUN_TF1&figure=..%2Fx"
expect_code 400 "/api/probe of a path"
http GET "/api/run?run=xyz"
expect_code 400 "/api/run of a malformed id"
absent=0000
http GET "/api/run?run=$absent"
expect_code 404 "/api/run of an id no run has"

# (d) /api/status: three finished, none running
http GET /api/status
expect_code 200 "/api/status"
expect_body '"total":3,"counts":{"running":0,"finished":3,' "/api/status"
expect_body '"running":[]' "/api/status"

# (e) the figures: listed, each served as SVG; HEAD sends the headers alone
http GET /api/figures
expect_code 200 "/api/figures"
figure=$(grep -o '"figures":\["[a-z0-9_]*"' "$TMP/body" | cut -d'"' -f4)
[ -n "$figure" ] || fail "/api/figures lists no figure: $(cat "$TMP/body")"
expect_body '"runs_read":3,"runs_used":3,"error":""' "/api/figures"
http GET "/figures/$figure.svg"
expect_code 200 "GET /figures/$figure.svg"
expect_body '<svg' "GET /figures/$figure.svg"
grep -qi '^Content-Type: image/svg+xml' "$TMP/head" || fail "figure: $(cat "$TMP/head")"
http HEAD "/figures/$figure.svg"
expect_code 200 "HEAD /figures/$figure.svg"
[ ! -s "$TMP/body" ] || fail "HEAD sent a body"
[ "$(find "$TMP/tmpdir" -name '*.svg' | wc -l)" -gt 0 ] ||
  fail "the figures are not in the private folder under TMPDIR"

# (f) bad requests: 4xx, one JSON error line each, never a crash
http GET /nope
expect_code 404 "unknown path"
expect_body '"error":' "unknown path"
http GET /api/nope
expect_code 404 "unknown /api path"
http POST /api/runs 'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n' \
  "127.0.0.1:$PORT" 'x=1'
expect_code 405 "POST"
grep -qi '^Allow: GET, HEAD' "$TMP/head" || fail "405 without Allow: $(cat "$TMP/head")"
http DELETE /
expect_code 405 "DELETE"
http GET "/api/runs?q=$(printf 'a%.0s' $(seq 5000))"
expect_code 414 "a 5 KB query"
http GET "/api/runs?q=$(head -c 100000 /dev/zero | tr '\0' a)"
expect_code 414 "a 100 KB query"
http GET "/api/curve?run=%zz"
expect_code 400 "malformed escape %zz"
http GET "/api/runs?x=%"
expect_code 400 "a lone %"
http GET "/api/curve?run=%41%4"
expect_code 400 "a cut escape"
for path in "/index.html%00.svg" "/figures/%00x.svg" "/api/runs?x=%01" "/app.js%7f" "/%0a"; do
  http GET "$path"
  expect_code 400 "an encoded control byte: $path"
  expect_body "control byte" "an encoded control byte: $path"
done
http GET "/api/curve?run=xyz!"
expect_code 400 "a run id that is not hex"
http GET "/api/curve?run=${RUN_GRU1:0:3}"
expect_code 400 "a 3-digit run id"
http GET "/api/curve"
expect_code 400 "/api/curve without run"
absent=0000
while [ "${RUN_GRU1:0:4}" = $absent ] || [ "${RUN_GRU2:0:4}" = $absent ] ||
      [ "${RUN_TF1:0:4}" = $absent ]; do absent=$((absent + 1111)); done
http GET "/api/curve?run=$absent"
expect_code 404 "a run id no run has"
http GET "/figures/../../../../etc/passwd.svg"
expect_code 404 "../ in a figure's path"
http GET "/../../../../etc/passwd"
expect_code 404 "../ at the root"
http GET "/figures/%2e%2e%2f%2e%2e%2fselectivbench.db"
expect_code 404 "an escaped ../"
http GET "/figures/nope.svg"
expect_code 404 "a figure that does not exist"
http GET /api/runs "" "evil.example"
expect_code 400 "a foreign Host"
http GET "/api/runs?$(for i in $(seq 20); do printf 'k%d=1&' "$i"; done)"
expect_code 400 "20 query parameters"
printf 'GARBAGE\r\n\r\n' >"$TMP/garbage"
( exec 3<>"/dev/tcp/127.0.0.1/$PORT"; cat "$TMP/garbage" >&3; cat <&3 >"$TMP/resp" ) 2>/dev/null
code=$(head -n 1 "$TMP/resp" | cut -d' ' -f2)
# an answer, if any, is a 4xx (libmicrohttpd may close the connection without one)
[ -z "$code" ] || [[ "$code" == 4* ]] || fail "a garbage request: '$(head -n 1 "$TMP/resp")'"

# 100 connections that send half a request and stay silent, then 100 that send half a
# request and close: neither holds the server (at most 512 connections, each silent one for
# at most 10 s). A request beside the first and after the second is answered at once (the
# landed server of 64 connections took 15 s and 30 s).
answers_at_once() { # answers_at_once WHAT: /api/status within 3 s
  t0=$(date +%s%N)
  http GET /api/status
  expect_code 200 "/api/status $1"
  ms=$((($(date +%s%N) - t0) / 1000000))
  [ "$ms" -lt 3000 ] || fail "/api/status $1 took $ms ms"
}
fds=()
for _ in $(seq 100); do
  # (the group's redirection is undone after it; exec's own would stay for the script)
  { exec {fd}<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null && fds+=("$fd") &&
    printf 'GET /api/st' >&"$fd"
done
[ "${#fds[@]}" -gt 0 ] || fail "no idle connection could be opened"
answers_at_once "beside 100 silent clients"
for fd in "${fds[@]}"; do exec {fd}>&-; done
for _ in $(seq 100); do
  { exec {fd}<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null && printf 'GET /api/st' >&"$fd" &&
    exec {fd}>&-
done
answers_at_once "after 100 requests closed half-way"

# the server is alive and answers after all of them
kill -0 "$SERVER" 2>/dev/null || fail "the server died"
http GET /api/status
expect_code 200 "/api/status after the bad requests"

# the database was only read: the same bytes. (SQLite's readers of a database in WAL mode
# make its two index files beside it when they are missing: an empty DB-wal and DB-shm;
# nothing else may appear.)
[ "$(md5sum <"$db")" = "$db_sum_before" ] || fail "serve changed the database"
files_now=$(ls "$TMP/res" | grep -v '^selectivbench\.db-\(wal\|shm\)$')
[ "$files_now" = "$files_before" ] ||
  fail "the results folder changed: $files_now (was: $files_before)"
[ ! -s "$db-wal" ] || fail "serve wrote $(wc -c <"$db-wal") bytes into the database's WAL"

# the figures of a database whose runs lack their yardsticks (recorded before they
# existed): drawn with them computed, never stored (sb_report_write_readonly), where
# `report` would write them back. Needs the sqlite3 program to clear them.
if command -v sqlite3 >/dev/null 2>&1; then
  cp "$db" "$TMP/old.db"
  sqlite3 "$TMP/old.db" "UPDATE runs SET ceiling = NULL, effective_memory = NULL; DELETE FROM ceilings;"
  old_sum=$(md5sum <"$TMP/old.db")
  server_before=$SERVER port_before=$PORT
  start_server --db "$TMP/old.db" || exit 1
  http GET /api/figures
  expect_code 200 "/api/figures of runs without yardsticks"
  expect_body '"runs_read":3,"runs_used":3,"error":""' "/api/figures without yardsticks"
  stop_server
  SERVER=$server_before PORT=$port_before
  [ "$(md5sum <"$TMP/old.db")" = "$old_sum" ] || fail "serve wrote the backfilled yardsticks"
  [ "$(sqlite3 "$TMP/old.db" "SELECT count(*) FROM runs WHERE ceiling IS NULL")" -eq 3 ] &&
    [ "$(sqlite3 "$TMP/old.db" "SELECT count(*) FROM ceilings")" -eq 0 ] ||
    fail "yardsticks were stored in the database serve read"

  # a row whose stored configuration is damaged (the file's CHECK bypassed): /api/runs is
  # still valid JSON, with the run listed and its damage named
  cp "$db" "$TMP/damaged.db"
  sqlite3 "$TMP/damaged.db" "PRAGMA ignore_check_constraints = ON;
    UPDATE runs SET config_json = '{\"feat_size\": ' WHERE hash = '$RUN_GRU1';"
  server_before=$SERVER port_before=$PORT
  start_server --db "$TMP/damaged.db" || exit 1
  http GET /api/runs
  expect_code 200 "/api/runs with a damaged configuration"
  expect_body '"damaged":"its stored configuration is not a JSON object"' "a damaged row"
  [ "$(grep -o '"id":' "$TMP/body" | wc -l)" -eq 3 ] || fail "a damaged row is not listed"
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; json.load(sys.stdin)' <"$TMP/body" ||
      fail "/api/runs with a damaged row is not valid JSON"
  fi
  stop_server
  SERVER=$server_before PORT=$port_before
fi

# (g) a run in progress: listed as running with its latest evaluation, its curve growing;
# stopped (SIGTERM, exit 75), it shows as interrupted
long="--model gru --vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 10 \
--test_seqlen_max 10 --dataset_size 5000000 --epoch_size 1000 --test_size 16 --batch_size 16 \
--feat_size 16 --layers 1 --threads 1"
# shellcheck disable=SC2086
live=$("$SB" train $long --print_hashes | cut -d' ' -f1)
# shellcheck disable=SC2086
"$SB" train $long --results "$TMP/res" --quiet >"$TMP/live.out" 2>&1 &
trainer=$!
seen=
for _ in $(seq 600); do
  http GET /api/status
  if grep -q "\"running\":\[{\"id\":\"$live\",\"model\":\"gru\",\"points\":[1-9][0-9]*,\"step\":[0-9]" \
    "$TMP/body"; then
    seen=1
    break
  fi
  sleep 0.1
done
[ -n "$seen" ] || fail "the running run never showed in /api/status: $(cat "$TMP/body")"
expect_body '"total":4,"counts":{"running":1,"finished":3,' "/api/status during a run"
http GET "/api/curve?run=$live"
expect_code 200 "/api/curve of the running run"
expect_body '"status":"running","points":[{"step":' "/api/curve of the running run"
kill -TERM "$trainer"
wait "$trainer"
rc=$?
[ "$rc" -eq 75 ] || fail "train stopped by SIGTERM exited $rc: $(cat "$TMP/live.out")"
http GET /api/status
expect_body '"counts":{"running":0,"finished":3,"failed":0,"diverged":0,"interrupted":1}' \
  "/api/status after the run stopped"

# (h) SIGTERM: exit 0, the private folder of the figures removed
stop_server
[ "$SERVER_RC" -eq 0 ] || fail "serve exited $SERVER_RC after SIGTERM: $(cat "$TMP/serve.err")"
[ -z "$(ls -A "$TMP/tmpdir")" ] || fail "serve left $(ls -A "$TMP/tmpdir") in TMPDIR"
[ ! -s "$TMP/serve.err" ] || fail "serve wrote on stderr: $(cat "$TMP/serve.err")"

# (i) bad flags and a port in use: one error line, the right exit code
expect_error 1 "no results database at '$TMP/none.db'" serve --db "$TMP/none.db"
expect_error 2 "out of range" serve --db "$db" --port 70000
expect_error 2 "give the database once" serve "$db" --results "$TMP/res"
expect_error 2 "unknown flag" serve --nope
echo "not a database" >"$TMP/junk.db"
expect_error 1 "junk.db" serve --db "$TMP/junk.db"
start_server --db "$db" || exit 1
first_port=$PORT
# (under timeout: a second server that did bind would never return)
checks=$((checks + 1))
timeout 20 "$SB" serve --db "$db" --port "$first_port" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
  grep -q "^selectivbench serve: error: cannot listen on 127.0.0.1:$first_port" "$TMP/err" ||
  fail "a second server on port $first_port: exit $rc, $(cat "$TMP/err")"
stop_server
expect_ok serve --help
grep -q -- '--port N' "$TMP/out" || fail "serve --help lists no --port"

echo "test_serve: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

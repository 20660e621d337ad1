# serve_common.sh - what test_serve.sh and test_browser.sh share (bash; sourced after
# common.sh): a small results database, a `selectivbench serve` in the background, and HTTP
# requests over bash's /dev/tcp (curl need not be installed).
#
#   make_runs DIR          trains three tiny runs (gru seeds 1 and 2, transformer seed 1) into
#                          DIR; their ids in RUN_GRU1, RUN_GRU2, RUN_TF1, their test
#                          accuracies (as printed by train --json) in ACC_GRU1, ACC_GRU2, ACC_TF1
#   start_server ARGS      starts `selectivbench serve ARGS --port 0`; PORT, SERVER (its pid)
#   stop_server            SIGTERM; its exit code in SERVER_RC
#   http METHOD TARGET [HEADER_LINES [HOST [BODY]]]: one request (HEADER_LINES: "Name: value\r\n"
#                          each, escapes as printf's %b; HOST: the Host header, default this
#                          server); the status code in $code, the headers in $TMP/head,
#                          the body in $TMP/body

TINY="--vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 10 --test_seqlen_max 10 \
--dataset_size 256 --epoch_size 64 --test_size 16 --batch_size 16 --feat_size 16 --layers 1 \
--lr 0.01 --threads 1"

# train_one DIR MODEL SEED: trains one tiny run; prints "ID TEST_ACC"
train_one() {
  # shellcheck disable=SC2086
  "$SB" train --model "$2" --seed "$3" $TINY --results "$1" --quiet --json >"$TMP/train.json" \
    2>"$TMP/train.err" || return
  id=$(grep -o '"hash":"[0-9a-f]*"' "$TMP/train.json" | cut -d'"' -f4)
  acc=$(grep -o '"test_acc":[0-9.e-]*' "$TMP/train.json" | cut -d: -f2)
  echo "$id $acc"
}

make_runs() {
  read -r RUN_GRU1 ACC_GRU1 <<<"$(train_one "$1" gru 1)"
  read -r RUN_GRU2 ACC_GRU2 <<<"$(train_one "$1" gru 2)"
  read -r RUN_TF1 ACC_TF1 <<<"$(train_one "$1" transformer 1)"
  for id in "$RUN_GRU1" "$RUN_GRU2" "$RUN_TF1"; do
    [ ${#id} -eq 16 ] || fail "a tiny run failed: $(cat "$TMP/train.err")"
  done
}

start_server() {
  # removed first: the previous server's address must not be read before the new one's
  # shell truncates the file
  rm -f "$TMP/serve.out" "$TMP/serve.err"
  # (under LeakSanitizer, `./run.sh asan`: no list of the suppressions used on stderr,
  # which the tests expect empty)
  LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}print_suppressions=0" \
    "$SB" serve "$@" --port 0 >"$TMP/serve.out" 2>"$TMP/serve.err" &
  SERVER=$!
  PORT=
  for _ in $(seq 100); do
    PORT=$(sed -n 's|^serving .* at http://127\.0\.0\.1:\([0-9]*\)/ (Ctrl-C to stop)$|\1|p' \
      "$TMP/serve.out" 2>/dev/null)
    [ -n "$PORT" ] && return 0
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  fail "serve did not print its address: $(cat "$TMP/serve.out" "$TMP/serve.err")"
  return 1
}

stop_server() {
  kill -TERM "$SERVER"
  wait "$SERVER"
  SERVER_RC=$?
}

http() {
  method=$1
  target=$2
  extra=${3:-}
  host=${4:-127.0.0.1:$PORT}
  body=${5:-}
  rm -f "$TMP/resp"
  (
    # a server that answers before reading everything closes the connection: the rest of
    # the write fails (EPIPE) instead of killing the subshell, and the answer is read
    trap '' PIPE
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
    printf '%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%b\r\n%s' "$method" "$target" \
      "$host" "$extra" "$body" >&3
    cat <&3 >"$TMP/resp"
  ) 2>/dev/null
  code=$(head -n 1 "$TMP/resp" 2>/dev/null | cut -d' ' -f2)
  sed -n '1,/^\r$/p' "$TMP/resp" >"$TMP/head" 2>/dev/null
  sed '1,/^\r$/d' "$TMP/resp" >"$TMP/body" 2>/dev/null
}

#!/bin/bash
# test_browser.sh - the dashboard of `selectivbench serve` in headless Chromium (Debian's
# chromium; scripts/install-deps.sh test installs it): the page renders its data with its
# JS, so the DOM after loading must hold one table row per run (their ids), the curves of
# the ticked runs (a polyline of 10 test points each, none for a run not ticked), the group
# table with mean, std and n over the seeds as computed here by hand, the groups' mean
# curves, the figures and the status strip; while a run trains, the strip shows it running.
# Then tests/cli/browser_clicks.py clicks through it like a user (real mouse events over the
# DevTools protocol): a metric, two runs ticked, hover, zoom, log axis, smoothing, columns,
# CSV export, a figure full size, a run page, the scatter, a live point appearing; and the
# page renders the committed docs/claims/claims.db. A screenshot of each view; with
# $SB_DASHBOARD_SHOTS set they are copied there (docs/figures/dashboard_*.png are made so).
# Without chromium, prints one "skipped:" line and exits 0 (ctest shows it as skipped).
#
# usage: test_browser.sh PATH/TO/selectivbench
set -u
SB=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "skipped: chromium not installed (scripts/install-deps.sh test installs it)"
  exit 0
fi
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/serve_common.sh"

# browser URL OUT [FLAGS]: loads the page for 10 s of virtual time (the page's fetches and
# timers run; the server answers in real time) and writes what --dump-dom prints into OUT,
# or with --screenshot=FILE the picture; its own profile and home, no sandbox (root in CI)
browser() {
  url=$1
  out=$2
  shift 2
  HOME="$TMP/home" timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --disable-dev-shm-usage --no-first-run --user-data-dir="$TMP/profile" \
    --virtual-time-budget=10000 "$@" "$url" >"$out" 2>"$TMP/chromium.err"
  rc=$?
  checks=$((checks + 1))
  [ "$rc" -eq 0 ] || fail "chromium exited $rc: $(tail -n 3 "$TMP/chromium.err")"
}

# The cells (<td>) of the DOM's row with this attribute, one per line.
row_cells() {
  grep -o "<tr $1[^>]*>.*" "$TMP/dom.html" | sed 's|</tr>.*||' | grep -o '<td[^>]*>[^<]*</td>' |
    sed 's|<td[^>]*>\([^<]*\)</td>|\1|'
}

close_to() { # close_to A B: |A - B| < 0.00006 (4 decimals as the page prints them)
  checks=$((checks + 1))
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.00006) }'
}

make_runs "$TMP/res"
mkdir -p "$TMP/home"
[ "$failures" -eq 0 ] || exit 1
start_server --results "$TMP/res" || exit 1

# (a) the runs, two curves, grouped by model
view="select=${RUN_GRU1:0:6},${RUN_TF1}&group=model"
browser "http://127.0.0.1:$PORT/#$view" "$TMP/dom.html" --dump-dom
for id in "$RUN_GRU1" "$RUN_GRU2" "$RUN_TF1"; do
  grep -q "<tr data-run=\"$id\" data-status=\"finished\"" "$TMP/dom.html" ||
    fail "no table row for run $id in the DOM"
done
[ "$(grep -o '<tr data-run="' "$TMP/dom.html" | wc -l)" -eq 3 ] || fail "not 3 rows in the runs table"
for id in "$RUN_GRU1" "$RUN_TF1"; do
  line=$(grep -o "<polyline data-run=\"$id\" data-points=\"[0-9]*\"[^>]*points=\"[^\"]*\"" \
    "$TMP/dom.html")
  [ -n "$line" ] || { fail "no curve (polyline) for the ticked run $id"; continue; }
  # 10 evaluations: 4 on the --epoch_size cadence, 6 learning-curve points (serve_common.sh)
  [[ "$line" == *"data-points=\"10\""* ]] || fail "run $id: curve without 10 points: $line"
  coords=$(echo "$line" | sed 's/.* points="\([^"]*\)"/\1/' | wc -w)
  [ "$coords" -eq 10 ] || fail "run $id: the polyline has $coords points, expected 10: $line"
done
grep -q "<polyline data-run=\"$RUN_GRU2\"" "$TMP/dom.html" && fail "a curve for a run not ticked"
grep -q '<svg class="chart" id="curve-chart"[^>]*data-series="2"' "$TMP/dom.html" ||
  fail "the curve chart does not hold 2 runs"

# the group of the two gru seeds: n, mean and sample std of their test accuracies
mapfile -t cells < <(row_cells 'data-group="\[&quot;gru&quot;\]" data-n="2"')
[ "${#cells[@]}" -ge 4 ] || fail "no group row for gru with n = 2: $(grep -o '<table id="groups".*</table>' "$TMP/dom.html" | head -c 600)"
mean=$(awk -v a="$ACC_GRU1" -v b="$ACC_GRU2" 'BEGIN { printf "%.10f", (a + b) / 2 }')
std=$(awk -v a="$ACC_GRU1" -v b="$ACC_GRU2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.10f", d / sqrt(2) }')
if [ "${#cells[@]}" -ge 4 ]; then
  [ "${cells[0]}" = gru ] && [ "${cells[1]}" = 2 ] || fail "gru group row: ${cells[*]}"
  close_to "${cells[2]}" "$mean" || fail "gru group mean ${cells[2]}, by hand $mean"
  close_to "${cells[3]}" "$std" || fail "gru group std ${cells[3]}, by hand $std"
  # and as `results --group model` computes them
  "$SB" results --db "$TMP/res/selectivbench.db" --group model --json >"$TMP/groups.json"
  gru=$(grep -o '{"model":"gru","n":2,"test_acc":{"mean":[^,]*,"std":[^,]*' "$TMP/groups.json")
  close_to "${cells[2]}" "$(echo "$gru" | sed 's/.*"mean":\([^,]*\),.*/\1/')" &&
    close_to "${cells[3]}" "$(echo "$gru" | sed 's/.*"std":\(.*\)/\1/')" ||
    fail "gru group ${cells[2]} ${cells[3]}; results --group: $gru"
fi
row_cells 'data-group="\[&quot;transformer&quot;\]" data-n="1"' | sed -n 2p | grep -qx 1 ||
  fail "no group row for transformer with n = 1"
# the groups' curves: per group the mean over its runs at each of the 10 evaluations; the
# last is the mean of the runs' test accuracies
gru_curve=$(grep -o '<polyline data-group="\[&quot;gru&quot;\]" data-last-mean="[0-9.]*" data-points="[0-9]*"' "$TMP/dom.html")
tf_curve=$(grep -o '<polyline data-group="\[&quot;transformer&quot;\]" data-last-mean="[0-9.]*" data-points="[0-9]*"' "$TMP/dom.html")
[[ "$gru_curve" == *'data-points="10"' ]] || fail "gru group curve: '$gru_curve'"
[[ "$tf_curve" == *'data-points="10"' ]] || fail "transformer group curve: '$tf_curve'"
last_mean=$(echo "$gru_curve" | sed 's/.*data-last-mean="\([0-9.]*\)".*/\1/')
close_to "$last_mean" "$mean" || fail "gru group curve ends at $last_mean, by hand $mean"
last_mean=$(echo "$tf_curve" | sed 's/.*data-last-mean="\([0-9.]*\)".*/\1/')
close_to "$last_mean" "$ACC_TF1" || fail "transformer group curve ends at $last_mean, not $ACC_TF1"

grep -q '<figure data-figure="[a-z0-9_]*"><img src="/figures/[a-z0-9_]*\.svg' "$TMP/dom.html" ||
  fail "no figure in the page"
grep -q '<div id="status" class="status" data-state="idle" data-running="0">3 finished' \
  "$TMP/dom.html" || fail "status strip: $(grep -o '<div id="status"[^<]*' "$TMP/dom.html")"

# (b) the filter from the address: model=transformer leaves one row
browser "http://127.0.0.1:$PORT/#filter=model%3Dtransformer" "$TMP/dom.html" --dump-dom
[ "$(grep -o '<tr data-run="' "$TMP/dom.html" | wc -l)" -eq 1 ] &&
  grep -q "<tr data-run=\"$RUN_TF1\"" "$TMP/dom.html" || fail "filter model=transformer"

# (c) a screenshot of view (a)
mkdir -p "$TMP/shots"
browser "http://127.0.0.1:$PORT/#$view" "$TMP/shot.log" --hide-scrollbars \
  --window-size=1280,1400 --screenshot="$TMP/shots/dashboard_groups.png"
[ "$(head -c 8 "$TMP/shots/dashboard_groups.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "the screenshot is not a PNG"

# (c2) groups never pool experiments: gru runs on another training-set size, another width
# and another task are groups of their own, each labelled with what sets it apart (issue 38)
for change in "dataset_size 256:dataset_size 128" "feat_size 16:feat_size 8" "amb 4:amb 3"; do
  # shellcheck disable=SC2086
  "$SB" train --model gru --seed 1 ${TINY/--${change%:*}/--${change#*:}} --results "$TMP/res" \
    --quiet >"$TMP/other.out" 2>&1 || fail "the run with --${change#*:}: $(cat "$TMP/other.out")"
done
browser "http://127.0.0.1:$PORT/#group=model" "$TMP/dom.html" --dump-dom
groups_seen=$(sed 's|</tr>|</tr>\n|g' "$TMP/dom.html" | grep -o '<tr data-group="\[&quot;gru&quot;\]".*</tr>')
[ "$(echo "$groups_seen" | grep -c .)" -eq 4 ] || fail "dashboard groups: not four gru groups: $groups_seen"
apart() { # apart N TEXT: the gru group of n = N has TEXT in its apart label
  echo "$groups_seen" | grep "data-n=\"$1\"" | grep -o '<td class="text">[^<]*</td></tr>' | grep -q "$2"
}
apart 2 "dataset_size=256" && apart 2 "feat_size=16" && apart 2 "amb=4" &&
  [ "$(echo "$groups_seen" | grep -c 'dataset_size=128')" -eq 1 ] &&
  [ "$(echo "$groups_seen" | grep -c 'feat_size=8')" -eq 1 ] &&
  [ "$(echo "$groups_seen" | grep -c 'amb=3')" -eq 1 ] ||
  fail "dashboard groups: the apart labels: $groups_seen"

# (d) a run in progress: the status strip shows it running, polled by the page; it writes
# a live point every second (--live_every 1)
long="--model gru --vocab 5 --amb 4 --grammar_scale True --train_seqlen_max 10 \
--test_seqlen_max 10 --dataset_size 5000000 --epoch_size 1000000 --test_size 16 --batch_size 16 \
--feat_size 16 --layers 1 --threads 1 --live_every 1"
# shellcheck disable=SC2086
live=$("$SB" train $long --print_hashes | cut -d' ' -f1)
# shellcheck disable=SC2086
"$SB" train $long --results "$TMP/res" --quiet >"$TMP/live.out" 2>&1 &
trainer=$!
for _ in $(seq 100); do
  http GET /api/status
  grep -q '"running":\[{' "$TMP/body" && break
  sleep 0.1
done
browser "http://127.0.0.1:$PORT/" "$TMP/dom.html" --dump-dom
grep -q '<div id="status" class="status" data-state="running" data-running="1">' "$TMP/dom.html" ||
  fail "status strip during a run: $(grep -o '<div id="status".\{0,300\}' "$TMP/dom.html")"
grep -q "<span class=\"run\" data-run=\"$live\">${live:0:8} gru: " "$TMP/dom.html" ||
  fail "the running run is not in the status strip"
grep -q "<tr data-run=\"$live\" data-status=\"running\"" "$TMP/dom.html" ||
  fail "the running run is not in the table"

# (e) clicked through like a user (tests/cli/browser_clicks.py, real mouse events over the
# DevTools protocol): a metric, two runs ticked, hover, zoom, log axis, smoothing, the column
# chooser, CSV export, a figure full size, a run page (its command gives its id back), the
# scatter, and a live point of the running run appearing; a screenshot of each view
checks=$((checks + 1))
if ! command -v python3 >/dev/null; then
  fail "python3 is needed to drive the browser (scripts/install-deps.sh test installs it)"
else
  HOME="$TMP/home" python3 "$(dirname "$0")/browser_clicks.py" --sb "$SB" --port "$PORT" \
    --runs "$RUN_GRU1,$RUN_GRU2,$RUN_TF1" --live "$live" --shots "$TMP/shots" >"$TMP/clicks.out" 2>&1 ||
    fail "the click-through: $(tail -n 5 "$TMP/clicks.out")"
  grep '^check: ' "$TMP/clicks.out"
fi
kill -TERM "$trainer"
wait "$trainer"

# (e2) `results` and the dashboard name the same varying keys (one rule,
# sb_experiment_varied_keys) on this database, where the seed, width, task, dataset size,
# learning rate and evaluation cadence vary
http GET /api/runs
api_varied=$(grep -o '"varied":\[[^]]*\]' "$TMP/body" | sed 's/"varied":\[//; s/\]//; s/"//g; s/,/ /g')
results_varied=$("$SB" results --db "$TMP/res/selectivbench.db" | head -n 1 |
  awk '{ for (i = 3; i <= NF && $i != "TE" && $i != "status"; i++) printf "%s%s", (i > 3 ? " " : ""), $i }')
checks=$((checks + 1))
[ -n "$api_varied" ] && [ "$api_varied" = "$results_varied" ] ||
  fail "varying keys: dashboard '$api_varied', results '$results_varied'"
echo "varying keys, results and the dashboard: $api_varied"
# (e3) and the same groups: /api/groups (what the page's group table draws) is the JSON of
# `results --group model --json` on this database, whose gru groups are labelled apart
http GET "/api/groups?group=model"
"$SB" results --db "$TMP/res/selectivbench.db" --group model --json >"$TMP/groups_cli.json"
checks=$((checks + 1))
[ "$code" = 200 ] && [ "$(cat "$TMP/body")" = "$(cat "$TMP/groups_cli.json")" ] &&
  grep -q '"apart":"' "$TMP/body" ||
  fail "groups: dashboard $(head -c 300 "$TMP/body"); results $(head -c 300 "$TMP/groups_cli.json")"
echo "groups, results and the dashboard: $(grep -o '"model":' "$TMP/body" | wc -l) groups, the same JSON"

stop_server
[ "$SERVER_RC" -eq 0 ] || fail "serve exited $SERVER_RC: $(cat "$TMP/serve.err")"

# (f) the dashboard on a committed database (docs/claims/claims.db, read at its own schema):
# every run in the table, grouped by model; the scatter of test accuracy against the gap
# (a copy: the committed file is never opened for writing; the page names it as given)
mkdir -p "$TMP/docs/claims" "$TMP/count"
cp "$(dirname "$0")/../../docs/claims/claims.db" "$TMP/docs/claims/claims.db"
cp "$TMP/docs/claims/claims.db" "$TMP/count/claims.db"
cd "$TMP" || exit 1
claims_db=docs/claims/claims.db
start_server "$claims_db" || exit 1
n_claims=$("$SB" results --db "$TMP/count/claims.db" --json | grep -o '"hash":' | wc -l)
browser "http://127.0.0.1:$PORT/#group=model" "$TMP/dom.html" --dump-dom
[ "$(grep -o '<tr data-run="' "$TMP/dom.html" | wc -l)" -eq "$n_claims" ] ||
  fail "claims.db: not $n_claims rows in the table"
browser "http://127.0.0.1:$PORT/#group=model" "$TMP/shot.log" --hide-scrollbars \
  --window-size=1400,1300 --screenshot="$TMP/shots/dashboard_claims.png"
browser "http://127.0.0.1:$PORT/#view=scatter&sx=train_gap_max" "$TMP/dom.html" --dump-dom
grep -q '<svg class="chart" id="scatter-chart"[^>]*data-points="'"$n_claims"'"' "$TMP/dom.html" ||
  fail "claims.db scatter: $(grep -o '<svg class="chart" id="scatter-chart"[^>]*>' "$TMP/dom.html")"
browser "http://127.0.0.1:$PORT/#view=scatter&sx=train_gap_max" "$TMP/shot.log" --hide-scrollbars \
  --window-size=1400,700 --screenshot="$TMP/shots/dashboard_claims_scatter.png"
stop_server
[ "$SERVER_RC" -eq 0 ] || fail "serve of claims.db exited $SERVER_RC: $(cat "$TMP/serve.err")"
for f in "$TMP"/shots/*.png; do
  [ "$(wc -c <"$f")" -gt 20000 ] || fail "screenshot $(basename "$f") is nearly empty"
done
[ -n "${SB_DASHBOARD_SHOTS:-}" ] && cp "$TMP"/shots/*.png "$SB_DASHBOARD_SHOTS"/

echo "test_browser: $checks checks, $failures failures"
[ "$failures" -eq 0 ]

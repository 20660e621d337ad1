#!/usr/bin/env python3
"""browser_clicks.py - the dashboard clicked through like a user, in headless Chromium over
the DevTools protocol (tests/cli/cdp.py; real mouse events): choose a metric, tick two runs,
hover a chart, zoom by dragging, log axes, smoothing, the column chooser, export the table as
CSV (the file checked against the API), open a run page (its command run with
--print_hashes must give the run's id back), open a figure full size, the sweep's scatter,
and watch a live point of a running run appear. One screenshot per view into --shots.

usage: browser_clicks.py --sb BIN --port N --runs ID,ID,ID --live ID --shots DIR
Prints one line per check; exits 1 at the first failure with what was expected and seen.
"""
import argparse, csv, io, json, os, shlex, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser  # noqa: E402

checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        print("browser_clicks: FAILED: " + what)
        sys.exit(1)


def api(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
        return json.load(r)


def choose(b, select_id, value):
    """Chooses an option of a <select> as the keyboard would (focus, the value, its change
    event): a click would open the list, which a screenshot then shows."""
    b.eval("(() => { const s = document.getElementById(%s); s.focus(); s.value = %s;"
           " s.dispatchEvent(new Event('change', {bubbles: true})); s.blur(); })()"
           % (json.dumps(select_id), json.dumps(value)))


def points_of(b, chart, attr, value):
    return b.eval("(() => { const p = document.querySelector('#%s polyline[%s=\"%s\"]');"
                  " return p ? +p.dataset.points : -1; })()" % (chart, attr, value))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sb", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--runs", required=True, help="three finished run ids: gru 1, gru 2, transformer 1")
    ap.add_argument("--live", required=True, help="the id of a run training now, with --live_every 1")
    ap.add_argument("--shots", required=True)
    a = ap.parse_args()
    runs = a.runs.split(",")
    base = "http://127.0.0.1:%d/" % a.port
    every = api(a.port, "/api/runs")["runs"]
    downloads = tempfile.mkdtemp(prefix="dashboard-csv-")
    with Browser(width=1400, height=1100) as b:
        try:
            steps(a, b, runs, every, downloads)
        except BaseException:
            b.screenshot(os.path.join(a.shots, "failure.png"))  # what the page showed
            raise
    print("browser_clicks: %d checks, 0 failures" % checks)


def steps(a, b, runs, every, downloads):
    base = "http://127.0.0.1:%d/" % a.port
    if True:
        b.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        b.open(base)
        b.wait("document.querySelectorAll('#runs tbody tr').length === %d" % len(every))
        print("check: %d rows" % len(every))

        # tick two runs (real clicks on their boxes): two curves of 10 test points
        for rid in runs[:2]:
            b.click('#runs input[data-run="%s"]' % rid)
        b.wait("document.querySelectorAll('#curve-chart polyline[data-run]').length === 2")
        for rid in runs[:2]:
            n = points_of(b, "curve-chart", "data-run", rid)
            check(n == 10, "run %s: %d test accuracy points drawn, expected 10" % (rid, n))
        # a metric: the train loss, its points those of the API's train rows
        choose(b, "metric", "train_loss")
        b.wait("document.querySelector('#curve-chart text:last-of-type') !== null && "
               "[...document.querySelectorAll('#curve-chart text')].some(t => t.textContent === 'train loss')")
        curve = api(a.port, "/api/curve?run=" + runs[0])
        want = len([p for p in curve["points"] if p["split"] == "train" and p["loss"] is not None])
        n = points_of(b, "curve-chart", "data-run", runs[0])
        check(n == want and want >= 10, "train loss: %d points drawn, the API has %d train rows" % (n, want))
        print("check: metric train loss, %d points per run" % n)
        # hover: the box names both runs with their value at the x under the mouse
        b.hover("#curve-chart .overlay", 40, 0)
        b.wait("!document.getElementById('curve-chart-tip').hidden")
        rows = b.eval("[...document.querySelectorAll('#curve-chart-tip div[data-series]')].map(d => d.textContent)")
        x = float(b.eval("document.getElementById('curve-chart-tip').dataset.x"))
        at = [p["loss"] for p in curve["points"] if p["split"] == "train" and p["samples"] == x]
        check(len(rows) == 2 and len(at) == 1 and rows[0].endswith("%.4f" % at[0]),
              "hover at x %g: %s; the API's train loss there: %s" % (x, rows, at))
        print("check: hover %s" % rows)
        b.screenshot(os.path.join(a.shots, "dashboard_curves.png"))
        # zoom by a drag across the middle, then out
        b.drag("#curve-chart .overlay", 0.3, 0.7)
        zoom = b.wait("document.getElementById('curve-chart').dataset.zoom")
        z0, z1 = map(float, zoom.split(","))
        n = points_of(b, "curve-chart", "data-run", runs[0])
        inside = len([p for p in curve["points"] if p["split"] == "train" and z0 <= p["samples"] <= z1])
        check(n == inside and n < want, "zoom to [%g, %g]: %d points drawn, %d inside" % (z0, z1, n, inside))
        b.click("#reset-zoom")
        b.wait("document.getElementById('curve-chart').dataset.zoom === ''")
        print("check: zoom [%g, %g] -> %d points, and out" % (z0, z1, n))
        # log y, smoothing (the raw line stays, faint)
        b.click("#log-y")
        b.wait("document.getElementById('curve-chart').dataset.logY === '1'")
        labels = b.eval("[...document.querySelectorAll('#curve-chart text')].map(t => t.textContent)")
        check("train loss (log)" in labels and len([t for t in labels if t and t[0].isdigit()]) >= 4,
              "log y: axis texts %s" % labels)
        b.click("#log-y")
        b.eval("(() => { const s = document.getElementById('smoothing'); s.value = '0.6';"
               " s.dispatchEvent(new Event('input')); })()")
        b.wait("document.querySelectorAll('#curve-chart polyline.raw').length === 2")
        print("check: log y, smoothing 0.6")

        # the column chooser: add the batch size, drop the validation accuracy
        heads_js = "[...document.querySelectorAll('#runs thead th')].map(t => t.dataset.key)"
        b.click("#column-chooser summary")
        b.click('#column-list input[data-col="config.batch_size"]')
        b.wait(heads_js + ".includes('config.batch_size')", timeout=5)
        b.click('#column-list input[data-col="valid_acc"]')
        b.wait("!" + heads_js + ".includes('valid_acc')", timeout=5)
        heads = b.eval(heads_js)
        check("config.batch_size" in heads and "valid_acc" not in heads, "columns after the chooser: %s" % heads)
        b.click("#column-chooser summary")
        print("check: columns %s" % heads)
        # export: the file holds the table as shown, full ids and numbers as the API's
        b.click("#export-csv")
        path = os.path.join(downloads, "runs.csv")
        deadline = time.time() + 20
        while not os.path.exists(path) and time.time() < deadline:
            time.sleep(0.1)
        check(os.path.exists(path), "no runs.csv downloaded into " + downloads)
        table = list(csv.DictReader(io.StringIO(open(path).read())))
        head = open(path).readline().strip().split(",")
        check(head == [h.replace("config.", "") for h in heads if h], "CSV header %s, table %s" % (head, heads))
        check(len(table) == len(every), "CSV: %d rows, %d runs" % (len(table), len(every)))
        for r in every:
            row = [t for t in table if t["id"] == r["id"]]
            check(len(row) == 1 and (r["test_acc"] is None or float(row[0]["test_acc"]) == r["test_acc"]),
                  "CSV row of %s: %s; API test_acc %s" % (r["id"], row, r["test_acc"]))
        print("check: CSV %d rows x %d columns" % (len(table), len(head)))

        # a figure full size, then closed with Escape
        b.click("#figures figure img")
        b.wait("!document.getElementById('lightbox').hidden")
        src = b.eval("document.getElementById('lightbox-img').getAttribute('src')")
        check(src.startswith("/figures/") and b.eval("document.getElementById('lightbox-img').naturalWidth > 0"),
              "lightbox image %s" % src)
        b.screenshot(os.path.join(a.shots, "dashboard_figure.png"))
        b.page("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Escape", "code": "Escape",
                                          "windowsVirtualKeyCode": 27})
        b.wait("document.getElementById('lightbox').hidden")
        print("check: figure %s full size" % src)

        # a run page, from its id in the table
        b.click('#runs a[data-open-run="%s"]' % runs[2])
        b.wait("document.getElementById('run-page').dataset.run === '%s' && "
               "!!document.getElementById('run-command')" % runs[2])
        command = b.eval("document.getElementById('run-command').textContent")
        words = shlex.split(command)
        check(words[:2] == ["selectivbench", "train"], "run page command: " + command)
        hashes = subprocess.run([a.sb, "train"] + words[2:] + ["--print_hashes"], capture_output=True,
                                text=True, timeout=60)
        check(hashes.returncode == 0 and hashes.stdout.split()[0] == runs[2],
              "the run page's command gives %r, not run %s" % (hashes.stdout + hashes.stderr, runs[2]))
        ckpt = b.eval("document.querySelector('#run-checkpoint td').textContent")
        check(ckpt.endswith("bytes)"), "run page checkpoint: " + ckpt)
        n = b.eval("document.querySelectorAll('#run-charts polyline[data-metric]').length")
        check(n >= 6, "run page: %d curves (test, valid, train accuracy and loss, lr, tokens/s)" % n)
        b.screenshot(os.path.join(a.shots, "dashboard_run.png"))
        print("check: run page, command -> %s" % runs[2])
        b.click("#run-back")
        b.wait("!document.getElementById('runs-view').hidden")

        # the sweep's scatter, and a run page from one of its points
        b.click("#tab-scatter")
        b.wait("!!document.getElementById('scatter-chart')")
        n = b.eval("document.querySelectorAll('#scatter-chart circle[data-run]').length")
        finished = len([r for r in every if r["test_acc"] is not None])
        check(n == finished, "scatter: %d points, %d runs with a test accuracy" % (n, finished))
        choose(b, "scatter-x", "params")
        b.wait("document.getElementById('scatter-chart').dataset.categorical === '0'")
        b.screenshot(os.path.join(a.shots, "dashboard_scatter.png"))
        b.click('#scatter-chart circle[data-run="%s"]' % runs[0])
        b.wait("document.getElementById('run-page').dataset.run === '%s'" % runs[0])
        print("check: scatter %d points; a click opens run %s" % (n, runs[0]))
        b.click("#run-back")
        b.wait("!document.getElementById('scatter-view').hidden")
        b.click("#tab-runs")

        # a running run: tick it, watch a live point appear (written every second)
        b.wait("!!document.querySelector('#runs input[data-run=\"%s\"]')" % a.live, timeout=30)
        choose(b, "metric", "train_loss")
        b.eval("(() => { const s = document.getElementById('smoothing'); s.value = '0';"
               " s.dispatchEvent(new Event('input')); })()")
        b.click('#runs input[data-run="%s"]' % a.live)
        first = b.wait("(() => { const n = %s; return n > 0 ? n : 0; })()"
                       % "(+(document.querySelector('#curve-chart polyline[data-run=\"%s\"]') || {dataset: {points: 0}}).dataset.points)" % a.live,
                       timeout=30)
        grown = b.wait("(+(document.querySelector('#curve-chart polyline[data-run=\"%s\"]') || {dataset: {points: 0}}).dataset.points) > %d"
                       % (a.live, first), timeout=30)
        after = points_of(b, "curve-chart", "data-run", a.live)
        check(grown and after > first, "live run %s: %d points, then %d" % (a.live, first, after))
        b.screenshot(os.path.join(a.shots, "dashboard_live.png"))
        print("check: live run %s, %d points, then %d" % (a.live, first, after))


if __name__ == "__main__":
    main()

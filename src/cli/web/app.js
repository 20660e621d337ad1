// The dashboard of `selectivbench serve` (docs/dashboard.md): plain JS, no framework.
// It reads the server's JSON (/api/runs, /api/curve, /api/status, /api/figures) and draws
// the runs table (sort, filter, group), the learning curves of the ticked runs (inline SVG)
// and the report's figures; while runs are `running` it polls /api/status every 2 s.
// Every text from the database goes into the page as text (textContent), never as HTML.
"use strict";

const POLL_RUNNING_MS = 2000; // while a run is running
const POLL_IDLE_MS = 10000;   // otherwise, to notice a sweep that starts
const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

const state = {
  runs: [],          // /api/runs's runs
  varied: [],        // configuration keys whose value differs between runs
  sort: { key: null, dir: 1 },
  filter: "",
  groupKeys: [],     // keys to group by, in the order ticked
  selected: [],      // run ids whose curves are drawn, in the order ticked
  curves: new Map(), // run id -> its /api/curve answer
  statusKey: null,   // /api/status's key when the runs were last loaded
  running: new Map(), // running run id -> its point count at the last poll
};

// ---- helpers --------------------------------------------------------------------------

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function fmt(v, digits) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return "";
    if (digits !== undefined) return v.toFixed(digits);
    return Number.isInteger(v) ? String(v) : String(+v.toPrecision(6));
  }
  if (typeof v === "boolean") return v ? "True" : "False";
  return String(v);
}

function fmtInt(v) {
  return typeof v === "number" && Number.isFinite(v) ? v.toLocaleString("en-US") : "";
}

// ---- columns --------------------------------------------------------------------------

// The table's columns: fixed ones around the configuration keys the runs vary.
function columns() {
  const cols = [
    { key: "id", label: "id", text: true, get: r => r.id, show: r => r.id.slice(0, 8) },
    { key: "status", label: "status", text: true, get: r => r.status,
      show: r => r.damaged ? r.status + " (damaged)" : r.status },
    { key: "model", label: "model", text: true, get: r => r.model },
  ];
  for (const k of state.varied)
    cols.push({ key: "config." + k, label: k, get: r => r.config[k], config: k });
  cols.push(
    { key: "params", label: "params", get: r => r.params, show: r => fmtInt(r.params) },
    { key: "test_acc", label: "test acc", get: r => r.test_acc, show: r => fmt(r.test_acc, 4) },
    { key: "train_acc", label: "train acc", get: r => r.train_acc, show: r => fmt(r.train_acc, 4) },
    { key: "test_loss", label: "test loss", get: r => r.test_loss, show: r => fmt(r.test_loss, 4) },
    { key: "ceiling", label: "ceiling", get: r => r.ceiling, show: r => fmt(r.ceiling, 4) },
    { key: "wall_s", label: "wall s", get: r => r.wall_s, show: r => fmt(r.wall_s, 1) },
    { key: "finished_at", label: "finished", text: true, get: r => r.finished_at },
  );
  return cols;
}

function cellText(col, run) {
  return col.show ? col.show(run) : fmt(col.get(run));
}

// ---- filter, sort, group ----------------------------------------------------------------

// The value of key for a run: a configuration key, or a field of the run.
function valueOf(run, key) {
  if (Object.prototype.hasOwnProperty.call(run.config, key)) return run.config[key];
  return run[key];
}

// "a b key=value": every word must appear in the row's text, every key=value must match.
function matches(run, cols, terms) {
  for (const term of terms) {
    const eq = term.indexOf("=");
    if (eq > 0) {
      const key = term.slice(0, eq), want = term.slice(eq + 1);
      const v = valueOf(run, key);
      if (v === undefined) return false;
      if (typeof v === "number" ? v !== Number(want) || want === "" : fmt(v) !== want)
        return false;
    } else {
      const text = cols.map(c => cellText(c, run)).join(" ").toLowerCase();
      if (!text.includes(term.toLowerCase())) return false;
    }
  }
  return true;
}

function compareValues(a, b) {
  const missingA = a === null || a === undefined || (typeof a === "number" && !Number.isFinite(a));
  const missingB = b === null || b === undefined || (typeof b === "number" && !Number.isFinite(b));
  if (missingA || missingB) return missingA - missingB; // missing last
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

function shownRuns(cols) {
  const terms = state.filter.split(/\s+/).filter(t => t.length > 0);
  const runs = state.runs.filter(r => matches(r, cols, terms));
  if (state.sort.key) {
    const col = cols.find(c => c.key === state.sort.key);
    if (col) {
      const dir = state.sort.dir;
      runs.sort((x, y) => {
        const a = col.get(x), b = col.get(y);
        const missing = v => v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v));
        if (missing(a) || missing(b)) return compareValues(a, b); // missing last either way
        return dir * compareValues(a, b);
      });
    }
  }
  return runs;
}

// Mean, sample standard deviation and count of the finite numbers of xs.
function stats(xs) {
  const v = xs.filter(x => typeof x === "number" && Number.isFinite(x));
  const n = v.length;
  if (n === 0) return { n: 0, mean: NaN, std: NaN };
  const mean = v.reduce((s, x) => s + x, 0) / n;
  const std = n > 1 ? Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : NaN;
  return { n, mean, std };
}

// A run's experiment within a group: its configuration but the seeds, keys sorted. A group's
// runs differ in their seeds alone (as `results --group`, issue 38).
function experimentOf(run) {
  const cfg = {};
  for (const k of Object.keys(run.config).sort())
    if (k !== "seed" && k !== "task_seed") cfg[k] = run.config[k];
  return cfg;
}

// "key=value, ..." of the keys whose values differ between the configurations cfgs.
function apartLabels(cfgs) {
  const keys = [...new Set(cfgs.flatMap(c => Object.keys(c)))];
  const differ = keys.filter(k => cfgs.some(c => JSON.stringify(c[k]) !== JSON.stringify(cfgs[0][k])));
  return cfgs.map(c => differ.map(k => `${k}=${c[k] === undefined ? "null" : fmt(c[k])}`).join(", "));
}

function groups(runs) {
  const byKey = new Map();
  for (const r of runs) {
    const values = state.groupKeys.map(k => valueOf(r, k));
    const exp = experimentOf(r);
    const id = JSON.stringify([values, exp]);
    if (!byKey.has(id)) byKey.set(id, { values, exp, runs: [], apart: "" });
    byKey.get(id).runs.push(r);
  }
  const list = [...byKey.values()];
  // groups of equal values: labelled by what sets them apart
  const byValues = new Map();
  for (const g of list) {
    const v = JSON.stringify(g.values);
    if (!byValues.has(v)) byValues.set(v, []);
    byValues.get(v).push(g);
  }
  for (const same of byValues.values())
    if (same.length > 1) apartLabels(same.map(g => g.exp)).forEach((l, i) => { same[i].apart = l; });
  list.sort((a, b) => {
    for (let i = 0; i < a.values.length; i++) {
      const c = compareValues(a.values[i], b.values[i]);
      if (c !== 0) return c;
    }
    return 0;
  });
  return list;
}

// ---- drawing the tables -----------------------------------------------------------------

function drawGroupKeys() {
  const box = document.getElementById("group-keys");
  box.textContent = "";
  for (const key of ["model", ...state.varied]) {
    const input = el("input", { type: "checkbox", value: key, "data-key": key });
    input.checked = state.groupKeys.includes(key);
    input.addEventListener("change", () => {
      state.groupKeys = input.checked ? [...state.groupKeys, key]
                                      : state.groupKeys.filter(k => k !== key);
      drawTables();
    });
    const label = el("label");
    label.append(input, " " + key);
    box.append(label);
  }
}

function drawHead(thead, cols) {
  thead.textContent = "";
  const tr = el("tr");
  tr.append(el("th", { class: "text", title: "tick to draw the learning curve" }, "curve"));
  for (const c of cols) {
    const th = el("th", { "data-key": c.key, class: c.text ? "text" : "" }, c.label);
    if (state.sort.key === c.key)
      th.classList.add(state.sort.dir > 0 ? "sorted-asc" : "sorted-desc");
    th.addEventListener("click", () => {
      state.sort = state.sort.key === c.key ? { key: c.key, dir: -state.sort.dir }
                                            : { key: c.key, dir: 1 };
      drawTables();
    });
    tr.append(th);
  }
  thead.append(tr);
}

function drawRow(run, cols) {
  const tr = el("tr", { "data-run": run.id, "data-status": run.status });
  const box = el("input", { type: "checkbox", "data-run": run.id });
  box.checked = state.selected.includes(run.id);
  if (box.checked) tr.classList.add("selected");
  box.addEventListener("change", () => toggleRun(run.id, box.checked));
  const td = el("td", { class: "text" });
  td.append(box);
  tr.append(td);
  for (const c of cols) {
    const cls = [c.text ? "text" : "", c.key === "id" ? "id" : "",
                 c.key === "status" ? "status-" + run.status : ""].join(" ").trim();
    const cell = el("td", cls ? { class: cls } : {}, cellText(c, run));
    if (c.key === "id") cell.title = run.id + (run.checkpoint ? "\ncheckpoint: " + run.checkpoint : "");
    if (c.key === "status" && (run.reason || run.damaged))
      cell.title = [run.reason, run.damaged].filter(Boolean).join("; ");
    tr.append(cell);
  }
  return tr;
}

function drawGroups(runs) {
  const wrap = document.getElementById("groups-wrap");
  wrap.hidden = state.groupKeys.length === 0;
  const list = wrap.hidden ? [] : groups(runs);
  drawGroupCurves(list);
  if (wrap.hidden) return;
  const table = document.getElementById("groups");
  const thead = table.tHead, tbody = table.tBodies[0];
  thead.textContent = "";
  tbody.textContent = "";
  const head = el("tr");
  for (const k of state.groupKeys) head.append(el("th", { class: "text" }, k));
  for (const h of ["n", "test acc mean", "std", "test loss mean", "runs"]) head.append(el("th", {}, h));
  const apart = list.some(g => g.apart !== "");
  if (apart) head.append(el("th", { class: "text" }, "apart"));
  thead.append(head);
  for (const g of list) {
    // as `results --group`: the statistics of the group's finished runs
    const done = g.runs.filter(r => r.status === "finished");
    const acc = stats(done.map(r => r.test_acc));
    const loss = stats(done.map(r => r.test_loss));
    const tr = el("tr", { "data-group": JSON.stringify(g.values), "data-n": acc.n });
    for (const v of g.values) tr.append(el("td", { class: "text" }, fmt(v)));
    tr.append(el("td", {}, String(acc.n)), el("td", {}, fmt(acc.mean, 4)),
              el("td", {}, fmt(acc.std, 4)), el("td", {}, fmt(loss.mean, 4)),
              el("td", {}, String(g.runs.length)));
    if (apart) tr.append(el("td", { class: "text" }, g.apart));
    tbody.append(tr);
  }
}

function drawTables() {
  const cols = columns();
  const table = document.getElementById("runs");
  drawHead(table.tHead, cols);
  const runs = shownRuns(cols);
  const tbody = table.tBodies[0];
  tbody.textContent = "";
  for (const r of runs) tbody.append(drawRow(r, cols));
  const empty = document.getElementById("runs-empty");
  empty.hidden = runs.length > 0;
  empty.textContent = state.runs.length === 0 ? "No runs in the database yet." : "No runs match.";
  document.getElementById("runs-count").textContent =
    runs.length === state.runs.length ? `(${runs.length})` : `(${runs.length} of ${state.runs.length})`;
  drawGroups(runs);
}

// ---- learning curves --------------------------------------------------------------------

function toggleRun(id, on) {
  state.selected = on ? [...state.selected.filter(x => x !== id), id]
                      : state.selected.filter(x => x !== id);
  drawTables();
  if (on && !state.curves.has(id)) loadCurve(id);
  else drawCurves();
}

async function loadCurve(id) {
  try {
    state.curves.set(id, await getJSON("/api/curve?run=" + encodeURIComponent(id)));
  } catch (e) {
    state.curves.set(id, { id, error: e.message, points: [] });
  }
  drawCurves();
}

// Round numbers between lo and hi, about `count` of them.
function ticks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(12));
  return out;
}

function shortNumber(v) {
  if (Math.abs(v) >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
  if (Math.abs(v) >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
  return String(+v.toPrecision(3));
}

// The test points of a curve as [x, y]: x the samples seen (the step when unknown).
function testPoints(curve) {
  return curve.points.filter(p => p.split === "test" && p.acc !== null)
                     .map(p => [p.samples !== null ? p.samples : p.step, p.acc]);
}

// One chart of test accuracy (axis [0, 1]) against training samples. series: [{attrs (set
// on its polyline), color, points: [[x, y]], band: [[x, lo, hi]] or null}]; id: the
// chart's element id.
function chart(id, series) {
  const W = 760, H = 320, L = 56, R = 16, T = 12, B = 40;
  const all = series.flatMap(s => s.points);
  const xmax = all.length > 0 ? Math.max(...all.map(p => p[0]), 1) : 1;
  const sx = x => L + (x / xmax) * (W - L - R);
  const sy = y => T + (1 - Math.min(Math.max(y, 0), 1)) * (H - T - B);
  const box = svg("svg", { class: "chart", id, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                           "data-series": series.length });
  for (const y of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    box.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: sy(y), y2: sy(y) }));
    box.append(svg("text", { x: L - 6, y: sy(y) + 4, "text-anchor": "end" }, y.toFixed(1)));
  }
  for (const x of ticks(0, xmax, 6)) {
    box.append(svg("line", { class: "grid", x1: sx(x), x2: sx(x), y1: T, y2: H - B }));
    box.append(svg("text", { x: sx(x), y: H - B + 16, "text-anchor": "middle" }, shortNumber(x)));
  }
  box.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  box.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  box.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "training samples"));
  box.append(svg("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle",
                           transform: `rotate(-90 14 ${(T + H - B) / 2})` }, "test accuracy"));
  const xy = (x, y) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
  for (const s of series) {
    if (s.band && s.band.length > 1) {
      const outline = [...s.band.map(b => xy(b[0], b[2])), ...s.band.slice().reverse().map(b => xy(b[0], b[1]))];
      box.append(svg("polygon", { class: "band", fill: s.color, "fill-opacity": 0.15,
                                  points: outline.join(" ") }));
    }
    box.append(svg("polyline", { ...s.attrs, "data-points": s.points.length, stroke: s.color,
                                 points: s.points.map(p => xy(p[0], p[1])).join(" ") }));
    if (s.points.length <= 60) // markers only where they stay apart
      for (const p of s.points)
        box.append(svg("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.5, fill: s.color }));
  }
  return box;
}

function legendItem(attrs, color, text) {
  const item = el("span", attrs);
  const swatch = svg("svg", { width: 22, height: 8 });
  swatch.append(svg("line", { x1: 0, x2: 22, y1: 4, y2: 4, stroke: color, "stroke-width": 3 }));
  item.append(swatch, " " + text);
  return item;
}

function drawCurves() {
  const box = document.getElementById("curves");
  const legend = document.getElementById("curves-legend");
  box.textContent = "";
  legend.textContent = "";
  if (state.selected.length === 0) {
    box.append(el("p", { class: "muted" }, "No run ticked."));
    return;
  }
  const shown = state.selected.filter(id => state.curves.has(id)).map(id => state.curves.get(id));
  const series = shown.map(curve => ({
    attrs: { "data-run": curve.id },
    color: COLORS[state.selected.indexOf(curve.id) % COLORS.length],
    points: testPoints(curve),
    band: null,
  }));
  box.append(chart("curve-chart", series));
  shown.forEach((curve, i) => {
    const pts = series[i].points;
    const last = pts.length > 0 ? pts[pts.length - 1][1].toFixed(4) : "no test points yet";
    const item = legendItem({ "data-run": curve.id }, series[i].color,
      `${curve.id.slice(0, 8)} ${curve.model || ""} (${pts.length} points, last ${last})`);
    if (curve.error) item.append(" error: " + curve.error);
    legend.append(item);
  });
}

// ---- the groups' learning curves --------------------------------------------------------

const GROUP_CURVES_MAX_RUNS = 300; // curves fetched for the groups' chart, at most

// A group's curve: at each number of samples, the mean test accuracy over its finished runs
// with a point there (as the group's statistics), and the band mean +- sample std (where
// two or more runs have one).
function groupCurve(runs) {
  const at = new Map();
  for (const r of runs.filter(r => r.status === "finished")) {
    const curve = state.curves.get(r.id);
    if (!curve) continue;
    for (const [x, y] of testPoints(curve)) {
      if (!at.has(x)) at.set(x, []);
      at.get(x).push(y);
    }
  }
  const xs = [...at.keys()].sort((a, b) => a - b);
  const points = [], band = [];
  for (const x of xs) {
    const s = stats(at.get(x));
    points.push([x, s.mean]);
    band.push([x, s.mean - (s.n > 1 ? s.std : 0), s.mean + (s.n > 1 ? s.std : 0)]);
  }
  return { points, band };
}

let groupCurvesToken = 0; // a newer drawing makes an older one's fetches stop drawing

async function drawGroupCurves(list) {
  const box = document.getElementById("group-curves");
  const legend = document.getElementById("group-curves-legend");
  box.parentElement.hidden = list.length === 0;
  if (list.length === 0) return;
  const token = ++groupCurvesToken;
  const runs = list.flatMap(g => g.runs).filter(r => r.status === "finished");
  if (runs.length > GROUP_CURVES_MAX_RUNS) {
    box.textContent = "";
    legend.textContent = "";
    box.append(el("p", { class: "muted" },
      `${runs.length} runs in the groups: filter to ${GROUP_CURVES_MAX_RUNS} or fewer to draw their curves.`));
    return;
  }
  for (const r of runs)
    if (!state.curves.has(r.id)) {
      try {
        state.curves.set(r.id, await getJSON("/api/curve?run=" + r.id));
      } catch (e) {
        state.curves.set(r.id, { id: r.id, error: e.message, points: [] });
      }
      if (token !== groupCurvesToken) return;
    }
  box.textContent = "";
  legend.textContent = "";
  const series = list.map((g, i) => {
    const c = groupCurve(g.runs);
    const last = c.points.length > 0 ? c.points[c.points.length - 1][1] : NaN;
    return { attrs: { "data-group": JSON.stringify(g.values), "data-last-mean": fmt(last, 6) },
             color: COLORS[i % COLORS.length], points: c.points, band: c.band };
  });
  box.append(chart("group-chart", series));
  list.forEach((g, i) => legend.append(legendItem({ "data-group": JSON.stringify(g.values) },
    series[i].color, `${g.values.map(v => fmt(v)).join(" ")} ` +
    `(${g.runs.filter(r => r.status === "finished").length} finished runs)`)));
}

// ---- figures ----------------------------------------------------------------------------

async function loadFigures(version) {
  const box = document.getElementById("figures");
  const note = document.getElementById("figures-note");
  let list;
  try {
    list = await getJSON("/api/figures");
  } catch (e) {
    note.textContent = "(" + e.message + ")";
    return;
  }
  box.textContent = "";
  note.textContent = list.error ? `(${list.error})`
    : `(the report's: ${list.runs_used} of ${list.runs_read} runs placed; ${list.figures.length} figure${list.figures.length === 1 ? "" : "s"})`;
  for (const name of list.figures) {
    const fig = el("figure", { "data-figure": name });
    const img = el("img", { src: `/figures/${name}.svg?v=${encodeURIComponent(version || "")}`, alt: name });
    fig.append(img, el("figcaption", {}, name));
    box.append(fig);
  }
}

// ---- runs and status --------------------------------------------------------------------

async function loadRuns() {
  const data = await getJSON("/api/runs");
  state.runs = data.runs;
  state.varied = data.varied;
  state.groupKeys = state.groupKeys.filter(k => k === "model" || data.varied.includes(k));
  document.getElementById("db").textContent = data.db;
  drawGroupKeys();
  drawTables();
}

function drawStatus(st) {
  const box = document.getElementById("status");
  box.textContent = "";
  box.dataset.state = st.running.length > 0 ? "running" : "idle";
  box.dataset.running = st.running.length;
  const parts = Object.entries(st.counts).filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`);
  box.append(parts.length > 0 ? parts.join(" · ") : "no runs yet");
  for (const r of st.running) {
    const what = r.step === null ? "starting"
      : `step ${fmtInt(r.step)}, ${fmtInt(r.samples)} samples` +
        (r.test_acc !== null ? `, test acc ${r.test_acc.toFixed(4)}` : "");
    box.append(el("span", { class: "run", "data-run": r.id }, `${r.id.slice(0, 8)} ${r.model}: ${what}`));
  }
}

async function poll() {
  let next = POLL_IDLE_MS;
  try {
    const st = await getJSON("/api/status");
    drawStatus(st);
    // curves of runs that are still learning (or just stopped): those of ticked runs
    // fetched again when they grew, the others dropped from the cache first (the groups'
    // chart, drawn from finished runs, then fetches a finished run's whole curve)
    const counts = new Map(st.running.map(r => [r.id, r.points]));
    const grown = [...new Set([...counts.keys(), ...state.running.keys()])]
      .filter(id => counts.get(id) !== state.running.get(id));
    state.running = counts;
    for (const id of grown) state.curves.delete(id);
    if (st.key !== state.statusKey) {
      state.statusKey = st.key;
      await loadRuns();
      loadFigures(st.key);
    }
    for (const id of grown) if (state.selected.includes(id)) loadCurve(id);
    if (st.running.length > 0) next = POLL_RUNNING_MS;
  } catch (e) {
    const box = document.getElementById("status");
    box.dataset.state = "error";
    box.textContent = "server unreachable: " + e.message;
  }
  setTimeout(poll, next);
}

// The address's fragment sets the view: #select=ID,ID (runs ticked, ids or prefixes),
// &group=KEY,KEY, &filter=TEXT. Shared links and the browser test use it.
function viewFromAddress() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const list = name => (params.get(name) || "").split(",").filter(s => s.length > 0);
  state.selected = list("select").filter(s => /^[0-9a-f]+$/.test(s));
  state.groupKeys = list("group");
  state.filter = params.get("filter") || "";
  document.getElementById("filter").value = state.filter;
}

async function start() {
  document.getElementById("filter").addEventListener("input", e => {
    state.filter = e.target.value;
    drawTables();
  });
  viewFromAddress();
  await poll(); // loads the runs and the figures
  // ids from the address may be prefixes: take the runs they name
  state.selected = state.selected.map(p => (state.runs.find(r => r.id.startsWith(p)) || { id: p }).id);
  drawTables();
  for (const id of state.selected) loadCurve(id);
  if (state.selected.length === 0) drawCurves();
}

start();

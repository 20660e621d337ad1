// app.js - the dashboard of `selectivbench serve` (docs/dashboard.md): the state of the view,
// kept in the address's fragment so that a view can be shared; the charts of the ticked runs
// and of the groups, the scatter of a sweep, the figures, and the polling that keeps it all
// live (/api/status every 2 s while runs train). util.js, chart.js, table.js and runpage.js
// are loaded before it.
"use strict";

const POLL_RUNNING_MS = 2000; // while a run is running
const POLL_IDLE_MS = 10000;   // otherwise, to notice a sweep that starts
const GROUP_CURVES_MAX_RUNS = 300; // curves fetched for the groups' chart, at most

const state = {
  runs: [],          // /api/runs's runs
  varied: [],        // configuration keys whose value differs between runs
  configKeys: [],    // every configuration key of the runs, in the table's order
  sort: { key: null, dir: 1 },
  filter: "",
  groupKeys: [],     // keys to group by, in the order ticked
  selected: [],      // run ids whose curves are drawn, in the order ticked
  columns: null,     // the chosen columns (keys) after the fixed ones; null: the defaults
  metric: "test_acc", xAxis: "samples", logX: false, logY: false, smoothing: 0,
  zoom: null,        // [x0, x1] of the curves' charts, or null
  view: "runs",      // "runs" or "scatter"
  run: null,         // the id of the run page shown, or null
  scatterX: "model", scatterY: "test_acc", scatterLogX: false, scatterLogY: false,
  curves: new Map(), // run id -> its /api/curve answer
  statusKey: null,   // /api/status's key when the runs were last loaded
  running: new Map(), // running run id -> its point count at the last poll
  runsAddress: "",   // the fragment of the last runs or scatter view (the run page's way back)
};

// ---- the address --------------------------------------------------------------------------

// #select=ID,ID&group=KEY,KEY&filter=TEXT&metric=M&x=X&logx=1&logy=1&smooth=W&cols=K,K&
// view=scatter&sx=KEY&sy=M&slogx=1&slogy=1, or #run=ID for a run's page.
function readAddress() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const list = name => (params.get(name) || "").split(",").filter(s => s.length > 0);
  state.run = /^[0-9a-f]{4,16}$/.test(params.get("run") || "") ? params.get("run") : null;
  if (state.run !== null) return;
  state.selected = list("select").filter(s => /^[0-9a-f]+$/.test(s));
  state.groupKeys = list("group");
  state.filter = params.get("filter") || "";
  state.metric = metricOf(params.get("metric")).key;
  state.xAxis = xAxisOf(params.get("x")).key;
  state.logX = params.get("logx") === "1";
  state.logY = params.get("logy") === "1";
  const w = Number(params.get("smooth"));
  state.smoothing = w > 0 && w < 1 ? w : 0;
  state.columns = params.has("cols") ? list("cols") : null;
  state.view = params.get("view") === "scatter" ? "scatter" : "runs";
  state.scatterX = params.get("sx") || "model";
  state.scatterY = params.get("sy") || "test_acc";
  state.scatterLogX = params.get("slogx") === "1";
  state.scatterLogY = params.get("slogy") === "1";
  state.zoom = null;
}

function viewAddress() {
  const p = new URLSearchParams();
  const put = (k, v, skip) => { if (v !== skip && v !== "") p.set(k, v); };
  put("select", state.selected.join(","));
  put("group", state.groupKeys.join(","));
  put("filter", state.filter);
  put("metric", state.metric, "test_acc");
  put("x", state.xAxis, "samples");
  if (state.logX) p.set("logx", "1");
  if (state.logY) p.set("logy", "1");
  if (state.smoothing > 0) p.set("smooth", String(state.smoothing));
  if (state.columns !== null) p.set("cols", state.columns.join(","));
  put("view", state.view, "runs");
  put("sx", state.scatterX, "model");
  put("sy", state.scatterY, "test_acc");
  if (state.scatterLogX) p.set("slogx", "1");
  if (state.scatterLogY) p.set("slogy", "1");
  return p.toString().replace(/%2C/g, ","); // lists stay readable in a shared link
}

// ---- drawing ------------------------------------------------------------------------------

function redraw() {
  const onRun = state.run !== null;
  if (!onRun) {
    state.runsAddress = viewAddress();
    history.replaceState(null, "", "#" + state.runsAddress);
  }
  document.getElementById("controls").hidden = onRun;
  document.getElementById("runs-view").hidden = onRun || state.view !== "runs";
  document.getElementById("scatter-view").hidden = onRun || state.view !== "scatter";
  document.getElementById("run-page").hidden = !onRun;
  for (const tab of document.querySelectorAll(".tab"))
    tab.classList.toggle("active", !onRun && tab.dataset.view === state.view);
  if (onRun) return;
  const { runs } = drawTables(); // the groups and their curves follow their reply
  drawChartControls();
  if (state.view === "scatter") drawScatter(runs);
  else drawCurves();
}

function setOptions(select, options, value) {
  if (select.options.length !== options.length ||
      [...select.options].some((o, i) => o.value !== options[i][0])) {
    select.textContent = "";
    for (const [v, label] of options) select.append(el("option", { value: v }, label));
  }
  select.value = value;
}

function drawChartControls() {
  setOptions(document.getElementById("metric"), METRICS.map(m => [m.key, m.label]), state.metric);
  setOptions(document.getElementById("x-axis"), X_AXES.map(a => [a.key, a.label]), state.xAxis);
  document.getElementById("log-x").checked = state.logX;
  document.getElementById("log-y").checked = state.logY;
  document.getElementById("smoothing").value = state.smoothing;
  document.getElementById("smoothing-value").textContent = fmt(state.smoothing, 2);
  document.getElementById("reset-zoom").hidden = state.zoom === null;
  const numeric = METRIC_COLUMNS.filter(c => !c.text);
  setOptions(document.getElementById("scatter-y"), numeric.map(c => [c.key, c.label]), state.scatterY);
  setOptions(document.getElementById("scatter-x"),
             [["model", "model"], ...state.configKeys.map(k => [k, k]),
              ...numeric.map(c => [c.key, c.label])], state.scatterX);
  document.getElementById("scatter-log-x").checked = state.scatterLogX;
  document.getElementById("scatter-log-y").checked = state.scatterLogY;
}

function legendItem(attrs, color, text) {
  const item = el("span", attrs);
  const swatch = svg("svg", { width: 22, height: 8 });
  swatch.append(svg("line", { x1: 0, x2: 22, y1: 4, y2: 4, stroke: color, "stroke-width": 3 }));
  item.append(swatch, " " + text);
  return item;
}

function curveChart(id, series) {
  const m = metricOf(state.metric);
  return lineChart({ id, series, xLabel: xAxisOf(state.xAxis).label, yLabel: m.label, unit: m.unit,
                     logX: state.logX, logY: state.logY, zoom: state.zoom,
                     onZoom: range => { state.zoom = range; redraw(); } });
}

// ---- the ticked runs' curves --------------------------------------------------------------

function toggleRun(id, on) {
  state.selected = on ? [...state.selected.filter(x => x !== id), id]
                      : state.selected.filter(x => x !== id);
  if (on && !state.curves.has(id)) loadCurve(id);
  redraw();
}

async function fetchCurve(id) {
  try {
    state.curves.set(id, await getJSON("/api/curve?run=" + encodeURIComponent(id)));
  } catch (e) {
    state.curves.set(id, { id, error: e.message, points: [], live: [] });
  }
}

async function loadCurve(id) {
  await fetchCurve(id);
  if (state.run === null && state.view === "runs") drawCurves();
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
  const m = metricOf(state.metric);
  const shown = state.selected.filter(id => state.curves.has(id)).map(id => state.curves.get(id));
  const series = shown.map(curve => {
    const raw = metricPoints(curve, state.metric, state.xAxis, true);
    return { label: curve.id.slice(0, 8), attrs: { "data-run": curve.id },
             color: COLORS[state.selected.indexOf(curve.id) % COLORS.length],
             points: smooth(raw, state.smoothing), raw: state.smoothing > 0 ? raw : null, band: null };
  });
  box.append(curveChart("curve-chart", series));
  shown.forEach((curve, i) => {
    const pts = series[i].points;
    const last = pts.length > 0 ? fmt(pts[pts.length - 1][1], 4) : `no ${m.label} points yet`;
    const live = (curve.live || []).length;
    const item = legendItem({ "data-run": curve.id }, series[i].color,
      `${curve.id.slice(0, 8)} ${curve.model || ""} ${curve.status || ""} (${pts.length} points` +
      `${live > 0 ? `, ${live} live` : ""}, last ${last})`);
    if (curve.error) item.append(" error: " + curve.error);
    legend.append(item);
  });
}

// ---- the groups' curves -------------------------------------------------------------------

// A group's curve: at each x, the mean of the metric over its finished runs with an
// evaluation there (live points are left out: they fall at different steps in each run),
// and the band mean +- sample std (where two or more runs have one).
function groupCurve(runs) {
  const at = new Map();
  for (const r of runs.filter(r => r.status === "finished")) {
    const curve = state.curves.get(r.id);
    if (!curve) continue;
    for (const [x, y] of metricPoints(curve, state.metric, state.xAxis, false)) {
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
      await fetchCurve(r.id);
      if (token !== groupCurvesToken) return;
    }
  box.textContent = "";
  legend.textContent = "";
  const series = list.map((g, i) => {
    const c = groupCurve(g.runs);
    const smoothed = smooth(c.points, state.smoothing);
    const last = c.points.length > 0 ? c.points[c.points.length - 1][1] : NaN;
    return { label: g.values.map(v => fmt(v)).join(" ") + (g.apart ? ` (${g.apart})` : ""),
             attrs: { "data-group": JSON.stringify(g.values), "data-last-mean": fmt(last, 6) },
             color: COLORS[i % COLORS.length], points: smoothed,
             raw: state.smoothing > 0 ? c.points : null, band: c.band };
  });
  box.append(curveChart("group-chart", series));
  list.forEach((g, i) => legend.append(legendItem({ "data-group": JSON.stringify(g.values) },
    series[i].color, `${series[i].label} ` +
    `(${g.runs.filter(r => r.status === "finished").length} finished runs)`)));
}

// ---- the sweep's scatter ------------------------------------------------------------------

function drawScatter(runs) {
  const box = document.getElementById("scatter");
  const legend = document.getElementById("scatter-legend");
  box.textContent = "";
  legend.textContent = "";
  const yCol = METRIC_COLUMNS.find(c => c.key === state.scatterY) || METRIC_COLUMNS[0];
  const xCol = METRIC_COLUMNS.find(c => c.key === state.scatterX);
  const xOfRun = r => xCol ? xCol.get(r) : valueOf(r, state.scatterX);
  const models = [...new Set(runs.map(r => r.model))].sort();
  const points = runs.map(r => ({
    x: xOfRun(r), y: yCol.get(r), color: COLORS[models.indexOf(r.model) % COLORS.length],
    attrs: { "data-run": r.id }, id: r.id,
    title: `${r.id.slice(0, 8)} ${r.model} ${r.status}: ${yCol.label} ${fmt(yCol.get(r), 4)}, ` +
           `${state.scatterX} ${fmt(xOfRun(r))}`,
  })).filter(p => p.x !== undefined && p.x !== null);
  box.append(scatterChart({ id: "scatter-chart", points, xLabel: xCol ? xCol.label : state.scatterX,
                            yLabel: yCol.label, unit: yCol.key.endsWith("_acc") || yCol.key === "ceiling" ? "acc" : undefined,
                            logX: state.scatterLogX, logY: state.scatterLogY,
                            onClick: p => { location.hash = "run=" + p.id; } }));
  models.forEach((m, i) => legend.append(legendItem({ "data-model": m }, COLORS[i % COLORS.length], m)));
}

// ---- figures ------------------------------------------------------------------------------

function openLightbox(name, src) {
  document.getElementById("lightbox-name").textContent = name;
  document.getElementById("lightbox-img").src = src;
  document.getElementById("lightbox-open").href = src;
  document.getElementById("lightbox").hidden = false;
}

function closeLightbox() {
  document.getElementById("lightbox").hidden = true;
}

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
    : `(the report's: ${list.runs_used} of ${list.runs_read} runs placed; ${list.figures.length} figure${list.figures.length === 1 ? "" : "s"}; a click shows one full size)`;
  for (const name of list.figures) {
    const src = `/figures/${name}.svg?v=${encodeURIComponent(version || "")}`;
    const fig = el("figure", { "data-figure": name });
    const img = el("img", { src, alt: name });
    img.addEventListener("click", () => openLightbox(name, src));
    fig.append(img, el("figcaption", {}, name));
    box.append(fig);
  }
}

// ---- runs and status ----------------------------------------------------------------------

async function loadRuns() {
  const data = await getJSON("/api/runs");
  state.runs = data.runs;
  state.varied = data.varied;
  const keys = [];
  for (const r of data.runs)
    for (const k of Object.keys(r.config)) if (!keys.includes(k)) keys.push(k);
  state.configKeys = keys;
  state.groupKeys = state.groupKeys.filter(k => k === "model" || data.varied.includes(k));
  document.getElementById("db").textContent = data.db;
  drawGroupKeys();
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
    const span = el("span", { class: "run", "data-run": r.id }, `${r.id.slice(0, 8)} ${r.model}: ${what}`);
    span.addEventListener("click", () => { location.hash = "run=" + r.id; });
    box.append(span);
  }
}

async function poll() {
  let next = POLL_IDLE_MS;
  try {
    const st = await getJSON("/api/status");
    drawStatus(st);
    // curves of runs that are still learning (or just stopped): fetched again when they
    // grew (ticked runs, the run page's), dropped from the cache otherwise
    const counts = new Map(st.running.map(r => [r.id, r.points]));
    const grown = [...new Set([...counts.keys(), ...state.running.keys()])]
      .filter(id => counts.get(id) !== state.running.get(id));
    state.running = counts;
    for (const id of grown) state.curves.delete(id);
    let reload = false;
    if (st.key !== state.statusKey) {
      state.statusKey = st.key;
      await loadRuns();
      loadFigures(st.key);
      reload = true;
    }
    const ticked = grown.filter(id => state.selected.includes(id));
    await Promise.all(ticked.map(fetchCurve));
    if (state.run !== null && grown.some(id => id.startsWith(state.run))) showRunPage(state.run);
    if (reload || ticked.length > 0) redraw();
    if (st.running.length > 0) next = POLL_RUNNING_MS;
  } catch (e) {
    const box = document.getElementById("status");
    box.dataset.state = "error";
    box.textContent = "server unreachable: " + e.message;
  }
  setTimeout(poll, next);
}

// ---- controls -----------------------------------------------------------------------------

function wire() {
  const on = (id, event, fn) => document.getElementById(id).addEventListener(event, fn);
  const set = fn => e => { fn(e.target); redraw(); };
  on("filter", "input", set(t => { state.filter = t.value; }));
  on("metric", "change", set(t => { state.metric = t.value; state.zoom = null; }));
  on("x-axis", "change", set(t => { state.xAxis = t.value; state.zoom = null; }));
  on("log-x", "change", set(t => { state.logX = t.checked; state.zoom = null; }));
  on("log-y", "change", set(t => { state.logY = t.checked; }));
  on("smoothing", "input", set(t => { state.smoothing = Number(t.value); }));
  on("reset-zoom", "click", set(() => { state.zoom = null; }));
  on("columns-default", "click", set(() => { state.columns = null; }));
  on("export-csv", "click", exportCSV);
  on("scatter-x", "change", set(t => { state.scatterX = t.value; }));
  on("scatter-y", "change", set(t => { state.scatterY = t.value; }));
  on("scatter-log-x", "change", set(t => { state.scatterLogX = t.checked; }));
  on("scatter-log-y", "change", set(t => { state.scatterLogY = t.checked; }));
  for (const tab of document.querySelectorAll(".tab"))
    tab.addEventListener("click", e => {
      e.preventDefault();
      state.view = tab.dataset.view;
      state.run = null;
      redraw();
    });
  on("lightbox-close", "click", closeLightbox);
  on("lightbox-img", "click", closeLightbox);
  document.addEventListener("keydown", e => { if (e.key === "Escape") closeLightbox(); });
  // the run page's way back: the view it was opened from
  document.addEventListener("click", e => {
    if (e.target.id !== "run-back") return;
    e.preventDefault();
    location.hash = state.runsAddress;
  });
  window.addEventListener("hashchange", async () => {
    readAddress();
    document.getElementById("filter").value = state.filter;
    if (state.run !== null) showRunPage(state.run);
    await Promise.all(state.selected.filter(id => !state.curves.has(id)).map(fetchCurve));
    redraw();
  });
}

async function start() {
  wire();
  readAddress();
  document.getElementById("filter").value = state.filter;
  await poll(); // loads the runs and the figures
  // ids from the address may be prefixes: take the runs they name
  state.selected = state.selected.map(p => (state.runs.find(r => r.id.startsWith(p)) || { id: p }).id);
  if (state.run !== null) showRunPage(state.run);
  await Promise.all(state.selected.map(fetchCurve));
  redraw();
}

start();

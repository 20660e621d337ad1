// table.js - the runs table: its columns (the varied configuration keys by default, any key or
// metric by the column chooser), the filter, the sort, the groups over seeds (as `results
// --group`) and the CSV of what the table shows. Uses util.js; state and redraw() are app.js's.
"use strict";

// Every column a run can show. get: the value (sort, filter, CSV), show: the cell's text.
const METRIC_COLUMNS = [
  { key: "test_acc", label: "test acc", get: r => r.test_acc, show: r => fmt(r.test_acc, 4) },
  { key: "valid_acc", label: "valid acc", get: r => r.valid_acc, show: r => fmt(r.valid_acc, 4) },
  { key: "train_acc", label: "train acc", get: r => r.train_acc, show: r => fmt(r.train_acc, 4) },
  { key: "test_loss", label: "test loss", get: r => r.test_loss, show: r => fmt(r.test_loss, 4) },
  { key: "valid_loss", label: "valid loss", get: r => r.valid_loss, show: r => fmt(r.valid_loss, 4) },
  { key: "train_loss", label: "train loss", get: r => r.train_loss, show: r => fmt(r.train_loss, 4) },
  { key: "ceiling", label: "ceiling", get: r => r.ceiling, show: r => fmt(r.ceiling, 4) },
  { key: "effective_memory", label: "eff. memory", get: r => r.effective_memory },
  { key: "params", label: "params", get: r => r.params, show: r => fmtInt(r.params) },
  { key: "wall_s", label: "wall s", get: r => r.wall_s, show: r => fmt(r.wall_s, 1) },
  { key: "tokens_per_s", label: "tokens/s", get: r => r.tokens_per_s, show: r => fmtInt(Math.round(r.tokens_per_s)) },
  { key: "attempts", label: "attempts", get: r => r.attempts },
  { key: "finished_at", label: "finished", text: true, get: r => r.finished_at },
];
// The metric columns shown until the chooser says otherwise (test accuracy first: it stays
// on screen however many keys vary).
const DEFAULT_METRICS = ["test_acc", "valid_acc", "params", "train_acc", "test_loss", "ceiling", "wall_s", "finished_at"];

function allColumns() {
  const cols = [
    { key: "id", label: "id", text: true, fixed: true, get: r => r.id, show: r => r.id.slice(0, 8) },
    { key: "status", label: "status", text: true, fixed: true, get: r => r.status,
      show: r => r.damaged ? r.status + " (damaged)" : r.status },
    { key: "model", label: "model", text: true, fixed: true, get: r => r.model },
  ];
  cols.push(...METRIC_COLUMNS);
  for (const k of state.configKeys)
    cols.push({ key: "config." + k, label: k, config: k, get: r => r.config[k] });
  return cols;
}

// The columns shown, in their order: the fixed ones, then the chosen ones (by default the
// first metrics, the varied keys, the other default metrics).
function columns() {
  const all = allColumns();
  const byKey = new Map(all.map(c => [c.key, c]));
  const chosen = state.columns || [DEFAULT_METRICS[0], DEFAULT_METRICS[1],
    ...state.varied.map(k => "config." + k), ...DEFAULT_METRICS.slice(2)];
  return [...all.filter(c => c.fixed), ...chosen.map(k => byKey.get(k)).filter(Boolean)];
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

function missing(v) {
  return v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v));
}

function compareValues(a, b) {
  if (missing(a) || missing(b)) return missing(a) - missing(b); // missing last
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

function shownRuns(cols) {
  const terms = state.filter.split(/\s+/).filter(t => t.length > 0);
  const runs = state.runs.filter(r => matches(r, cols, terms));
  const col = state.sort.key ? allColumns().find(c => c.key === state.sort.key) : null;
  if (col) {
    const dir = state.sort.dir;
    runs.sort((x, y) => {
      const a = col.get(x), b = col.get(y);
      if (missing(a) || missing(b)) return compareValues(a, b); // missing last either way
      return dir * compareValues(a, b);
    });
  }
  return runs;
}

// The groups over seeds of the runs shown come from the server's /api/groups: the library's
// one rule, the one `results --group` prints (runs of equal values whose configurations
// differ in their seeds alone, labelled apart otherwise; mean and sample std of the finished
// runs). The runs are named by a mask over /api/runs's order: hex digit k for runs 4k..4k+3.
function runsMask(runs) {
  const index = new Map(state.runs.map((r, i) => [r.id, i]));
  const digits = new Array(Math.ceil(state.runs.length / 4)).fill(0);
  for (const r of runs) {
    const i = index.get(r.id);
    if (i !== undefined) digits[i >> 2] |= 1 << (i & 3);
  }
  return digits.map(d => d.toString(16)).join("");
}

async function fetchGroups(runs) {
  const reply = await getJSON("/api/groups?group=" + encodeURIComponent(state.groupKeys.join(",")) +
                              "&runs=" + runsMask(runs));
  const byId = new Map(state.runs.map(r => [r.id, r]));
  return reply.groups.map(g => ({
    values: state.groupKeys.map(k => g[k]), n: g.n, test_acc: g.test_acc,
    test_loss: g.test_loss, apart: g.apart || "",
    runs: g.runs.map(id => byId.get(id)).filter(Boolean),
  }));
}

// ---- drawing ----------------------------------------------------------------------------

function drawGroupKeys() {
  const box = document.getElementById("group-keys");
  box.textContent = "";
  for (const key of ["model", ...state.varied]) {
    const input = el("input", { type: "checkbox", value: key, "data-key": key });
    input.checked = state.groupKeys.includes(key);
    input.addEventListener("change", () => {
      state.groupKeys = input.checked ? [...state.groupKeys, key]
                                      : state.groupKeys.filter(k => k !== key);
      redraw();
    });
    const label = el("label");
    label.append(input, " " + key);
    box.append(label);
  }
}

// The column chooser: a box per column (the fixed ones always shown), "defaults" to go back.
function drawColumnChooser() {
  const box = document.getElementById("column-list");
  box.textContent = "";
  const shown = new Set(columns().map(c => c.key));
  const section = (title, cols) => {
    box.append(el("div", { class: "col-section" }, title));
    for (const c of cols) {
      const input = el("input", { type: "checkbox", "data-col": c.key });
      input.checked = shown.has(c.key);
      input.addEventListener("change", () => {
        const now = columns().filter(x => !x.fixed).map(x => x.key);
        state.columns = input.checked ? [...now, c.key] : now.filter(k => k !== c.key);
        redraw();
      });
      const label = el("label");
      label.append(input, " " + c.label);
      box.append(label);
    }
  };
  const all = allColumns();
  section("metrics", all.filter(c => !c.fixed && !c.config));
  section("configuration", all.filter(c => c.config));
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
      redraw();
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
    const cell = el("td", cls ? { class: cls } : {});
    if (c.key === "id") { // opens the run page
      cell.append(el("a", { href: "#run=" + run.id, class: "run-link", "data-open-run": run.id },
                     cellText(c, run)));
      cell.title = run.id + (run.checkpoint ? "\ncheckpoint: " + run.checkpoint : "");
    } else {
      cell.textContent = cellText(c, run);
    }
    if (c.key === "status" && (run.reason || run.damaged))
      cell.title = [run.reason, run.damaged].filter(Boolean).join("; ");
    tr.append(cell);
  }
  return tr;
}

function drawGroups(list) {
  const wrap = document.getElementById("groups-wrap");
  wrap.hidden = state.groupKeys.length === 0;
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
    const tr = el("tr", { "data-group": JSON.stringify(g.values), "data-n": g.test_acc.n });
    for (const v of g.values) tr.append(el("td", { class: "text" }, fmt(v)));
    tr.append(el("td", {}, String(g.test_acc.n)), el("td", {}, fmt(g.test_acc.mean, 4)),
              el("td", {}, fmt(g.test_acc.std, 4)), el("td", {}, fmt(g.test_loss.mean, 4)),
              el("td", {}, String(g.runs.length)));
    if (apart) tr.append(el("td", { class: "text" }, g.apart));
    tbody.append(tr);
  }
}

let groupsToken = 0; // a newer drawing makes an older one's reply stop drawing

// The groups of the runs shown (fetched), their table and, beside the curves, their curves.
async function drawGroupsOf(runs) {
  const token = ++groupsToken;
  let list = [];
  if (state.groupKeys.length > 0) {
    try {
      list = await fetchGroups(runs);
    } catch (e) {
      if (token !== groupsToken) return;
      drawGroups([]);
      const tr = el("tr");
      tr.append(el("td", { class: "text muted" }, "groups: " + e.message));
      document.getElementById("groups").tBodies[0].append(tr);
      return;
    }
  }
  if (token !== groupsToken) return;
  drawGroups(list);
  if (state.view !== "scatter") drawGroupCurves(list);
}

// Draws the table and (when their reply comes) the groups; returns the runs shown.
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
  drawGroupsOf(runs);
  drawColumnChooser();
  return { runs };
}

// ---- CSV --------------------------------------------------------------------------------

function csvField(v) {
  const s = typeof v === "number" ? (Number.isFinite(v) ? String(v) : "") : fmt(v);
  return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

// The table as shown (its filter, order and columns; full ids and full precision) as CSV.
function tableCSV() {
  const cols = columns();
  const lines = [cols.map(c => csvField(c.config || c.key)).join(",")];
  for (const r of shownRuns(cols)) lines.push(cols.map(c => csvField(c.get(r))).join(","));
  return lines.join("\n") + "\n";
}

function exportCSV() {
  const blob = new Blob([tableCSV()], { type: "text/csv" });
  const a = el("a", { href: URL.createObjectURL(blob), download: "runs.csv" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

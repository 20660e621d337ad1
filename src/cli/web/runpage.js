// runpage.js - one run's page (#run=ID): what it is and how it ended, the command that trains
// it again, its checkpoint and log, its curves (accuracies, losses, learning rate,
// throughput: evaluations and live points), its probe figures and its configuration as
// stored and as trained. Uses util.js and chart.js; state is app.js's.
"use strict";

function factRow(table, name, value, attrs) {
  const tr = el("tr", attrs || {});
  tr.append(el("th", { class: "text" }, name), el("td", { class: "text" }, value));
  table.append(tr);
}

function fileFacts(f) {
  if (!f || !f.path) return "none";
  return f.exists ? `${f.path} (${fmtInt(f.bytes)} bytes)` : `${f.path} (missing)`;
}

// The run's curves for these metrics in one chart: a series per metric.
function runChart(id, curve, metricKeys, yLabel) {
  const xKey = state.xAxis;
  const series = metricKeys.map((key, i) => {
    const raw = metricPoints(curve, key, xKey, true);
    const smoothed = smooth(raw, state.smoothing);
    return { label: metricOf(key).label, attrs: { "data-metric": key }, color: COLORS[i],
             points: smoothed, raw: state.smoothing > 0 ? raw : null, band: null };
  }).filter(s => s.points.length > 0);
  const box = el("div", { class: "run-chart" });
  box.append(el("h3", {}, yLabel));
  if (series.length === 0) {
    box.append(el("p", { class: "muted" }, "no points yet"));
    return box;
  }
  box.append(lineChart({ id, series, xLabel: xAxisOf(xKey).label, yLabel,
                         unit: metricOf(metricKeys[0]).unit, logX: state.logX, logY: state.logY,
                         zoom: null, onZoom: null }));
  const legend = el("div", { class: "legend" });
  for (const s of series) {
    const item = el("span", { "data-metric": s.attrs["data-metric"] });
    const swatch = svg("svg", { width: 22, height: 8 });
    swatch.append(svg("line", { x1: 0, x2: 22, y1: 4, y2: 4, stroke: s.color, "stroke-width": 3 }));
    item.append(swatch, ` ${s.label} (${s.points.length} points)`);
    legend.append(item);
  }
  box.append(legend);
  return box;
}

function drawRunPage(run, curve) {
  const page = document.getElementById("run-page");
  page.textContent = "";
  page.dataset.run = run.id;
  page.dataset.status = run.status;
  const head = el("h2");
  head.append(el("a", { href: "#", class: "back", id: "run-back" }, "← runs"), ` Run ${run.id} `,
              el("span", { class: "muted" }, `${run.model}, ${run.status}`));
  page.append(head);
  if (run.reason) page.append(el("p", { class: "reason" }, run.reason));

  const cmd = el("div", { class: "command" });
  const pre = el("pre", { id: "run-command", "data-has-run-hash": run.command_has_run_hash ? 1 : 0 },
                 run.command || run.command_error);
  const copy = el("button", { type: "button", id: "copy-command" }, "copy");
  copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(pre.textContent));
  cmd.append(el("h3", {}, "Train it again"), pre, copy);
  if (run.command && !run.command_has_run_hash)
    cmd.append(el("p", { class: "reason" }, "this stored configuration does not give the run's id back: the command trains another run"));
  page.append(cmd);

  const facts = el("table", { class: "facts", id: "run-facts" });
  const metric = (name, v, d) => factRow(facts, name, fmt(v, d), { "data-fact": name });
  metric("test acc", run.test_acc, 4);
  metric("valid acc", run.valid_acc, 4);
  metric("train acc", run.train_acc, 4);
  metric("test loss", run.test_loss, 4);
  metric("valid loss", run.valid_loss, 4);
  metric("train loss", run.train_loss, 4);
  metric("ceiling", run.ceiling, 4);
  factRow(facts, "effective memory", fmt(run.effective_memory));
  factRow(facts, "parameters", fmtInt(run.params));
  factRow(facts, "state size", fmtInt(run.state_size));
  factRow(facts, "wall time", run.wall_s !== null ? `${fmt(run.wall_s, 1)} s` : "");
  factRow(facts, "tokens/s", fmtInt(run.tokens_per_s !== null ? Math.round(run.tokens_per_s) : null));
  factRow(facts, "arithmetic", `${run.threads > 0 ? run.threads + (run.threads === 1 ? " thread, " : " threads, ") : ""}engine ${run.engine || "?"}, fingerprint ${run.fingerprint || "?"}`);
  factRow(facts, "host", run.host);
  factRow(facts, "finished", run.finished_at);
  factRow(facts, "attempts", String(run.attempts));
  factRow(facts, "checkpoint", fileFacts(run.checkpoint_file), { id: "run-checkpoint" });
  factRow(facts, "log", fileFacts(run.log_file));
  page.append(facts);

  const charts = el("div", { class: "run-charts", id: "run-charts" });
  charts.append(runChart("run-acc", curve, ["test_acc", "valid_acc", "train_acc"], "accuracy"),
                runChart("run-loss", curve, ["test_loss", "valid_loss", "train_loss"], "loss"),
                runChart("run-lr", curve, ["lr"], "learning rate"),
                runChart("run-rate", curve, ["tokens_per_s"], "tokens/s"));
  page.append(el("h3", {}, `Curves (${(curve.points || []).length} evaluation rows, ${(curve.live || []).length} live points)`), charts);

  const probes = el("div", { class: "figures", id: "run-probes" });
  for (const name of run.probe_figures) {
    const src = `/api/probe?run=${run.id}&figure=${encodeURIComponent(name)}`;
    const fig = el("figure", { "data-probe": name });
    const link = el("a", { href: src, target: "_blank" });
    link.append(el("img", { src, alt: name }));
    fig.append(link, el("figcaption", {}, name));
    probes.append(fig);
  }
  page.append(el("h3", {}, "Probe figures"),
              run.probe_figures.length > 0 ? probes
                : el("p", { class: "muted" }, `none: \`selectivbench probe ${run.id.slice(0, 8)}\` makes them`));

  const cfg = el("table", { class: "facts", id: "run-config" });
  const eff = run.effective_config || {};
  for (const [k, v] of Object.entries(run.config)) {
    const trained = Object.prototype.hasOwnProperty.call(eff, k) && JSON.stringify(eff[k]) !== JSON.stringify(v)
      ? ` (as trained: ${fmt(eff[k])})` : "";
    factRow(cfg, k, fmt(v) + trained, { "data-key": k });
  }
  page.append(el("h3", {}, "Configuration"), cfg);
}

let runPageToken = 0;

async function showRunPage(id) {
  const token = ++runPageToken;
  const page = document.getElementById("run-page");
  try {
    const [run, curve] = await Promise.all([getJSON("/api/run?run=" + encodeURIComponent(id)),
                                            getJSON("/api/curve?run=" + encodeURIComponent(id))]);
    if (token !== runPageToken) return;
    drawRunPage(run, curve);
  } catch (e) {
    if (token !== runPageToken) return;
    page.textContent = "";
    page.append(el("h2", {}, `Run ${id}`), el("p", { class: "reason" }, e.message));
  }
}

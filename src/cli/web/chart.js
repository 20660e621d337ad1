// chart.js - the dashboard's charts as inline SVG: lines (learning curves: hover values, zoom
// by dragging across, log axes, smoothing drawn over the raw line) and a scatter (a metric
// against any key of a sweep's runs). Uses util.js.
"use strict";

const CHART_W = 760, CHART_H = 320, PAD_L = 62, PAD_R = 16, PAD_T = 12, PAD_B = 40;

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

// Ticks of a log axis over [lo, hi] (both > 0): the powers of ten inside, or with 2 and 5
// between them when fewer than three powers fall inside.
function logTicks(lo, hi) {
  const all = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
    for (const m of [1, 2, 5]) all.push({ t: +(m * 10 ** e).toPrecision(12), power: m === 1 });
  const inside = all.filter(a => a.t >= lo * (1 - 1e-9) && a.t <= hi * (1 + 1e-9));
  const powers = inside.filter(a => a.power);
  if (powers.length >= 3) return powers.map(a => a.t);
  if (inside.length >= 3) return inside.map(a => a.t);
  return ticks(lo, hi, 4).filter(t => t > 0); // within a decade: round numbers
}

// One axis: the scale from data to pixels over [p0, p1] and its ticks. values: the data;
// fixed: [lo, hi] to use instead of the data's range.
function axis(values, log, fixed, p0, p1) {
  let lo, hi;
  if (fixed) [lo, hi] = fixed;
  else {
    const v = values.filter(x => finite(x) && (!log || x > 0));
    lo = v.length > 0 ? Math.min(...v) : (log ? 1 : 0);
    hi = v.length > 0 ? Math.max(...v) : (log ? 10 : 1);
    if (!log && lo > 0 && lo < hi * 0.25) lo = 0; // counts and losses start at 0
    if (hi === lo) { hi = log ? hi * 10 : hi + 1; lo = log ? lo / 10 : lo - (lo === 0 ? 0 : 1); }
    if (!log) { const pad = (hi - lo) * 0.04; hi += pad; lo = lo === 0 ? 0 : lo - pad; }
    else { lo /= 1.1; hi *= 1.1; }
  }
  const t = log ? Math.log10 : (x => x);
  const a = t(lo), b = t(hi);
  const scale = x => p0 + (t(x) - a) / (b - a || 1) * (p1 - p0);
  const invert = px => {
    const u = a + (px - p0) / (p1 - p0) * (b - a);
    return log ? 10 ** u : u;
  };
  return { lo, hi, log, scale, invert, ticks: log ? logTicks(lo, hi) : ticks(lo, hi, 6),
           label: shortNumber };
}

// The grid, the ticks (each axis's label(t) writes them) and the axes' names.
function frame(box, xa, ya, xLabel, yLabel) {
  for (const y of ya.ticks) {
    box.append(svg("line", { class: "grid", x1: PAD_L, x2: CHART_W - PAD_R, y1: ya.scale(y), y2: ya.scale(y) }));
    box.append(svg("text", { x: PAD_L - 6, y: ya.scale(y) + 4, "text-anchor": "end" }, ya.label(y)));
  }
  for (const x of xa.ticks) {
    box.append(svg("line", { class: "grid", x1: xa.scale(x), x2: xa.scale(x), y1: PAD_T, y2: CHART_H - PAD_B }));
    box.append(svg("text", { x: xa.scale(x), y: CHART_H - PAD_B + 16, "text-anchor": "middle" }, xa.label(x)));
  }
  box.append(svg("line", { class: "axis", x1: PAD_L, x2: CHART_W - PAD_R, y1: CHART_H - PAD_B, y2: CHART_H - PAD_B }));
  box.append(svg("line", { class: "axis", x1: PAD_L, x2: PAD_L, y1: PAD_T, y2: CHART_H - PAD_B }));
  box.append(svg("text", { x: (PAD_L + CHART_W - PAD_R) / 2, y: CHART_H - 6, "text-anchor": "middle" },
                 xLabel + (xa.log ? " (log)" : "")));
  const mid = (PAD_T + CHART_H - PAD_B) / 2;
  box.append(svg("text", { x: 14, y: mid, "text-anchor": "middle", transform: `rotate(-90 14 ${mid})` },
                 yLabel + (ya.log ? " (log)" : "")));
}

// A line chart. opts: id, series [{label, attrs (set on its polyline), color, points [[x, y]],
// raw (the unsmoothed points, drawn faint) or null, band [[x, lo, hi]] or null}], xLabel,
// yLabel, unit ("acc": axis [0, 1] unless log), logX, logY, zoom ([x0, x1] or null) and
// onZoom(range or null): a drag across the chart zooms to it, a double click zooms out.
// Returns a block holding the SVG and its hover box.
function lineChart(opts) {
  const { id, series, logX, logY, zoom } = opts;
  const wrap = el("div", { class: "chart-wrap" });
  const inX = x => !zoom || (x >= zoom[0] && x <= zoom[1]);
  const shown = series.map(s => {
    const keep = p => finite(p[0]) && (!logX || p[0] > 0) && inX(p[0]);
    return { ...s, points: s.points.filter(p => keep(p) && (!logY || p[1] > 0)),
             raw: s.raw ? s.raw.filter(p => keep(p) && (!logY || p[1] > 0)) : null,
             band: s.band ? s.band.filter(b => keep(b) && (!logY || b[1] > 0)) : null };
  });
  const xs = shown.flatMap(s => s.points.map(p => p[0]));
  const ys = shown.flatMap(s => [...s.points, ...(s.raw || [])].map(p => p[1]));
  const xa = axis(xs, logX, zoom, PAD_L, CHART_W - PAD_R);
  const accAxis = opts.unit === "acc" && !logY;
  const ya = axis(ys, logY, accAxis ? [0, 1] : null, CHART_H - PAD_B, PAD_T);
  if (accAxis) ya.label = y => y.toFixed(1);
  const box = svg("svg", { class: "chart", id, width: CHART_W, height: CHART_H,
                           viewBox: `0 0 ${CHART_W} ${CHART_H}`, "data-series": series.length,
                           "data-log-x": logX ? 1 : 0, "data-log-y": logY ? 1 : 0,
                           "data-zoom": zoom ? zoom.map(v => +v.toPrecision(6)).join(",") : "" });
  frame(box, xa, ya, opts.xLabel, opts.yLabel);
  const clampY = y => Math.min(Math.max(ya.scale(y), PAD_T), CHART_H - PAD_B);
  const xy = (x, y) => `${xa.scale(x).toFixed(1)},${clampY(y).toFixed(1)}`;
  for (const s of shown) {
    if (s.band && s.band.length > 1) {
      const outline = [...s.band.map(b => xy(b[0], b[2])), ...s.band.slice().reverse().map(b => xy(b[0], b[1]))];
      box.append(svg("polygon", { class: "band", fill: s.color, "fill-opacity": 0.15, points: outline.join(" ") }));
    }
    if (s.raw && s.raw.length > 0)
      box.append(svg("polyline", { class: "raw", stroke: s.color, points: s.raw.map(p => xy(p[0], p[1])).join(" ") }));
    box.append(svg("polyline", { ...s.attrs, "data-points": s.points.length, stroke: s.color,
                                 points: s.points.map(p => xy(p[0], p[1])).join(" ") }));
    if (s.points.length <= 60) // markers only where they stay apart
      for (const p of s.points)
        box.append(svg("circle", { cx: xa.scale(p[0]), cy: clampY(p[1]), r: 2.5, fill: s.color }));
  }
  const tip = el("div", { class: "tip", id: id + "-tip", hidden: "" });
  wrap.append(box, tip);
  interact(box, tip, shown, xa, ya, opts);
  return wrap;
}

// Hover (a line at the nearest x with every series' value there) and zoom (drag across).
function interact(box, tip, shown, xa, ya, opts) {
  const overlay = svg("rect", { class: "overlay", x: PAD_L, y: PAD_T, width: CHART_W - PAD_L - PAD_R,
                                height: CHART_H - PAD_T - PAD_B });
  const line = svg("line", { class: "hover-line", y1: PAD_T, y2: CHART_H - PAD_B, visibility: "hidden" });
  const sel = svg("rect", { class: "selection", y: PAD_T, height: CHART_H - PAD_T - PAD_B, width: 0, visibility: "hidden" });
  box.append(line, sel, overlay);
  const toX = ev => { // the event's x in the SVG's coordinates
    const r = box.getBoundingClientRect();
    return (ev.clientX - r.left) * CHART_W / r.width;
  };
  let dragFrom = null;
  overlay.addEventListener("mousemove", ev => {
    const px = toX(ev);
    if (dragFrom !== null) {
      sel.setAttribute("x", Math.min(dragFrom, px));
      sel.setAttribute("width", Math.abs(px - dragFrom));
      sel.setAttribute("visibility", "visible");
    }
    let best = null;
    for (const s of shown)
      for (const p of s.points) {
        const d = Math.abs(xa.scale(p[0]) - px);
        if (best === null || d < best.d) best = { d, x: p[0] };
      }
    if (best === null) return;
    const sx = xa.scale(best.x);
    line.setAttribute("x1", sx);
    line.setAttribute("x2", sx);
    line.setAttribute("visibility", "visible");
    tip.textContent = "";
    tip.dataset.x = best.x;
    tip.append(el("div", { class: "tip-x" }, `${opts.xLabel} ${fmtInt(best.x) || fmt(best.x)}`));
    for (const s of shown) {
      const p = s.points.find(q => q[0] === best.x);
      if (!p) continue;
      const row = el("div", { "data-series": s.label });
      const swatch = el("i");
      swatch.style.background = s.color; // CSSOM: the page's policy refuses style attributes
      row.append(swatch, `${s.label}: ${fmt(p[1], 4)}`);
      tip.append(row);
    }
    const r = box.getBoundingClientRect();
    tip.style.left = `${Math.min(sx * r.width / CHART_W + 12, r.width - 180)}px`;
    tip.style.top = "8px";
    tip.hidden = false;
  });
  overlay.addEventListener("mouseleave", () => {
    line.setAttribute("visibility", "hidden");
    tip.hidden = true;
  });
  overlay.addEventListener("mousedown", ev => { dragFrom = toX(ev); ev.preventDefault(); });
  overlay.addEventListener("mouseup", ev => {
    const from = dragFrom;
    dragFrom = null;
    sel.setAttribute("visibility", "hidden");
    if (from === null || !opts.onZoom) return;
    const to = toX(ev);
    if (Math.abs(to - from) < 6) return; // a click, not a drag
    const a = xa.invert(Math.min(from, to)), b = xa.invert(Math.max(from, to));
    opts.onZoom([a, b]);
  });
  overlay.addEventListener("dblclick", () => { if (opts.onZoom) opts.onZoom(null); });
}

// A scatter chart: opts.points [{x, y, color, attrs, title}]; x may be text (a category:
// one column per value, in sorted order); onClick(point).
function scatterChart(opts) {
  const { id, points, logY } = opts;
  const wrap = el("div", { class: "chart-wrap" });
  const categorical = points.some(p => typeof p.x !== "number");
  const cats = categorical ? [...new Set(points.map(p => fmt(p.x)))].sort() : [];
  const xValue = p => categorical ? cats.indexOf(fmt(p.x)) : p.x;
  const logX = opts.logX && !categorical;
  const usable = points.filter(p => (categorical || finite(p.x)) && finite(p.y) &&
                                    (!logX || p.x > 0) && (!logY || p.y > 0));
  const xa = categorical ? axis([], false, [-0.5, Math.max(cats.length - 0.5, 0.5)], PAD_L, CHART_W - PAD_R)
                         : axis(usable.map(p => p.x), logX, null, PAD_L, CHART_W - PAD_R);
  if (categorical) {
    xa.ticks = cats.map((_, i) => i);
    xa.label = i => cats[i];
  }
  const accAxis = opts.unit === "acc" && !logY;
  const ya = axis(usable.map(p => p.y), logY, accAxis ? [0, 1] : null, CHART_H - PAD_B, PAD_T);
  if (accAxis) ya.label = y => y.toFixed(1);
  const box = svg("svg", { class: "chart", id, width: CHART_W, height: CHART_H,
                           viewBox: `0 0 ${CHART_W} ${CHART_H}`, "data-points": usable.length,
                           "data-categorical": categorical ? 1 : 0 });
  frame(box, xa, ya, opts.xLabel, opts.yLabel);
  for (const p of usable) {
    const c = svg("circle", { ...p.attrs, class: "dot", cx: xa.scale(xValue(p)).toFixed(1),
                              cy: ya.scale(p.y).toFixed(1), r: 4.5, fill: p.color });
    c.append(svg("title", {}, p.title));
    if (opts.onClick) c.addEventListener("click", () => opts.onClick(p));
    box.append(c);
  }
  wrap.append(box);
  return wrap;
}

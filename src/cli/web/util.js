// util.js - what every part of the dashboard shares: elements, numbers, statistics, and the
// metrics a chart can draw from a run's curve (/api/curve: its evaluations and live points).
// Every text from the database goes into the page as text (textContent), never as HTML.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

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

function finite(v) {
  return typeof v === "number" && Number.isFinite(v);
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
  return finite(v) ? v.toLocaleString("en-US") : "";
}

function shortNumber(v) {
  if (Math.abs(v) >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
  if (Math.abs(v) >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
  if (v !== 0 && Math.abs(v) < 1e-3) return v.toExponential(1);
  return String(+v.toPrecision(3));
}

// Mean, sample standard deviation and count of the finite numbers of xs.
function stats(xs) {
  const v = xs.filter(finite);
  const n = v.length;
  if (n === 0) return { n: 0, mean: NaN, std: NaN };
  const mean = v.reduce((s, x) => s + x, 0) / n;
  const std = n > 1 ? Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : NaN;
  return { n, mean, std };
}

// ---- metrics of a curve ---------------------------------------------------------------

// What a chart can draw. split: the evaluations it reads ("train" also reads the live
// points, the training means written while a run trains); field: the number of a point;
// unit: "acc" for an axis in [0, 1].
const METRICS = [
  { key: "test_acc", label: "test accuracy", split: "test", field: "acc", unit: "acc" },
  { key: "valid_acc", label: "validation accuracy", split: "valid", field: "acc", unit: "acc" },
  { key: "train_acc", label: "train accuracy", split: "train", field: "acc", unit: "acc" },
  { key: "test_loss", label: "test loss", split: "test", field: "loss" },
  { key: "valid_loss", label: "validation loss", split: "valid", field: "loss" },
  { key: "train_loss", label: "train loss", split: "train", field: "loss" },
  { key: "lr", label: "learning rate", split: "any", field: "lr" },
  { key: "tokens_per_s", label: "tokens/s", split: "any", field: "tokens_per_s" },
];

const X_AXES = [
  { key: "samples", label: "training samples" },
  { key: "step", label: "updates" },
  { key: "wall_s", label: "wall time (s)" },
];

function metricOf(key) {
  return METRICS.find(m => m.key === key) || METRICS[0];
}

function xAxisOf(key) {
  return X_AXES.find(a => a.key === key) || X_AXES[0];
}

// The x of a point: its key, or the step when the key is unknown (samples of old rows).
function xOf(p, xKey) {
  const v = p[xKey];
  return finite(v) ? v : p.step;
}

// A curve's points of a metric as [x, y], by x; live: with the live points (for the
// training metrics, learning rate and throughput; a group's mean curve reads the
// evaluations only, which fall on the same steps in every seed).
function metricPoints(curve, metricKey, xKey, live) {
  const m = metricOf(metricKey);
  const rows = [...(curve.points || [])];
  if (live && (m.split === "train" || m.split === "any")) rows.push(...(curve.live || []));
  const bySteps = new Map(); // "any": one point per step
  const out = [];
  for (const p of rows) {
    if (m.split !== "any" && p.split !== m.split) continue;
    const y = p[m.field];
    if (!finite(y)) continue;
    if (m.split === "any") {
      if (bySteps.has(p.step)) continue;
      bySteps.set(p.step, true);
    }
    out.push([xOf(p, xKey), y]);
  }
  out.sort((a, b) => a[0] - b[0]);
  return out;
}

// Exponential moving average with the start debiased (TensorBoard's smoothing): weight in
// [0, 1); 0 leaves the points as they are.
function smooth(points, weight) {
  if (!(weight > 0) || points.length < 2) return points;
  let last = 0, count = 0;
  return points.map(([x, y]) => {
    last = last * weight + (1 - weight) * y;
    count++;
    return [x, last / (1 - weight ** count)];
  });
}

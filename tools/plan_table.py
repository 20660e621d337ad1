#!/usr/bin/env python3
"""The table of docs/cluster.md "What the grids cost": `selectivbench plan` of each sweep
file on this machine (2 ranks x 1 thread, 1 rank x 2 threads) and on a 64-node, 64-core
cluster (4096 ranks x 1 thread, 64 ranks x 64 threads). Every calibration is measured at
one thread (--calibration_threads 1); files named with --cached_only take the cached
calibrations of other files' shapes (scaled by FLOPs) instead of measuring their own.

usage: tools/plan_table.py FILE.yaml... [--cached_only FILE.yaml...] [--selectivbench PATH]
"""
import json
import subprocess
import sys

LAYOUTS = [(2, 1), (1, 2), (4096, 1), (64, 64)]


def duration(hours):
    s = hours * 3600.0
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if hours < 72:
        return f"{hours:.1f} h"
    if hours < 2 * 8766:
        return f"{hours / 24:.0f} days"
    return f"{hours / 8766:.1f} years"


def plan(exe, path, ranks, threads, cached_only):
    cmd = [exe, "plan", path, "--ranks", str(ranks), "--threads", str(threads),
           "--calibration_threads", "1", "--json"]
    if cached_only:
        cmd.append("--cached_only")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv):
    exe, files, cached, mode, i = "build/selectivbench", [], set(), "measure", 1
    while i < len(argv):
        if argv[i] == "--selectivbench" and i + 1 < len(argv):
            exe = argv[i + 1]
            i += 2
            continue
        if argv[i] == "--cached_only":
            mode = "cached"
            i += 1
            continue
        files.append(argv[i])
        if mode == "cached":
            cached.add(argv[i])
        i += 1
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("| file | runs | core-hours (1 thread) | 2 ranks x 1 thread (here) | 1 rank x 2 threads "
          "(here, *) | 4096 ranks x 1 thread | 64 ranks x 64 threads (*) | shapes measured / "
          "estimated |")
    print("|---|---:|---:|---|---|---|---|---|")
    for f in files:
        plans = [plan(exe, f, r, t, f in cached) for r, t in LAYOUTS]
        cal = plans[0].get("calibrations", [])
        estimated = sum(1 for c in cal if c.get("source") not in ("measured", "cached"))
        cells = []
        for (r, t), p in zip(LAYOUTS, plans):
            cell = duration(p["wall_hours"])
            if t > 1:
                cell += f" ({p['core_hours']:.3g} core-h)"
            cells.append(cell)
        print(f"| {f} | {plans[0]['runs']} | {plans[0]['core_hours']:.3g} | " + " | ".join(cells) +
              f" | {len(cal) - estimated} / {estimated} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""How well `selectivbench plan` predicted a sweep (docs/cluster.md, "How well the plan
predicts"): each run's planned seconds against the wall time its row records, by model and
width, and the sweep's wall time against the plan's (the sweep's own start and end, given
in seconds, or its runs' rows when they are not given).

usage: tools/plan_check.py PLAN.json DB [--wall SECONDS] [--selectivbench PATH]
  PLAN.json: `selectivbench plan FILE --ranks N --json` made before the sweep ran
  DB: the sweep's results database (or folder)
"""
import json
import subprocess
import sys
from collections import defaultdict


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    plan_path, db = argv[1], argv[2]
    wall, exe, i = None, "build/selectivbench", 3
    while i < len(argv):
        if argv[i] == "--wall" and i + 1 < len(argv):
            wall = float(argv[i + 1])
            i += 2
        elif argv[i] == "--selectivbench" and i + 1 < len(argv):
            exe = argv[i + 1]
            i += 2
        else:
            print(f"plan_check.py: unknown argument {argv[i]}", file=sys.stderr)
            return 2
    with open(plan_path) as f:
        plan = json.load(f)
    out = subprocess.run([exe, "results", "--db", db, "--json"], check=True,
                         capture_output=True, text=True).stdout
    doc = json.loads(out)
    rows = doc if isinstance(doc, list) else doc.get("runs", [])
    measured = {r["hash"]: r for r in rows if r.get("status") == "finished"}

    groups = defaultdict(lambda: [0, 0.0, 0.0])  # runs, planned s, measured s
    planned_sum = measured_sum = 0.0
    missing = 0
    for p in plan["per_run"]:
        r = measured.get(p["hash"])
        if r is None or r.get("wall_s") is None:
            missing += 1
            continue
        width = r["config"].get("feat_size", "?") if isinstance(r.get("config"), dict) else "?"
        g = groups[(p["model"], width)]
        g[0] += 1
        g[1] += p["seconds"]
        g[2] += r["wall_s"]
        planned_sum += p["seconds"]
        measured_sum += r["wall_s"]

    print("| model | width | runs | planned s per run | measured s per run | measured / planned |")
    print("|---|---:|---:|---:|---:|---:|")
    for (model, width), (n, ps, ms) in sorted(groups.items(), key=lambda kv: (str(kv[0][1]), kv[0][0])):
        print(f"| {model} | {width} | {n} | {ps / n:.0f} | {ms / n:.0f} | {ms / ps:.2f} |")
    if planned_sum > 0:
        print(f"\nruns' wall time summed: {measured_sum:.0f} s against {planned_sum:.0f} s planned "
              f"({measured_sum / planned_sum:.2f}); {missing} planned run(s) without a finished row")
    planned_wall = plan["wall_hours"] * 3600.0
    if wall is not None and planned_wall > 0:
        print(f"sweep wall time: {wall:.0f} s against {planned_wall:.0f} s planned on "
              f"{plan['ranks']} ranks of {plan['threads']} thread(s) "
              f"({wall / planned_wall:.2f}: {100.0 * (wall / planned_wall - 1.0):+.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""The scale study's table for docs/claims.md: mean test accuracy over seeds (and effective
memory) per model and value of one factor, the mean ceiling of each value's runs, and the
transformer's rank, from
`selectivbench results --db DB --json` (read from stdin or run here).

usage: tools/scale_table.py DB FACTOR [--where KEY=VALUE ...] [--selectivbench PATH]
"""
import json
import subprocess
import sys


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    db, factor = argv[1], argv[2]
    where, exe, i = [], "build/selectivbench", 3
    while i < len(argv):
        if argv[i] == "--where":
            where.append(argv[i + 1].split("=", 1))
            i += 2
        elif argv[i] == "--selectivbench":
            exe = argv[i + 1]
            i += 2
        else:
            print(f"scale_table.py: unknown argument {argv[i]}", file=sys.stderr)
            return 2
    out = subprocess.run([exe, "results", "--db", db, "--json"], check=True,
                         capture_output=True, text=True).stdout
    runs = [r for r in json.loads(out)["runs"] if r["status"] == "finished"]
    keep = []
    for r in runs:
        cfg = r.get("config") or {}
        if all(str(cfg.get(k)) == v for k, v in where):
            keep.append(r)
    cells = {}
    for r in keep:
        cfg = r["config"]
        key = (r["model"], cfg[factor])
        cells.setdefault(key, []).append(r)
    values = sorted({v for _, v in cells})
    models = []
    for m, _ in sorted(cells, key=lambda k: k[0]):
        if m not in models:
            models.append(m)
    mean = {}
    print("| model | " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in values) + " |")
    print("|---|" + "---|" * len(values))
    for m in models:
        row = []
        for v in values:
            rs = cells.get((m, v), [])
            if not rs:
                row.append("-")
                continue
            acc = sum(r["test_acc"] for r in rs) / len(rs)
            mem = [r["effective_memory"] for r in rs if isinstance(r["effective_memory"], (int, float))]
            beyond = [r for r in rs if r["effective_memory"] == ">32"]
            mean[(m, v)] = acc
            s = f"{acc:.3f}"
            if beyond:
                # a run at its ceiling has no finite window: each seed's value, not a mean
                s += " (" + " / ".join(f"{x:.2f}" for x in mem) + (" / " if mem else "")
                s += " / ".join(">32" for _ in beyond) + ")"
            elif mem:
                s += f" ({sum(mem) / len(mem):.2f})"
            if len(rs) < 2:
                s += f", {len(rs)} seed"
            row.append(s)
        print(f"| {m} | " + " | ".join(row) + " |")
    ceilings = []
    for v in values:
        cs = [r["ceiling"] for r in keep if r["config"][factor] == v
              and isinstance(r.get("ceiling"), (int, float))]
        ceilings.append(f"{sum(cs) / len(cs):.3f}" if cs else "-")
    print("| ceiling (the ideal observer) | " + " | ".join(ceilings) + " |")
    ranks = []
    for v in values:
        got = sorted(((a, m) for (m, vv), a in mean.items() if vv == v), reverse=True)
        names = [m for _, m in got]
        ranks.append(f"{names.index('transformer') + 1} of {len(names)}" if "transformer" in names else "-")
    print("| transformer's rank | " + " | ".join(ranks) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

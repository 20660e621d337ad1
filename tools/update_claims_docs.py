#!/usr/bin/env python3
"""Rewrites the finding lines of every checked block of docs/claims.md (a line
`<!-- claims-check -->`, then `` `selectivbench report ARGS` ``, then the lines "- ...")
with what that command prints now: the page then passes tests/cli/test_claims_docs.sh.
Run it from the repository root after a database under docs/claims/ changed.

usage: tools/update_claims_docs.py [docs/claims.md] [--selectivbench PATH]
"""
import shlex
import subprocess
import sys


def main(argv):
    page, exe, i = "docs/claims.md", "build/selectivbench", 1
    while i < len(argv):
        if argv[i] == "--selectivbench" and i + 1 < len(argv):
            exe = argv[i + 1]
            i += 2
        else:
            page = argv[i]
            i += 1
    with open(page) as f:
        lines = f.read().split("\n")
    out, i, blocks = [], 0, 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line != "<!-- claims-check -->" or i >= len(lines):
            continue
        command = lines[i]
        if not (command.startswith("`selectivbench report ") and command.endswith("`")):
            print(f"update_claims_docs.py: line {i + 1}: expected `selectivbench report ...`",
                  file=sys.stderr)
            return 1
        out.append(command)
        i += 1
        args = shlex.split(command[len("`selectivbench report "):-1])
        printed = subprocess.run([exe, "report"] + args, check=True, capture_output=True,
                                 text=True).stdout
        findings = [l for l in printed.split("\n") if l.startswith("- ")]
        # keep the blank line(s) before the old finding lines, replace those lines
        while i < len(lines) and lines[i].strip() == "":
            out.append(lines[i])
            i += 1
        while i < len(lines) and lines[i].startswith("- "):
            i += 1
        out.extend(findings)
        blocks += 1
    with open(page, "w") as f:
        f.write("\n".join(out))
    print(f"{page}: {blocks} blocks updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Rewrites the finding lines of every checked block of docs/claims.md (a line
`<!-- claims-check -->`, then `` `selectivbench report ARGS` ``, then "- ..." lines) with what
that command prints now, as tests/cli/test_claims_docs.sh compares them. Run it after a
change to the findings or to a committed database, then read the diff: the words around the
blocks must still say what the blocks show.

usage: tools/claims_docs_update.py PATH/TO/selectivbench [docs/claims.md]
"""
import subprocess
import sys


def main():
    sb = sys.argv[1]
    page = sys.argv[2] if len(sys.argv) > 2 else "docs/claims.md"
    lines = open(page).read().split("\n")
    out, i, blocks = [], 0, 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line != "<!-- claims-check -->" or i >= len(lines):
            continue
        cmd = lines[i]
        if not (cmd.startswith("`selectivbench report ") and cmd.endswith("`")):
            continue
        out.append(cmd)
        i += 1
        args = cmd[len("`selectivbench report "):-1].split()
        p = subprocess.run([sb, "report"] + args, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("report %s failed: %s" % (" ".join(args), p.stderr.strip()))
        while i < len(lines) and lines[i].strip() == "":
            out.append(lines[i])  # the blank lines before the finding lines
            i += 1
        while i < len(lines) and lines[i].startswith("- "):
            i += 1  # the old finding lines
        out.extend(l for l in p.stdout.split("\n") if l.startswith("- "))
        blocks += 1
    open(page, "w").write("\n".join(out))
    print("%s: %d blocks rewritten" % (page, blocks))


if __name__ == "__main__":
    main()

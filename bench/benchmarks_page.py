#!/usr/bin/python3
"""Writes docs/benchmarks.md, the one page of today's numbers, from bench/current.json.

  /usr/bin/python3 bench/benchmarks_page.py            # writes docs/benchmarks.md
  /usr/bin/python3 bench/benchmarks_page.py --check    # exit 1 if the page is stale or a row
                                                       # names a section docs/log/benchmarks.md lacks

Each row of the JSON is [what, result, commit, date, machine, section]: `section` is the title of
the docs/log/benchmarks.md section (without its "(machine, date)" tail) that holds the command
and every run behind the number.
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "current.json")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")
LOG = os.path.join(ROOT, "docs", "log", "benchmarks.md")


def log_sections():
    with open(LOG, encoding="utf-8") as f:
        return [m.group(1) for m in re.finditer(r"(?m)^## (.+)$", f.read())]


def render(data):
    lines = ["# " + data["title"], ""]
    lines += data["intro"]
    for area in data["areas"]:
        lines += ["", "## " + area["name"], ""]
        if area.get("note"):
            lines += [area["note"], ""]
        lines.append("| what | result | commit | date | machine | in docs/log/benchmarks.md |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for what, result, commit, date, machine, section in area["rows"]:
            lines.append(f"| {what} | {result} | {commit} | {date} | {machine} | \"{section}\" |")
    lines += ["", "How each figure was measured (the scripts, the GPU machine, honest timing) is in",
              "docs/log/benchmarks.md, \"The tools\", and ../shared/GPU.md.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="check instead of writing")
    args = parser.parse_args()
    with open(DATA, encoding="utf-8") as f:
        data = json.load(f)
    sections = log_sections()
    missing = []
    for area in data["areas"]:
        for row in area["rows"]:
            if len(row) != 6:
                missing.append(f"a row of '{area['name']}' has {len(row)} fields, not 6: {row[:1]}")
            elif not any(s == row[5] or s.startswith(row[5] + " (") for s in sections):
                missing.append(f"'{row[0]}' names the section \"{row[5]}\", which docs/log/benchmarks.md lacks")
    for m in missing:
        print(m, file=sys.stderr)
    page = render(data)
    if args.check:
        with open(PAGE, encoding="utf-8") as f:
            stale = f.read() != page
        if stale:
            print("docs/benchmarks.md differs from what bench/current.json renders: "
                  "run /usr/bin/python3 bench/benchmarks_page.py", file=sys.stderr)
        return 1 if stale or missing else 0
    if missing:
        return 1
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())

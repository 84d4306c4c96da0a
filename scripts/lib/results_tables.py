#!/usr/bin/env python3
"""The book's generated tables, from the results files that scripts/bench and scripts/chaos write.

  results_tables.py OUTDIR   writes OUTDIR/bench-latest.md and OUTDIR/chaos-latest.md

A results file is text: its first lines are `# ` comments (the command, the commit, the date, the
machine), then what the script printed. The latest is the last by date (names begin with it,
YYYY-MM-DD), then by the time of day the first line gives. bench: the table after "median of N round(s)" (columns two or more spaces
apart) and the ratio lines after it. chaos: the seed line, the handoffs and faults, every
MUST BE 0 figure, and RESULT. Each page also lists the earlier files, which stay as they are.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def when(path: pathlib.Path):
    """A results file's place in time: the date its name begins with, then the time of day its
    first line gives ("HH:MM UTC", as scripts/bench and scripts/chaos write it; none: 00:00)."""
    first = path.read_text().split("\n", 1)[0]
    time = re.search(r"(\d\d:\d\d) UTC", first)
    return (path.name[:10], time.group(1) if time else "00:00", path.name)


def results(directory: str, suffix: str = ".txt"):
    files = sorted((p for p in (ROOT / directory).glob("*" + suffix) if re.match(r"\d{4}-\d{2}-\d{2}-", p.name)), key=when)
    if not files:
        raise SystemExit(f"results_tables.py: no results file in {directory}")
    return files


def header(lines):
    return [l[2:].strip() for l in lines if l.startswith("# ")]


def earlier(directory: str, latest: pathlib.Path) -> str:
    others = sorted((p.name for p in (ROOT / directory).iterdir() if p.is_file() and p != latest), reverse=True)
    return "\n".join(f"- `{directory}/{n}`" for n in others) or "- (none)"


def cells(line: str):
    return [c.strip() for c in re.split(r"\s{2,}", line.strip()) if c.strip()]


def bench(out: pathlib.Path) -> None:
    latest = results("bench/results")[-1]
    lines = latest.read_text().splitlines()
    md = [f"Latest run: `bench/results/{latest.name}`", ""]
    md += [f"> {h}" for h in header(lines)] + [""]
    start = next((i for i, l in enumerate(lines) if l.startswith("median of")), None)
    if start is None:
        raise SystemExit(f"results_tables.py: {latest.name} has no 'median of' table")
    md += [f"*{lines[start].strip()}*", ""]
    head = cells(lines[start + 1])
    md += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    i = start + 3  # the header, then the dashes
    while i < len(lines) and lines[i].strip():
        row = cells(lines[i])
        md.append("| " + " | ".join(row + [""] * (len(head) - len(row))) + " |")
        i += 1
    notes = [l.strip() for l in lines[i:] if l.strip() and not l.startswith("#")]
    if notes:
        md += ["", *[f"- {' '.join(n.split())}" for n in notes]]
    md += ["", "Earlier runs, each in its file:", "", earlier("bench/results", latest), ""]
    (out / "bench-latest.md").write_text("\n".join(md))


def chaos(out: pathlib.Path) -> None:
    latest = results("tests/chaos/results")[-1]
    lines = latest.read_text().splitlines()
    md = [f"Latest run: `tests/chaos/results/{latest.name}`", ""]
    md += [f"> {h}" for h in header(lines)] + [""]
    md += ["| figure | value |", "| --- | --- |"]
    section, seen = None, set()
    for l in lines:
        s = l.strip()
        if s.startswith("exercised"):
            section = "done"
        if section == "done" and not s.startswith("RESULT:"):
            continue
        if s.startswith("seed "):
            md.append(f"| run | {' '.join(s.split())} |")
        elif re.match(r"^(handoffs \(holds begun\)|handoffs per second|faults injected|semaphore leases|downgrades)", s):
            name, value = cells(s)[0], " ".join(cells(s)[1:])
            if name in seen:
                continue
            seen.add(name)
            md.append(f"| {name} | {value.replace('|', '/')} |")
        elif s.startswith("MUST BE 0"):
            section = s
        elif s.startswith("Peers") or s.startswith("----"):
            section = None
        elif section and re.match(r"^[a-z][a-z ]+\s{2,}\d+$", s):
            name, value = cells(s)
            md.append(f"| {name} (must be 0) | **{value}** |")
        elif s.startswith("RESULT:"):
            md.append(f"| result | **{s.split(':', 1)[1].strip()}** |")
    md += ["", "Earlier runs, each in its file:", "", earlier("tests/chaos/results", latest), ""]
    (out / "chaos-latest.md").write_text("\n".join(md))


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    bench(out)
    chaos(out)

"""The results of scripts/bench: each round's JSON line, and the table of them.

    python3 bench/report.py merge LINE SCALED NAME ROUND
        One impl's result for one round, printed as one JSON line (nothing if it has no figures):
        LINE (the impl's JSON line for the other workloads, or empty) with the scale_* keys of
        every JSON object in the file SCALED (one per N of the scale workload), its "impl" NAME
        unless it reported one, and "round": ROUND.
    python3 bench/report.py table RESULTS
        The table of RESULTS (target/bench-results.jsonl, one such line per impl and round): each
        figure's median over the rounds, one column per impl, then the ratios between impls.

scripts/bench runs both; `table` again shows a past run's results.
"""

import json
import re
import sys

METRICS = [
    ("uncontended_cycles_per_s", "uncontended cycles/s", 1),
    ("acquire_p50_us", "acquire p50 (us)", 1),
    ("acquire_p99_us", "acquire p99 (us)", 1),
    ("release_p50_us", "release p50 (us)", 1),
    ("release_p99_us", "release p99 (us)", 1),
    ("handoffs_per_s", "handoffs/s (8 sessions)", 1),
    ("reentrant_ns", "reentrant pair (ns)", 1),
    ("floor_cycles_per_s", "floor create+delete/s", 1),
    ("floor_listed_cycles_per_s", "floor + pipelined listing/s", 1),
    ("read_cycles_per_s", "rw: uncontended read cycles/s", 1),
    ("read_acquire_p50_us", "rw: read acquire p50 (us)", 1),
    ("read_acquire_p99_us", "rw: read acquire p99 (us)", 1),
    ("read_release_p50_us", "rw: read release p50 (us)", 1),
    ("read_release_p99_us", "rw: read release p99 (us)", 1),
    ("read_mostly_ops_per_s", "rw: read-mostly ops/s (8 sessions)", 1),
    ("read_mostly_reader_wait_p50_us", "rw: read-mostly reader wait p50 (us)", 1),
    ("read_mostly_reader_wait_p99_us", "rw: read-mostly reader wait p99 (us)", 1),
    ("read_mostly_writer_wait_p50_us", "rw: read-mostly writer wait p50 (us)", 1),
    ("read_mostly_writer_wait_p99_us", "rw: read-mostly writer wait p99 (us)", 1),
    ("read_mostly_hold_us", "rw: read-mostly mean hold (us)", 1),
    ("semaphore_leases_per_s", "semaphore: leases/s (max 4, 16 sessions)", 1),
    ("semaphore_wait_p50_us", "semaphore: wait p50 (us)", 1),
    ("semaphore_wait_p99_us", "semaphore: wait p99 (us)", 1),
]
# The scale workload, one row group per N: key scale_<N>_<suffix>. Numbers show the median over
# the rounds; FIFO shows "yes" only if every round kept it; overlaps the most seen in a round.
SCALE_METRICS = [
    ("handoffs_per_s", "handoffs/s (whole chain)", 1),
    ("peak_rss_mb", "peak RSS (MB)", 1),
    ("queued_rss_mb", "RSS while queued (MB)", 1),
    ("watches", "watches while queued (wchs)", 0),
    ("queue_s", "time to queue all (s)", 2),
    ("fifo", "FIFO kept", None),
    ("overlaps", "overlaps (must be 0)", 0),
]
# The many_locks workload, one row group per N: key many_<N>_<suffix>, the median over the rounds.
MANY_METRICS = [
    ("cycles_per_s", "cycles/s (all paths)", 1),
    ("acquire_p50_us", "acquire p50 (us)", 1),
    ("acquire_p99_us", "acquire p99 (us)", 1),
    ("cpu_us_per_cycle", "client CPU per cycle (us)", 1),
    ("peak_rss_mb", "peak RSS (MB)", 1),
    ("held_kb_per_lock", "RSS per idle held lock (KB)", 2),
    ("kept_kb_per_lock", "  left once released, dropped (KB)", 2),
]
# (key, label, higher is better): for a wait, the ratio is the peer's over ours, so that above 1x
# is better for zklock throughout.
MUTEX_RATIOS = [("uncontended_cycles_per_s", "uncontended", True), ("handoffs_per_s", "handoffs", True)]
# The columns of a BENCH_TLS=1 run's TLS twins: the impl's name with this suffix.
TLS_SUFFIX = " over TLS"
# Issue 24's goals for them: over TLS at least 0.9x our plaintext figures, and 1.4x Curator's over TLS.
TLS_VS_PLAINTEXT = [
    ("uncontended_cycles_per_s", "uncontended (goal >= 0.90x)", True),
    ("handoffs_per_s", "handoffs (goal >= 0.90x)", True),
]
TLS_VS_CURATOR = [
    ("uncontended_cycles_per_s", "uncontended (goal >= 1.40x)", True),
    ("handoffs_per_s", "handoffs (goal >= 1.40x)", True),
]
# Issue 26's goal: leases/s at least 1.5x Curator's InterProcessSemaphoreV2.
SEMAPHORE_RATIOS = [
    ("semaphore_leases_per_s", "semaphore leases (goal >= 1.50x)", True),
    ("semaphore_wait_p99_us", "semaphore wait p99 (theirs/ours)", False),
]
RW_RATIOS = [
    ("read_cycles_per_s", "read cycles", True),
    ("read_mostly_ops_per_s", "read-mostly ops", True),
    ("read_mostly_writer_wait_p99_us", "read-mostly writer wait p99 (theirs/ours)", False),
    ("read_mostly_reader_wait_p99_us", "read-mostly reader wait p99 (theirs/ours)", False),
]


def num(d, k):
    v = d.get(k)
    return float(v) if isinstance(v, (int, float)) else None


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:,.{digits}f}"


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def spread(values, scale=1.0, unit=""):
    values = [v * scale for v in values if v is not None]
    if not values:
        return "n/a", "n/a"
    return median(values), f"{min(values):.2f}-{max(values):.2f}{unit}"


def merge(line, scaled, name, round_):
    """One line per impl and round: the other workloads' figures and each N's, under the impl's
    own name (its shell name if no process reported one)."""
    merged = json.loads(line) if line else {}
    with open(scaled) as f:
        for part in filter(None, map(str.strip, f)):
            d = json.loads(part)
            merged.update({k: v for k, v in d.items() if k.startswith(("scale_", "many_")) or ("impl" not in merged and k == "impl")})
    if merged:
        merged.setdefault("impl", name)
        merged["round"] = int(round_)
        print(json.dumps(merged))


def table(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    if not rows:
        print("no results (every impl failed)")
        return

    # One column per impl (in running order): the median of each figure over its rounds.
    names = list(dict.fromkeys(r.get("impl", "?") for r in rows))
    runs = {n: [r for r in rows if r.get("impl", "?") == n] for n in names}
    medians = {n: {key: median(num(r, key) for r in runs[n]) for key, _, _ in METRICS} for n in names}
    # Rows no impl reported (workloads not selected) are left out.
    shown = [m for m in METRICS if any(medians[n][m[0]] is not None for n in names)]
    scale_ns = sorted({int(k.split("_")[1]) for r in rows for k in r if re.match(r"scale_\d+_", k)})
    notes = []  # (marker, text) for the scale cells with no figures

    def scale_cell(n, waiters, suffix, digits):
        key = f"scale_{waiters}_{suffix}"
        values = [r.get(key) for r in runs[n] if r.get(key) is not None]
        if suffix == "handoffs_per_s":
            errors = [r[f"scale_{waiters}_error"] for r in runs[n] if f"scale_{waiters}_error" in r]
            if errors:
                notes.append((len(notes) + 1, f"{n}, {waiters:,} waiters, {len(errors)} of {len(runs[n])} round(s): "
                              + "; ".join(dict.fromkeys(errors))))
                return ("n/a" if not values else fmt(median(values), digits)) + f" [{len(notes)}]"
        if not values:
            return "n/a"
        if suffix == "fifo":
            return "yes" if all(values) else f"NO ({values.count(False)} of {len(values)})"
        if suffix == "overlaps":
            return f"{max(values):,}"
        return fmt(median(float(v) for v in values), digits)

    many_ns = sorted({int(k.split("_")[1]) for r in rows for k in r if re.match(r"many_\d+_", k)})

    def many_cell(n, paths, suffix, digits):
        values = [num(r, f"many_{paths}_{suffix}") for r in runs[n]]
        values = [v for v in values if v is not None]
        if suffix == "cycles_per_s":
            errors = [r[f"many_{paths}_error"] for r in runs[n] if f"many_{paths}_error" in r]
            if errors:
                notes.append((len(notes) + 1, f"{n}, {paths:,} paths, {len(errors)} of {len(runs[n])} round(s): "
                              + "; ".join(dict.fromkeys(errors))))
                return ("n/a" if not values else fmt(median(values), digits)) + f" [{len(notes)}]"
        return fmt(median(values), digits) if values else "n/a"

    scale_rows = []
    for paths in many_ns:
        scale_rows.append((f"many_locks: {paths:,} paths, 1 client", None))
        for suffix, label, digits in MANY_METRICS:
            scale_rows.append((f"  {label}", [many_cell(n, paths, suffix, digits) for n in names]))
    for waiters in scale_ns:
        scale_rows.append((f"scale: {waiters:,} waiters, 1 lock, 1 client", None))
        for suffix, label, digits in SCALE_METRICS:
            scale_rows.append((f"  {label}", [scale_cell(n, waiters, suffix, digits) for n in names]))
    w0 = max([len(m[1]) for m in shown] + [len(label) for label, _ in scale_rows] + [6])
    ws = [max([len(n), 12] + [len(cells[i]) for _, cells in scale_rows if cells]) for i, n in enumerate(names)]
    print()
    print(f"median of {max(len(v) for v in runs.values())} round(s)")
    print(f"{'metric':<{w0}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, ws)))
    print("-" * w0 + "  " + "  ".join("-" * w for w in ws))
    for key, label, digits in shown:
        print(f"{label:<{w0}}  " + "  ".join(f"{fmt(medians[n][key], digits):>{w}}" for n, w in zip(names, ws)))
    for label, cells in scale_rows:
        print(label if cells is None else f"{label:<{w0}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, ws)))
    for marker, text in notes:
        print(f"[{marker}] {text}")
    print()

    def find(prefix):
        """The column of the impl named so: its plaintext one, or with TLS_SUFFIX its TLS twin."""
        tls = prefix.endswith(TLS_SUFFIX)
        base = prefix.removesuffix(TLS_SUFFIX)
        return next((n for n in names if n.startswith(base) and n.endswith(TLS_SUFFIX) == tls), None)

    # Ratios are taken round by round (an impl's floor is measured in its own run; the impls of one
    # round ran in one pass, minutes apart at most), then summarised by their median and range.
    lines = []
    for n in names:
        m, r = spread([ratio(num(x, "uncontended_cycles_per_s"), num(x, "floor_cycles_per_s")) for x in runs[n]], 100, " %")
        if m != "n/a":  # the bindings measure no floor of their own
            lines.append((f"{n} uncontended vs its floor", f"{m:.1f} % (rounds {r})"))
        m, r = spread([ratio(num(x, "uncontended_cycles_per_s"), num(x, "floor_listed_cycles_per_s")) for x in runs[n]], 100, " %")
        if m != "n/a":
            lines.append((f"{n} uncontended vs its floor + listing", f"{m:.1f} % (rounds {r})"))
    scale_ratios = [(f"scale_{w}_handoffs_per_s", f"scale {w:,} waiters handoffs", True) for w in scale_ns]
    for ours, peer, figures in [
        ("zklock (rust)", "curator", MUTEX_RATIOS + RW_RATIOS + SEMAPHORE_RATIOS + scale_ratios),
        ("zklock (python)", "kazoo", MUTEX_RATIOS),
        ("zklock (python)", "curator", RW_RATIOS + scale_ratios),
        ("zklock (node)", "curator", scale_ratios),
        # BENCH_TLS=1: each over TLS against its plaintext self (goal for zklock: >= 0.90x), and
        # zklock against Curator, both over TLS (goal: >= 1.40x).
        ("zklock (rust)" + TLS_SUFFIX, "zklock (rust)", TLS_VS_PLAINTEXT),
        ("curator" + TLS_SUFFIX, "curator", MUTEX_RATIOS),
        ("zklock (rust)" + TLS_SUFFIX, "curator" + TLS_SUFFIX, TLS_VS_CURATOR),
    ]:
        mine, theirs = find(ours), find(peer)
        if not (mine and theirs):
            continue
        by_round = {x.get("round"): x for x in runs[theirs]}
        for key, label, higher_is_better in figures:
            pairs = [
                ratio(num(x, key), num(by_round[x.get("round")], key)) if higher_is_better
                else ratio(num(by_round[x.get("round")], key), num(x, key))
                for x in runs[mine] if x.get("round") in by_round
            ]
            if all(p is None for p in pairs) and key.startswith(("read", "scale", "uncontended", "handoffs", "semaphore")):
                continue  # a workload that one side did not run (BENCH_WORKLOADS), or could not finish
            m, r = spread(pairs)
            lines.append((f"{mine} / {theirs}: {label}", "n/a" if m == "n/a" else f"{m:.2f}x (rounds {r})"))
    # many_locks (issue 52): each impl over Curator at each N (goal >= 1.0x, Rust >= 1.3x), and
    # zklock (rust) over the floor (goal >= 0.9x at N >= 200), round by round.
    many_ratios = [(f"many_{p}_cycles_per_s", f"many_locks {p:,} paths", True) for p in many_ns]
    for ours, peer in [("zklock (rust)", "floor"), ("zklock (rust)", "curator"), ("zklock (python)", "curator"),
                       ("zklock (node)", "curator"), ("kazoo", "curator")]:
        mine, theirs = find(ours), find(peer)
        if not (mine and theirs) or not many_ns:
            continue
        by_round = {x.get("round"): x for x in runs[theirs]}
        for key, label, _ in many_ratios:
            pairs = [ratio(num(x, key), num(by_round[x.get("round")], key)) for x in runs[mine] if x.get("round") in by_round]
            m, r = spread(pairs)
            if m != "n/a":
                lines.append((f"{mine} / {theirs}: {label}", f"{m:.2f}x (rounds {r})"))
    for n in names:
        have = [p for p in many_ns if p >= 200 and median(num(x, f"many_{p}_cycles_per_s") for x in runs[n]) is not None]
        if len(have) >= 2:
            m, r = spread([ratio(num(x, f"many_{have[-1]}_cycles_per_s"), num(x, f"many_{have[0]}_cycles_per_s")) for x in runs[n]])
            if m != "n/a":
                lines.append((f"{n}: many_locks cycles/s at {have[-1]:,} / at {have[0]:,} paths", f"{m:.2f}x (rounds {r})"))
    if not (find("zklock (rust)") and find("curator")):
        lines.append(("zklock vs curator", "n/a (need both results)"))
    # The yardstick for long queues: each impl's rate at its largest N over its rate at its
    # smallest (1.00 = constant cost per handoff).
    for n in names:
        have = [w for w in scale_ns if median(num(x, f"scale_{w}_handoffs_per_s") for x in runs[n]) is not None]
        if len(have) >= 2:
            lo, hi = have[0], have[-1]
            key_hi, key_lo = f"scale_{hi}_handoffs_per_s", f"scale_{lo}_handoffs_per_s"
            m, r = spread([ratio(num(x, key_hi), num(x, key_lo)) for x in runs[n]])
            if m != "n/a":
                lines.append((f"{n}: scale handoffs/s at {hi:,} / at {lo:,} waiters", f"{m:.2f}x (rounds {r})"))
    if not lines:
        return
    wl = max(len(l) for l, _ in lines)
    for l, v in lines:
        print(f"{l:<{wl}}  {v}")


def main(argv):
    if len(argv) == 5 and argv[0] == "merge":
        merge(*argv[1:])
    elif len(argv) == 2 and argv[0] == "table":
        table(argv[1])
    else:
        sys.exit("usage: bench/report.py merge LINE SCALED NAME ROUND | table RESULTS")


if __name__ == "__main__":
    main(sys.argv[1:])

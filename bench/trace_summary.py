#!/usr/bin/env python3
"""What the device did over a run traced by bench/kernel_trace.cc: how much of the time a kernel ran,
how often kernels ran side by side, each kernel's mean and spread, the copies and the idle gaps.

  python3 bench/trace_summary.py trace.csv [--last N | --last-ms MS] [--timeline GAP_US]

--last N reads only the last N kernels (and the copies among them): a benchmark's timed runs, not
its load and warm-up. --last-ms MS reads the kernels that start in the trace's last MS milliseconds
(a load run's steady part: how busy the device was at that rate). --timeline GAP_US splits the kernels into runs at idle gaps longer than GAP_US
(one request at a time: a run is a request's graph) and prints, for the runs with the commonest
kernel count, each kernel's median start and end from its run's first start. Names are demangled
by c++filt where it is installed."""
import argparse
import collections
import shutil
import subprocess
import sys

COPY_KINDS = {"1": "host to device", "2": "device to host", "8": "device to device", "10": "peer to peer"}


def read(path):
    """(kind, start_ns, end_ns, stream, name) rows, by start; lines that are not such rows are skipped."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split(",", 4)
            if len(parts) != 5 or parts[0] not in ("K", "C", "S"):
                continue
            try:
                rows.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4]))
            except ValueError:
                continue
    rows.sort(key=lambda r: r[1])
    return rows


def busy_ns(intervals):
    """The length of the union of (start, end) intervals."""
    total, cur_start, cur_end = 0, None, None
    for s, e in sorted(intervals):
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    return total + (cur_end - cur_start if cur_end is not None else 0)


def merged(intervals):
    """The union of (start, end) intervals as sorted, disjoint intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_ns(interval, union):
    """How long `interval` lies inside the disjoint, sorted intervals `union`."""
    s, e = interval
    return sum(max(0, min(e, ue) - max(s, us)) for us, ue in union if us < e and ue > s)


def concurrency(intervals, span):
    """The share of `span` with 0, 1, 2, ... intervals open at once."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    shares, level, last = collections.Counter(), 0, events[0][0] if events else 0
    for t, d in events:
        shares[level] += t - last
        level, last = level + d, t
    return {k: v / span for k, v in sorted(shares.items())} if span else {}


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def last_kernels(rows, last=None, last_ms=None):
    """The trace's kernels: all, the last `last`, or those that start in the last `last_ms` ms."""
    kernels = [r for r in rows if r[0] == "K"]
    if last:
        kernels = kernels[-last:]
    if last_ms and kernels:
        since = max(r[2] for r in kernels) - int(last_ms * 1e6)
        kernels = [r for r in kernels if r[1] >= since]
    return kernels


def summarize(rows, last=None, last_ms=None):
    """The summary's lines."""
    kernels = last_kernels(rows, last, last_ms)
    if not kernels:
        return ["no kernels in the trace"]
    first, end = kernels[0][1], max(r[2] for r in kernels)
    span = end - first
    intervals = [(r[1], r[2]) for r in kernels]
    busy = busy_ns(intervals)
    lines = [f"{len(kernels)} kernels over {span / 1e6:.3f} ms on {len({r[3] for r in kernels})} streams: "
             f"a kernel running {100 * busy / span:.1f}% of the time; the kernels' times add up to "
             f"{sum(e - s for s, e in intervals) / 1e6:.3f} ms",
             "kernels at once, share of the time: "
             + ", ".join(f"{k}: {100 * v:.1f}%" for k, v in concurrency(intervals, span).items())]
    gaps, reach = [], None
    for _, s, e, _, _ in kernels:
        if reach is not None and s > reach:
            gaps.append(s - reach)
        reach = e if reach is None else max(reach, e)
    if gaps:
        gaps.sort()
        lines.append(f"idle gaps: {len(gaps)}, {sum(gaps) / 1e6:.3f} ms in all, median {gaps[len(gaps) // 2] / 1e3:.1f} µs, "
                     f"longest {gaps[-1] / 1e3:.1f} µs")
    # Each kind of copy: count, time, bytes, and how much of its time a kernel was running (a copy
    # beside another stream's kernels overlaps them; one between them leaves the SMs idle).
    copies = collections.defaultdict(lambda: [0, 0, 0, 0])
    kernel_union = merged(intervals)
    for kind, s, e, _, name in rows:
        if kind in "CS" and first <= s <= end:
            what, _, size = name.partition(" ")
            key = "memset" if kind == "S" else COPY_KINDS.get(what, f"copy kind {what}")
            copies[key][0] += 1
            copies[key][1] += e - s
            copies[key][2] += int(size) if size.isdigit() else 0
            copies[key][3] += overlap_ns((s, e), kernel_union)
    for key, (count, ns, size, beside) in sorted(copies.items()):
        lines.append(f"{key}: {count}, {ns / 1e6:.3f} ms, {size / 1e6:.1f} MB"
                     + (f", {size / ns:.1f} GB/s while running" if ns and size else "")
                     + (f", {100 * beside / ns:.1f}% of it beside a kernel" if ns else ""))
    times = collections.defaultdict(list)
    for _, s, e, _, name in kernels:
        times[name].append((e - s) / 1e3)
    names = demangle(list(times))
    lines.append("    runs     mean   median      min      max  µs, kernel")
    for name, t in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        t.sort()
        lines.append(f"{len(t):8d} {sum(t) / len(t):8.1f} {t[len(t) // 2]:8.1f} {t[0]:8.1f} {t[-1]:8.1f}  {names[name][:100]}")
    return lines


def timeline(rows, gap_us, last=None, last_ms=None):
    """Each kernel position's median start and end (µs from its run's first start) over the runs
    split at idle gaps longer than gap_us, for the runs with the commonest number of kernels."""
    kernels = last_kernels(rows, last, last_ms)
    runs, reach = [], None
    for r in kernels:
        if reach is None or r[1] - reach > gap_us * 1e3:
            runs.append([])
        runs[-1].append(r)
        reach = r[2] if reach is None else max(reach, r[2])
    if not runs:
        return ["no kernels in the trace"]
    count = collections.Counter(len(run) for run in runs).most_common(1)[0][0]
    chosen = [run for run in runs if len(run) == count]
    median = lambda xs: sorted(xs)[len(xs) // 2]
    names = demangle(list({r[4] for run in chosen for r in run}))
    lines = [f"{len(chosen)} of {len(runs)} runs with {count} kernels; median span "
             f"{median([max(r[2] for r in run) - run[0][1] for run in chosen]) / 1e3:.1f} µs",
             "   start      end     took  µs, kernel"]
    for i in range(count):
        starts = [(run[i][1] - run[0][1]) / 1e3 for run in chosen]
        ends = [(run[i][2] - run[0][1]) / 1e3 for run in chosen]
        took = [(run[i][2] - run[i][1]) / 1e3 for run in chosen]
        lines.append(f"{median(starts):8.1f} {median(ends):8.1f} {median(took):8.1f}  {names[chosen[0][i][4]][:100]}")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--last", type=int, default=0, help="only the last N kernels")
    p.add_argument("--last-ms", type=float, default=0, help="only the kernels that start in the last MS milliseconds")
    p.add_argument("--timeline", type=float, default=0, metavar="GAP_US", help="per-run timeline, runs split at gaps > GAP_US")
    a = p.parse_args()
    rows = read(a.trace)
    if not rows:
        sys.exit(f"{a.trace}: no trace rows")
    print("\n".join(timeline(rows, a.timeline, a.last, a.last_ms) if a.timeline else summarize(rows, a.last, a.last_ms)))


if __name__ == "__main__":
    main()

"""Benchmark reports: markdown tables and PNG plots from the JSON the benchmark scripts write.

  /usr/bin/python3 bench/report.py --gpu GPU_REPORT.json [--load LOAD.json] \\
      [--docs docs/log/benchmarks.md] [--plots docs/plots]

`bench/gpu_bench.py --report DIR` writes DIR/gpu_report.json (and this script's markdown, as
DIR/gpu_report.md); `bench/load_bench.py --json FILE` writes load results. From them this script
renders the GPU table (rankd's variants and the PyTorch peers side by side, with the ratio of the
best rankd median to the best peer median), draws the plots with gnuplot (pairs/s against batch
size for W1; p50 and p99 latency against offered load per workload, batching on and off), and with
--docs replaces the generated part of docs/log/benchmarks.md: the text between the markers
`<!-- generated: gpu report -->` and `<!-- end of generated gpu report -->`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

from gpu_clocks import describe

BEGIN = "<!-- generated: gpu report -->"
END = "<!-- end of generated gpu report -->"


def timed(pair):
    """Whether a cell holds (median, p99); it may be None (failed) or "n/a" (does not apply)."""
    return isinstance(pair, (list, tuple))


def cell(pair):
    return f"{pair[0]:.3f} / {pair[1]:.3f}" if timed(pair) else pair if pair == "n/a" else "failed"


def launches(counts):
    """'K / U' kernel launches per batch with and without fusion (plus the copies and memsets)."""
    def one(c):
        return f"{c['kernels']}" if c else "?"
    if not counts or not counts.get("fused"):
        return ""
    f = counts["fused"]
    return f"{one(f)} / {one(counts.get('unfused'))} (+{f['copies']} copies, {f['memsets']} memsets)"


def best_ratio(row, variants, peers):
    """(best peer median / best rankd median), or None when either side has no result."""
    ours = [row["rankd"][v][0] for v in variants if timed(row["rankd"].get(v))]
    theirs = [row[p][0] for p in peers if timed(row.get(p))]
    return min(theirs) / min(ours) if ours and theirs else None


def render_gpu(report, plots=()):
    """The GPU report as markdown: where it ran, the table, how to read it, the plots."""
    meta, rows = report["meta"], report["rows"]
    variants, peers = meta["variants"], meta["peers"]
    out = [f"GPU: {meta['gpu']}; PyTorch {meta['torch']}; {meta['date']}; commit {meta['commit']}; "
           f"{meta['iters']} timed runs per cell after warm-up; inputs from host memory, outputs to host memory.",
           "", f"Command (on the GPU machine): `{meta['command']}`", ""]
    head = ["workload, batch", "steps", "device launches, fused / unfused"]
    head += [f"rankd {v}" for v in variants] + [f"PyTorch {p}" for p in peers]
    head += ["best rankd pairs/s", "best rankd vs best peer"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + " --- |" * len(head))
    for r in rows:
        medians = [r["rankd"][v][0] for v in variants if timed(r["rankd"].get(v))]
        ratio = best_ratio(r, variants, peers)
        cells = [r["label"], str(r.get("steps", "")), launches(r.get("launches"))] + [cell(r["rankd"].get(v)) for v in variants]
        cells += [cell(r.get(p)) for p in peers]
        cells.append(f"{r['n'] / (min(medians) / 1000):,.0f}" if medians else "")
        cells.append(f"{ratio:.2f}x" if ratio else "")
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Cells: median / p99 ms per request. rankd fp32 is exact fp32; tf32 and bf16 round the matrix products "
            "(backend.h); PyTorch bf16 is autocast. rankd pads each request to its shape bucket and replays the bucket's "
            "captured CUDA graph; 'no graphs' runs every request at its own shape, kernel by kernel. The ratio is the "
            "best peer's median over rankd's best median (above 1: rankd is faster). Device launches: the kernels one "
            "batch of the first request's shape puts on the device, counted from a capture of it (one graph launch "
            "replays them all when captured), with the fusion passes and without (`rankd bench engine --no-fusion`). "
            "'unhoisted': without user-side hoisting (`--no-hoisting`, docs/hoisting.md), user rows repeated to every "
            "candidate; n/a for models without user inputs."]
    loaded = [r for r in rows if r.get("in_flight")]
    if loaded:
        clocked = any(r.get("clocks") for r in loaded)  # reports since bench/gpu_clocks.py
        out += ["", "Throughput with several requests in flight (`rankd bench engine --in-flight K --buckets off`: K "
                "threads each scoring requests back to back, so one request's host work overlaps another's kernels), "
                "against the best peer's pairs/s at its median (the peers' inputs already on the GPU, one at a time):", "",
                "| workload, batch | requests in flight | rankd pairs/s | best peer pairs/s | rankd vs best peer |"
                + (" GPU while timed |" if clocked else ""),
                "| --- | --- | --- | --- | --- |" + (" --- |" if clocked else "")]
        for r in loaded:
            timed_peers = [p for p in peers if timed(r.get(p))]
            ours = {k: v for k, v in r["in_flight"].items() if k != "requests"}
            if not ours:
                continue
            best_precision = max(ours, key=ours.get)
            fastest = min(timed_peers, key=lambda p: r[p][0]) if timed_peers else None
            best_peer = r["n"] / (r[fastest][0] / 1000) if fastest else None
            line = (f"| {r['label']} | {r['in_flight']['requests']} | " + ", ".join(f"{ours[k]:,.0f} ({k})" for k in ours) + " | "
                    + (f"{best_peer:,.0f} | {ours[best_precision] / best_peer:.2f}x |" if best_peer else " | |"))
            if clocked:
                clocks = r.get("clocks") or {}
                line += (f" rankd ({best_precision}): {describe(clocks.get(best_precision)) or 'not sampled'}; "
                         f"{fastest or 'peer'}: {describe(clocks.get(fastest)) or 'not sampled'} |")
            out.append(line)
        if clocked:
            out += ["", "GPU while timed: nvidia-smi's median SM clock and mean power over the timed runs, and the share "
                    "of its samples (one each 100 ms) whose clock was held down by a power or thermal limit "
                    "(bench/gpu_clocks.py). Under sustained load a GPU can reach its power cap and lower its clock, "
                    "so a throughput is read with its clock."]
    warnings = [f"{r['label']} {v}: spread {r['spread'][v]:.0%}" for r in rows for v in variants
                if r.get("spread", {}).get(v, 0) > 0.25]
    if warnings:
        out += ["", "Unsteady cells (the medians of a run's quarters differ by more than 25%; rerun before trusting "
                "them): " + "; ".join(warnings) + "."]
    for title, path in plots:
        out += ["", f"![{title}]({path})"]
    return "\n".join(out) + "\n"


def render_load(rows, note=""):
    """Open-loop load rows (bench/load_bench.py --json) as a markdown table."""
    out = ["Open-loop load against `rankd serve`" + (f" ({note})" if note else "") + ": Poisson arrivals over HTTP with "
           "binary tensor bodies; latency from each request's scheduled time (no coordinated omission).", "",
           "| workload | batching | hoisting | offered /s | achieved /s | p50 ms | p99 ms | p99.9 ms | errors + timeouts "
           "| requests per execution | latency steady? |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        steady = "yes" if r.get("spread", 0) <= 0.25 else f"no (quarters differ by {r['spread']:.0%})"
        out.append(f"| {r['workload']} | {'on' if r['batching'] else 'off'} | {r.get('hoisting', 'n/a')} | {r['offered_rate']:g} | "
                   f"{r['achieved_rate']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['p999_ms']:.2f} | "
                   f"{r['errors'] + r['timeouts']} | {r.get('requests_per_execution', 1):.2f} | {steady} |")
    return "\n".join(out) + "\n"


def quoted(s):
    return '"' + s.replace('"', "'") + '"'


def draw(png, title, xlabel, ylabel, logscale, series):
    """A line chart with gnuplot: `series` is [(title, [(x, y), ...])]; empty series are left out.
    Returns False (and draws nothing) when no series has a point."""
    series = [(t, points) for t, points in series if points]
    if not series:
        return False
    if not shutil.which("gnuplot"):
        raise RuntimeError("gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)")
    plot = ", ".join(f"'-' using 1:2 with linespoints title {quoted(t)}" for t, _ in series)
    data = "".join("\n".join(f"{x} {y}" for x, y in points) + "\ne\n" for _, points in series)
    script = (f"set terminal pngcairo size 900,560\nset output {quoted(png)}\nset title {quoted(title)}\n"
              f"set xlabel {quoted(xlabel)}\nset ylabel {quoted(ylabel)}\nset logscale {logscale}\n"
              f"set key left top\nset grid\nplot {plot}\n{data}")
    subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    return True


def plot_throughput(report, workload, png):
    """Pairs/s against batch size for one workload: rankd's best variant and each peer."""
    rows = [r for r in report["rows"] if r["label"].startswith(workload + ",")]
    if len({r["n"] for r in rows}) < 2:
        return False  # one batch size: nothing to plot against
    variants, peers = report["meta"]["variants"], report["meta"]["peers"]
    medians = [("rankd (best variant)",
                lambda r: min((r["rankd"][v][0] for v in variants if timed(r["rankd"].get(v))), default=None))]
    medians += [(f"PyTorch {p}", lambda r, p=p: r[p][0] if r.get(p) else None) for p in peers]
    series = [(title, [(r["n"], r["n"] / (median(r) / 1000)) for r in rows if median(r)]) for title, median in medians]
    return draw(png, f"{workload}: pairs/s against batch size ({report['meta']['gpu']})", "pairs per request",
                "pairs/s", "xy", series)


def plot_load(rows, workload, png):
    """p50 and p99 latency against offered load for one workload, batching (and hoisting) on and off."""
    rows = [r for r in rows if r["workload"] == workload]
    series = []
    for hoisting in sorted({r.get("hoisting", "n/a") for r in rows}):
        for batching in (False, True):
            sel = sorted((r for r in rows if r["batching"] == batching and r.get("hoisting", "n/a") == hoisting),
                         key=lambda r: r["offered_rate"])
            name = f"batching {'on' if batching else 'off'}" + ("" if hoisting == "n/a" else f", hoisting {hoisting}")
            for q in ("p50_ms", "p99_ms"):
                series.append((f"{q[:3]}, {name}", [(r["offered_rate"], r[q]) for r in sel]))
    return draw(png, f"{workload}: latency against offered load", "offered requests/s (open loop, Poisson)",
                "latency, ms", "y", series)


def replace_section(doc_path, text):
    with open(doc_path) as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        doc = head + BEGIN + "\n" + text + END + tail
    else:
        doc = doc.rstrip("\n") + "\n\n" + BEGIN + "\n" + text + END + "\n"
    with open(doc_path, "w") as f:
        f.write(doc)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", required=True, help="gpu_report.json from bench/gpu_bench.py --report")
    p.add_argument("--load", default="", help="rows from bench/load_bench.py --json (latency against load)")
    p.add_argument("--load-note", default="", help="where the load rows ran, for the load table's caption")
    p.add_argument("--docs", default="", help="replace the generated section of this markdown file")
    p.add_argument("--plots", default="", help="draw PNG plots into this folder (gnuplot)")
    a = p.parse_args()
    with open(a.gpu) as f:
        report = json.load(f)
    load_rows = []
    if a.load:
        with open(a.load) as f:
            load_rows = json.load(f)
    plots = []
    if a.plots:
        os.makedirs(a.plots, exist_ok=True)
        rel = os.path.relpath(a.plots, os.path.dirname(os.path.abspath(a.docs)) if a.docs else os.getcwd())
        workloads = sorted({r["label"].split(",")[0] for r in report["rows"]})
        for w in workloads:
            name = f"throughput_{w}.png"
            if plot_throughput(report, w, os.path.join(a.plots, name)):
                plots.append((f"{w}: pairs/s against batch size", os.path.join(rel, name)))
        if a.load:
            for w in sorted({r["workload"] for r in load_rows}):
                name = f"latency_{w}.png"
                if plot_load(load_rows, w, os.path.join(a.plots, name)):
                    plots.append((f"{w}: latency against offered load", os.path.join(rel, name)))
    text = render_gpu(report, [p for p in plots if "pairs/s" in p[0]])
    if a.load:
        text += "\n" + render_load(load_rows, a.load_note)
        for title, path in plots:
            if "latency" in title:
                text += f"\n![{title}]({path})\n"
    if a.docs:
        replace_section(a.docs, text)
        print(f"{a.docs}: generated section replaced", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()

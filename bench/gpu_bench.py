"""GPU benchmark: rankd's CUDA backend against PyTorch on the same GPU, same weights, same requests.

  python3 bench/gpu_bench.py --rankd ".bundle/run rankd" [--iters 200]

Runs on the GPU machine (PyTorch there). Exports the zoo's full-size models into bench/out/repo,
writes 8 requests per shape (rotated), times `rankd bench engine --backend cuda` on them, and times
the PyTorch definitions with the same weights on the same inputs (rankd with and without shape
buckets and CUDA graphs with --buckets on,off): eager fp32, eager with bf16
autocast, torch.compile, and torch.compile in reduce-overhead mode (CUDA graphs). Both sides start
with inputs in host memory and end with outputs in host memory. Ragged features are padded to one
fixed width per shape for PyTorch (so compiled graphs are not rebuilt). Prints the markdown table
of bench/report.py; with --report DIR also writes DIR/gpu_report.json (rows, GPU, date, commit,
command) and DIR/gpu_report.md, which `bench/report.py --gpu DIR/gpu_report.json --docs
docs/log/benchmarks.md --plots docs/plots` turns into the report in docs/log/benchmarks.md with plots.
The one-command report of every workload (docs/log/benchmarks.md says how it is run):
  python3 bench/gpu_bench.py --rankd ".bundle/run rankd" --report $OUT
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
from rankd_zoo import models, requests as rq  # noqa: E402
from rankd_zoo.export import export  # noqa: E402
import report as rendering  # noqa: E402  (bench/report.py)
from gpu_clocks import ClockSampler  # noqa: E402
from peers.torch_peers import GPU_PEERS, gpu_peer, time_gpu  # noqa: E402

SHAPES = {
    "dlrm_dcnv2": [{"n": 1}, {"n": 64}, {"n": 512}, {"n": 4096}, {"n": 32768}],
    "dlrm": [{"n": 1}, {"n": 512}, {"n": 32768}],  # the original DLRM (dot interaction), not a WORKLOADS.md target
    "din": [{"n": 200, "seq": 100}, {"n": 200, "seq": 1000}],
    "bst": [{"n": 200, "seq": 50}],
    "mmoe": [{"n": 512}, {"n": 4096}],
}
LABELS = {"dlrm_dcnv2": "W1", "dlrm": "DLRM", "din": "W2", "bst": "W3", "mmoe": "W4"}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--rankd", default=os.path.join(ROOT, "build", "rankd"), help="command that runs rankd")
    p.add_argument("--workloads", default="dlrm_dcnv2,din,bst,mmoe")
    p.add_argument("--peers", default=",".join(GPU_PEERS))
    p.add_argument("--precisions", default="fp32,bf16", help="rankd's matrix-product precisions to time")
    p.add_argument("--rows", default="", help="only these candidate counts, e.g. 1,512,32768")
    p.add_argument("--buckets", default="on,off", help="rankd with shape buckets and CUDA graphs on, off, or both (on,off)")
    p.add_argument("--hoisting", default="on,off", help="also time the first precision without user-side hoisting "
                   "(off) on models with user inputs")
    p.add_argument("--bf16-tables", action="store_true", help="also time bf16 with the bag tables stored in bf16")
    p.add_argument("--in-flight", default="2", help="for batches of 4,096 pairs and more, also time rankd's "
                   "throughput with this many requests in flight (each precision, no graphs; a list such as 2,3 times "
                   "each); 0: not")
    p.add_argument("--report", default="", help="write gpu_report.json and gpu_report.md into this folder")
    p.add_argument("--commit", default="", help="the commit measured (default: .bundle/COMMIT, else git)")
    a = p.parse_args()
    bench = a.rankd.split() + ["bench", "engine"]
    repo = os.path.join(a.out, "repo")
    peers = a.peers.split(",") if a.peers else []
    rows = []
    # rankd's variants: each precision with buckets and graphs ("fp32"), and without ("fp32 no graphs").
    variants = [p + ("" if b == "on" else " no graphs") for b in a.buckets.split(",") for p in a.precisions.split(",")]
    # bf16 precisions with the bag tables stored in bf16 too (tables.dtype, docs/config.md).
    tabled = [p + " bf16-tables" for p in a.precisions.split(",") if p.startswith("bf16")] if a.bf16_tables else []
    variants += [p + ("" if b == "on" else " no graphs") for b in a.buckets.split(",") for p in tabled]
    if "off" in a.hoisting.split(","):
        variants.append(a.precisions.split(",")[0] + " unhoisted")
    for name in a.workloads.split(","):
        package = f"{name}_full"
        if not os.path.exists(os.path.join(repo, package, "1", "model.onnx")):
            print(f"exporting {package} ...", file=sys.stderr, flush=True)
            export(name, "full", repo, "", 1, 0, package=package)
        with open(os.path.join(repo, package, "config.yaml")) as f:
            has_users = "scope: user" in f.read()
        model = models.build(name, "full", seed=0).eval()
        feats = rq.features(name, model)
        gpu_model = models.build(name, "full", seed=0).eval().cuda()
        compiled = {}
        for shape in SHAPES[name]:
            n, seq = shape["n"], shape.get("seq")
            if a.rows and str(n) not in a.rows.split(","):
                continue
            rng = np.random.default_rng(123)
            reqs = [rq.make_request(rng, feats, n, seq_len=seq) for _ in range(8)]
            path = os.path.join(a.out, f"{package}_n{n}_l{seq or 0}.jsonl")
            with open(path, "w") as f:
                for i, r in enumerate(reqs):
                    f.write(json.dumps(rq.to_json(feats, r, str(i), flat_ragged=True)) + "\n")
            ours = {}
            for variant in variants:
                precision, buckets = variant.split(" ")[0], "off" if variant.endswith("no graphs") else "on"
                cmd = bench + ["--backend", "cuda", "--precision", precision, "--model-repo", repo, "--model", package,
                               "--requests", path, "--iters", str(a.iters), "--warmup", "20", "--buckets", buckets]
                if "bf16-tables" in variant:
                    cmd += ["--table-dtype", "BF16"]
                if variant.endswith("unhoisted"):
                    if not has_users:
                        ours[variant] = "n/a"
                        continue
                    cmd.append("--no-hoisting")
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    print(res.stderr, file=sys.stderr)
                    continue
                ours[variant] = json.loads(res.stdout.strip().splitlines()[-1])
            timed = {v: o for v, o in ours.items() if isinstance(o, dict)}
            if not timed:
                continue
            # What the fusion passes save: the same request without them (a short run; only its
            # launch count is kept).
            cmd = bench + ["--backend", "cuda", "--model-repo", repo, "--model", package, "--requests", path,
                           "--iters", "10", "--warmup", "1", "--buckets", "off", "--no-fusion"]
            res = subprocess.run(cmd, capture_output=True, text=True)
            unfused = json.loads(res.stdout.strip().splitlines()[-1]).get("launches") if res.returncode == 0 else None
            widths = {f.name: max(1, max(len(row) for r in reqs for row in r[f.name]))
                      for f in feats if f.kind == "ragged"}
            batches = [[t.pin_memory() for t in rq.to_torch(feats, r, n, widths)] for r in reqs]
            label = f"{LABELS[name]}, " + (f"{n} pairs" if not seq else f"1 user x {n}, L={seq}")
            first = next(iter(timed.values()))
            row = {"label": label, "n": n, "seq": seq, "steps": first.get("steps"),
                   "rankd": {p: (o["median_ms"], o["p99_ms"]) if isinstance(o, dict) else o for p, o in ours.items()},
                   "graphs": {p: (o.get("graph_hits"), o.get("graph_misses")) for p, o in timed.items()},
                   "spread": {p: o.get("spread", 0) for p, o in timed.items()},
                   "launches": {"fused": first.get("launches"), "unfused": unfused}}
            row["clocks"] = {}  # the GPU's clock and power while each timing ran (bench/gpu_clocks.py)
            for peer in peers:
                try:
                    fn = gpu_peer(peer, gpu_model, compiled)
                    window = []
                    with ClockSampler() as clocks:
                        row[peer] = time_gpu(fn, batches, a.iters, window=window)
                    row["clocks"][peer] = clocks.summary(*window)
                except Exception as e:  # a peer that fails is reported, not fatal
                    print(f"{label} {peer}: {type(e).__name__}: {e}", file=sys.stderr)
                    row[peer] = None
            in_flight = [int(k) for k in str(a.in_flight).split(",") if int(k) > 1]
            if in_flight and n >= 4096:
                # Throughput as a loaded server sees it: several requests at a time, so one's host work
                # (ids into offsets, packing, copies) overlaps another's kernels.
                row["in_flight"] = {"requests": ", ".join(map(str, in_flight))}
                for k in in_flight:
                    for precision in a.precisions.split(",") + tabled:
                        cmd = bench + ["--backend", "cuda", "--precision", precision.split(" ")[0], "--model-repo", repo, "--model", package,
                                       "--requests", path, "--iters", str(a.iters), "--warmup", "20", "--buckets", "off",
                                       "--in-flight", str(k)] + (["--table-dtype", "BF16"] if "tables" in precision else [])
                        with ClockSampler() as clocks:
                            res = subprocess.run(cmd, capture_output=True, text=True)
                        key = precision if len(in_flight) == 1 else f"{precision}, {k} in flight"
                        if res.returncode == 0:
                            out = json.loads(res.stdout.strip().splitlines()[-1])
                            row["in_flight"][key] = out["throughput_pairs_per_s"]
                            began = out["timed_start_unix_s"]
                            row["clocks"][key] = clocks.summary(began, began + out["timed_s"])
                        else:
                            print(res.stderr, file=sys.stderr)
            rows.append(row)
            print(label, {k: v for k, v in row.items() if k != "label"}, file=sys.stderr, flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "iters": a.iters,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "commit": commit(a.commit),
            "command": shlex.join(["python3"] + sys.argv), "variants": variants, "peers": peers}
    report = {"meta": meta, "rows": rows}
    text = rendering.render_gpu(report)
    print(text)
    if a.report:
        os.makedirs(a.report, exist_ok=True)
        with open(os.path.join(a.report, "gpu_report.json"), "w") as f:
            json.dump(report, f, indent=1)
        with open(os.path.join(a.report, "gpu_report.md"), "w") as f:
            f.write(text)


def commit(given):
    """The commit measured: as given, else the bundle's (scripts/gpu_bundle.sh), else git's."""
    if given:
        return given
    path = os.path.join(ROOT, ".bundle", "COMMIT")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    main()

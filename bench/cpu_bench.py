"""CPU benchmark: rankd's engine against PyTorch on the CPU, same weights, same requests.

  /usr/bin/python3 bench/cpu_bench.py [--sizes tiny,full] [--threads N] [--iters 50] [--precisions fp32,bf16]

Exports W1 (dlrm_dcnv2) and W2 (din), and with --workloads W3 (bst) and W4 (mmoe), from the
model zoo into bench/out/, writes request sets
(8 requests per shape, rotated), runs `rankd bench engine` on them and times the PyTorch
model on the same inputs (padded ids, user rows repeated, as PyTorch needs them). Prints a markdown
table: median and p99 ms per request, pairs/s, and the ratio. Needs scripts/setup.sh --zoo.
At bf16 rankd runs `--precision bf16` (bf16 products where the CPU has them, cpu/packed_matmuls.h)
against PyTorch under CPU autocast to bf16; ONNX Runtime, which has no such mode, is left out.
"""
import contextlib
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
from rankd_zoo import models, requests as rq  # noqa: E402
from rankd_zoo.export import export  # noqa: E402
from peers.torch_peers import time_cpu, time_onnxruntime  # noqa: E402

SHAPES = {
    "dlrm_dcnv2": [{"n": 1}, {"n": 64}, {"n": 512}],
    "din": [{"n": 200, "seq": 20}, {"n": 200, "seq": 100}, {"n": 200, "seq": 1000}],
    "bst": [{"n": 200, "seq": 50}],
    "mmoe": [{"n": 64}, {"n": 512}],
}
LABELS = {"dlrm_dcnv2": "W1", "din": "W2", "bst": "W3", "mmoe": "W4"}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="tiny,full")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--rankd", default=os.path.join(ROOT, "build", "rankd"),
                   help="command that runs rankd (e.g. '.bundle/run rankd')")
    p.add_argument("--workloads", default="dlrm_dcnv2,din")
    p.add_argument("--precisions", default="fp32", help="fp32, bf16 or both: each shape at each")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads))
    bench = a.rankd.split() + ["bench", "engine"]
    repo = os.path.join(a.out, "repo")
    rows = []
    for size in a.sizes.split(","):
        for name, shapes in SHAPES.items():
            if name not in a.workloads.split(","):
                continue
            package = f"{name}_{size}"
            if not os.path.exists(os.path.join(repo, package, "1", "model.onnx")):
                print(f"exporting {package} ...", file=sys.stderr)
                export(name, size, repo, "", 1, 0, package=package)
            model = models.build(name, size, seed=0)
            feats = rq.features(name, model)
            for shape in shapes:
                seq = shape.get("seq")
                longest = max((f.max_length for f in feats if f.scope == "user" and f.max_length), default=0)
                if seq and seq > longest:
                    continue
                rng = np.random.default_rng(123)
                reqs = [rq.make_request(rng, feats, shape["n"], seq_len=seq) for _ in range(8)]
                path = os.path.join(a.out, f"{package}_n{shape['n']}_l{seq or 0}.jsonl")
                with open(path, "w") as f:
                    for i, r in enumerate(reqs):
                        f.write(json.dumps(rq.to_json(feats, r, str(i), flat_ragged=True)) + "\n")
                batches = [rq.to_torch(feats, r, shape["n"]) for r in reqs]
                for precision in a.precisions.split(","):
                    out = subprocess.run(bench + ["--model-repo", repo, "--model", package, "--requests", path,
                                          "--iters", str(a.iters), "--warmup", "5", "--precision", precision],
                                         env=env, capture_output=True, text=True)
                    if out.returncode != 0:
                        print(out.stderr, file=sys.stderr)
                        continue
                    ours = json.loads(out.stdout.strip().splitlines()[-1])
                    bf16 = precision == "bf16"
                    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
                    with autocast:
                        tmed, tp99 = time_cpu(model, batches, a.iters)
                    ort_result = None if bf16 else time_onnxruntime(
                        os.path.join(repo, package, "1", "model.onnx"), feats, batches, a.threads, a.iters)
                    label = f"{LABELS[name]} {size}, " + (
                        f"{shape['n']} pairs" if not seq else f"1 user x {shape['n']}, L={seq}") + f", {precision}"
                    rows.append((label, ours["median_ms"], ours["p99_ms"], tmed, tp99, shape["n"], ort_result, bf16))
                    print(f"{label}: rankd {ours['median_ms']:.3f} ms, torch {tmed:.3f} ms", file=sys.stderr)
    try:
        import onnxruntime
        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = "absent"
    print(f"threads: {a.threads}; torch {torch.__version__}; onnxruntime {ort_version}; iters {a.iters}\n")
    print("| workload, batch | rankd median / p99 ms | PyTorch CPU median / p99 ms | ONNX Runtime CPU median / p99 ms | rankd pairs/s | vs best peer |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, m, p99, tm, tp99, n, o, bf16 in rows:
        best = tm if o is None else min(tm, o[0])
        ort_cell = "no bf16 mode" if bf16 else "not installed" if o is None else f"{o[0]:.3f} / {o[1]:.3f}"
        print(f"| {label} | {m:.3f} / {p99:.3f} | {tm:.3f} / {tp99:.3f} | {ort_cell} | {n / (m / 1000):,.0f} | {best / m:.2f}x |")


if __name__ == "__main__":
    main()

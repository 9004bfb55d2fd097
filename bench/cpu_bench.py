"""CPU benchmark: rankd's engine against PyTorch on the CPU, same weights, same requests.

  /usr/bin/python3 bench/cpu_bench.py [--sizes tiny,full] [--threads N] [--iters 50] [--precisions fp32,bf16] [--rounds R] [--pairs 2,4,8]

Exports W1 (dlrm_dcnv2) and W2 (din), and with --workloads W3 (bst) and W4 (mmoe), from the
model zoo into bench/out/, writes request sets
(8 requests per shape, rotated), runs `rankd bench engine` on them and times the PyTorch
model on the same inputs (padded ids, user rows repeated, as PyTorch needs them). Prints a markdown
table: median and p99 ms per request, pairs/s, and the ratio. A shared machine's speed drifts from
minute to minute: with --rounds R the three run in turn R times per shape, each party's figures are
the medians of its rounds', and the rounds' own ratios are printed (stderr) beside them. Needs scripts/setup.sh --zoo.
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


def median_of_rounds(results):
    """(median, p99) over rounds: the median of the rounds' medians and of their p99s."""
    medians = sorted(r[0] for r in results)
    p99s = sorted(r[1] for r in results)
    return medians[len(medians) // 2], p99s[len(p99s) // 2]


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
    p.add_argument("--rounds", type=int, default=1,
                   help="rounds of the three in turn per shape; each party's figures the median of its rounds'")
    p.add_argument("--pairs", default="",
                   help="pair counts for W1 and W4 (e.g. 2,4,8) in place of their shapes' 1/64/512 and 64/512")
    a = p.parse_args()
    if a.pairs:
        for name in ("dlrm_dcnv2", "mmoe"):
            SHAPES[name] = [{"n": int(n)} for n in a.pairs.split(",")]
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
                    bf16 = precision == "bf16"
                    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
                    # Each round runs the three in turn; a party's figure is the median of its rounds'.
                    ours, theirs, ort_rounds = [], [], []
                    for _ in range(a.rounds):
                        out = subprocess.run(bench + ["--model-repo", repo, "--model", package, "--requests", path,
                                              "--iters", str(a.iters), "--warmup", "5", "--precision", precision],
                                             env=env, capture_output=True, text=True)
                        if out.returncode != 0:
                            print(out.stderr, file=sys.stderr)
                            break
                        result = json.loads(out.stdout.strip().splitlines()[-1])
                        ours.append((result["median_ms"], result["p99_ms"]))
                        with autocast:
                            theirs.append(time_cpu(model, batches, a.iters))
                        if not bf16:
                            ort_rounds.append(time_onnxruntime(os.path.join(repo, package, "1", "model.onnx"), feats,
                                                               batches, a.threads, a.iters))
                    if len(ours) < a.rounds:
                        continue
                    m, p99 = median_of_rounds(ours)
                    tmed, tp99 = median_of_rounds(theirs)
                    ort_result = None if bf16 or None in ort_rounds else median_of_rounds(ort_rounds)
                    label = f"{LABELS[name]} {size}, " + (
                        f"{shape['n']} pairs" if not seq else f"1 user x {shape['n']}, L={seq}") + f", {precision}"
                    rows.append((label, m, p99, tmed, tp99, shape["n"], ort_result, bf16))
                    spread = ""
                    if a.rounds > 1:
                        best = [t[0] if o is None else min(t[0], o[0])
                                for t, o in zip(theirs, ort_rounds or [None] * len(theirs))]
                        ratios = sorted(b / r[0] for b, r in zip(best, ours))
                        spread = f", rounds' ratios {ratios[0]:.2f}-{ratios[-1]:.2f}x"
                    print(f"{label}: rankd {m:.3f} ms, torch {tmed:.3f} ms{spread}", file=sys.stderr)
    try:
        import onnxruntime
        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = "absent"
    print(f"threads: {a.threads}; torch {torch.__version__}; onnxruntime {ort_version}; iters {a.iters}; "
          f"rounds {a.rounds}\n")
    print("| workload, batch | rankd median / p99 ms | PyTorch CPU median / p99 ms | ONNX Runtime CPU median / p99 ms | rankd pairs/s | vs best peer |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, m, p99, tm, tp99, n, o, bf16 in rows:
        best = tm if o is None else min(tm, o[0])
        ort_cell = "no bf16 mode" if bf16 else "not installed" if o is None else f"{o[0]:.3f} / {o[1]:.3f}"
        print(f"| {label} | {m:.3f} / {p99:.3f} | {tm:.3f} / {tp99:.3f} | {ort_cell} | {n / (m / 1000):,.0f} | {best / m:.2f}x |")


if __name__ == "__main__":
    main()

"""Checks the zoo's PyTorch definitions against the checked-in reference outputs, on the CPU and
(when present) CUDA, so the same definitions serve as peers on any PyTorch version.

  /usr/bin/python3 -m rankd_zoo.check [--data tests/data/zoo] [--device cpu,cuda]

Exits 0 when every model reproduces every reference within 1e-5 (CPU) / 1e-3 (CUDA, TF32 off);
exits 77 when PyTorch is not installed (a skip for ctest).
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("PyTorch not installed: skipped")
    sys.exit(77)

from . import models, requests as rq

MODELS = {"dlrm_dcnv2": "dlrm_dcnv2", "dlrm": "dlrm", "din": "din", "bst": "bst", "mmoe": "mmoe"}


def from_json(feats, body):
    by_name = {i["name"]: i for i in body["inputs"]}
    req = {}
    for f in feats:
        i = by_name[f.name]
        if f.kind == "ragged":
            if "parameters" in i:
                flat, lists, pos = i["data"], [], 0
                for n in i["parameters"]["lengths"]:
                    lists.append(np.array(flat[pos:pos + n], dtype=np.int64))
                    pos += n
            else:
                lists = [np.array(row, dtype=np.int64) for row in i["data"]]
            req[f.name] = lists
        else:
            dt = np.float32 if f.kind == "float" else np.int64
            req[f.name] = np.array(i["data"], dtype=dt).reshape(i["shape"])
    return req


def main():
    p = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--data", default=os.path.join(here, "..", "..", "tests", "data", "zoo"))
    p.add_argument("--device", default="cpu,cuda")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    worst_all = 0.0
    failed = False
    for name in MODELS:
        model = models.build(name, "tiny", seed=0)
        feats = rq.features(name, model)
        lines = open(os.path.join(a.data, f"{name}.requests.jsonl")).read().splitlines()
        expected = open(os.path.join(a.data, f"{name}.expected.jsonl")).read().splitlines()
        for device in a.device.split(","):
            if device == "cuda" and not torch.cuda.is_available():
                continue
            m = model.to(device)
            worst = 0.0
            with torch.no_grad():
                for line, exp in zip(lines, expected):
                    body, want = json.loads(line), json.loads(exp)
                    n = max(len(v) if isinstance(v, list) else v.shape[0] for v in from_json(feats, body).values())
                    args = [t.to(device) for t in rq.to_torch(feats, from_json(feats, body), n)]
                    out = m(*args)
                    out = out if isinstance(out, tuple) else (out,)
                    for t, w in zip(out, want["outputs"]):
                        ref = torch.tensor(w["data"], dtype=torch.float64).reshape(w["shape"])
                        got = t.double().cpu()
                        worst = max(worst, float((got - ref).norm() / ref.norm()))
            tol = 1e-5 if device == "cpu" else 1e-3
            status = "ok" if worst <= tol else "FAIL"
            failed |= worst > tol
            worst_all = max(worst_all, worst)
            print(f"{name:12s} {device:5s} torch {torch.__version__:12s} worst relative error {worst:.2e} {status}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

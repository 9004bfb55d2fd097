#!/usr/bin/env python3
"""W1 at MLPerf's row counts (the zoo's `mlperf` size, WORKLOADS.md) as a rankd model, written on the
GPU machine in one pass: PyTorch exports the graph with BF16 tables of a few rows, their initializers
are then pointed at one external-data file of the real sizes (each table 4 KiB-aligned), and that
file is filled with random BF16 rows straight from random bits by every core (49 GiB: no FP32 copy
and no second copy). Request files with Zipf 1.05 ids over each table's rows go beside.

  /usr/bin/python3 bench/mlperf_model.py --repo /dev/shm/repo --requests bench/out --pairs 512,32768

writes REPO/dlrm_dcnv2_mlperf/{config.yaml,1/model.onnx,1/tables.bin} and
REQUESTS/dlrm_dcnv2_mlperf_n{N}_l0.jsonl (8 requests each, 4 from 8,192 pairs up). --scale S keeps
that fraction of every table's rows (a check of the script on a small machine). Needs PyTorch,
numpy and onnx (the GPU machine has them).
"""
import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import time

import numpy as np
import onnx
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from rankd_zoo import export, models, requests as rq  # noqa: E402

NAME = "dlrm_dcnv2_mlperf"
CHUNK = 256 << 20  # bytes of the tables file one worker fills at a time
ALIGN = 4096       # each table starts on a block: a row never straddles two (O_DIRECT reads)


class Config:
    """What rq.features reads: a model's `cfg`."""

    def __init__(self, cfg):
        self.cfg = cfg


def fill(job):
    """Random BF16 values in +-[1/8, 1/2) (sign, one exponent bit and the mantissa random) into
    bytes [start, end) of the file."""
    path, start, end = job
    rng = np.random.default_rng([7, start // CHUNK])
    bits = rng.integers(0, 1 << 16, size=(end - start) // 2, dtype=np.uint16)
    bits &= 0x80FF
    bits |= 0x3E00
    fd = os.open(path, os.O_WRONLY)
    try:
        view, offset = memoryview(bits).cast("B"), start
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
    finally:
        os.close(fd)


def write_model(model_dir: str, rows, seed: int) -> int:
    """The graph (tables of i + 2 rows, so each initializer is known by its rows) with its tables made
    external, each [rows[i], dim] BF16 in tables.bin; the file's bytes."""
    cfg = models.DLRM_CONFIGS["mlperf"]
    small_cfg = dataclasses.replace(cfg, table_rows=[i + 2 for i in range(len(rows))])
    torch.manual_seed(seed)
    small = models.DLRMDCNv2(small_cfg).eval()
    feats = rq.features("dlrm_dcnv2", Config(small_cfg))
    example = rq.make_request(np.random.default_rng(seed), feats, 3)
    path = os.path.join(model_dir, "1", "model.onnx")
    export.write_onnx(small, feats, ["score"], tuple(rq.to_torch(feats, example, 3)), path)
    graph = onnx.load(path)
    offset, found = 0, set()
    for t in graph.graph.initializer:
        if t.data_type != onnx.TensorProto.BFLOAT16 or len(t.dims) != 2 or t.dims[1] != cfg.dim:
            continue
        i = t.dims[0] - 2
        assert 0 <= i < len(rows) and i not in found, f"an unexpected BF16 initializer {t.name} {list(t.dims)}"
        found.add(i)
        length = rows[i] * cfg.dim * 2
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        t.ClearField("raw_data")
        t.ClearField("int32_data")
        del t.dims[:]
        t.dims.extend([rows[i], cfg.dim])
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", "tables.bin"), ("offset", str(offset)), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        offset += length
    assert len(found) == len(rows), f"found {len(found)} of the {len(rows)} tables in the exported graph"
    with open(path, "wb") as f:
        f.write(graph.SerializeToString())
    return offset


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", required=True)
    p.add_argument("--requests", default="", help="folder for the request files (none without it)")
    p.add_argument("--pairs", default="512,32768")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    a = p.parse_args()
    cfg = models.DLRM_CONFIGS["mlperf"]
    rows = [max(1, int(r * a.scale)) for r in cfg.table_rows]
    model_dir = os.path.join(a.repo, NAME)
    os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
    feats = rq.features("dlrm_dcnv2", Config(dataclasses.replace(cfg, table_rows=rows)))
    with open(os.path.join(model_dir, "config.yaml"), "w") as f:
        f.write(export.config_yaml(NAME, feats, ["score"]))

    began = time.time()
    size = write_model(model_dir, rows, a.seed)
    exported = time.time()
    tables = os.path.join(model_dir, "1", "tables.bin")
    with open(tables, "wb") as f:
        f.truncate(size)
    jobs = [(tables, start, min(start + CHUNK, size)) for start in range(0, size, CHUNK)]
    with multiprocessing.Pool(a.workers) as pool:
        pool.map(fill, jobs, chunksize=1)
    filled = time.time()
    print(json.dumps({"model": NAME, "rows": sum(rows), "table_bytes": size, "export_s": round(exported - began, 1),
                      "fill_s": round(filled - exported, 1),
                      "fill_gb_s": round(size / 1e9 / max(filled - exported, 1e-9), 2)}), flush=True)

    if a.requests:
        os.makedirs(a.requests, exist_ok=True)
        rng = np.random.default_rng(123)
        for n in [int(x) for x in a.pairs.split(",") if x]:
            path = os.path.join(a.requests, f"{NAME}_n{n}_l0.jsonl")
            with open(path, "w") as f:
                for i in range(8 if n < 8192 else 4):
                    f.write(json.dumps(rq.to_json(feats, rq.make_request(rng, feats, n), str(i), flat_ragged=True)))
                    f.write("\n")
        print(json.dumps({"requests_s": round(time.time() - filled, 1)}), flush=True)


if __name__ == "__main__":
    main()

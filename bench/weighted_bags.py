#!/usr/bin/python3
"""Weighted embedding bags (nn.EmbeddingBag with per_sample_weights) in rankd against the same bags
unweighted, and against PyTorch on the same device (docs/passes.md, "PyTorch's nn.EmbeddingBag").

    python3 bench/weighted_bags.py --rankd "build/rankd" --out DIR [--bags 64,512,4096]

Exports two models with torch.onnx's TorchScript exporter: K tables of ROWS x DIM (FP32, seed 0),
each pooled by a sum bag over ragged ids, with per-sample weights or without, the K bags
concatenated. Writes one request file per batch size (uniform ids, bag lengths uniform
in 1..2 * MEAN, weights uniform in [-1, 1]), runs `rankd bench engine` on both models and times
PyTorch's own bags on the same inputs: from host arrays to the result on the host, as `rankd
bench engine` times a request, and on the device alone (CUDA events, inputs already there). Needs a GPU and
PyTorch (the GPU machine's Python has it). Prints a Markdown table; --json writes the figures.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch


class Bags(torch.nn.Module):
    def __init__(self, tables, rows, dim, weighted):
        super().__init__()
        torch.manual_seed(0)
        self.bags = torch.nn.ModuleList(torch.nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.weighted = weighted

    def forward(self, *args):
        step = 3 if self.weighted else 2
        outs = []
        for k, bag in enumerate(self.bags):
            ids, offsets = args[step * k], args[step * k + 1]
            weights = args[step * k + 2] if self.weighted else None
            outs.append(bag(ids, offsets, per_sample_weights=weights))
        return torch.cat(outs, 1)


def export(module, path, tables, weighted):
    names = []
    example = []
    for k in range(tables):
        names += ["ids_%d" % k, "offsets_%d" % k] + (["w_%d" % k] if weighted else [])
        example += [torch.tensor([1, 2, 3]), torch.tensor([0, 2])] + ([torch.ones(3)] if weighted else [])
    axes = {n: {0: n + "_n"} for n in names}
    torch.onnx.export(module, tuple(example), path, input_names=names, output_names=["y"], dynamic_axes=axes,
                      opset_version=17, dynamo=False)


def write_model(repo, name, module, tables, max_length, max_rows, weighted):
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    export(module, os.path.join(repo, name, "1", "model.onnx"), tables, weighted)
    lines = ["name: " + name, "platform: onnx", "max_batch_size: %d" % max_rows, "inputs:"]
    for k in range(tables):
        for input_name, dtype in [("ids_%d" % k, "INT64")] + ([("w_%d" % k, "FP32")] if weighted else []):
            lines += ["  - name: " + input_name, "    datatype: " + dtype, "    ragged: true",
                      "    max_length: %d" % max_length, "    offsets: offsets_%d" % k]
    with open(os.path.join(repo, name, "config.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")


def make_batch(rng, tables, rows, bags, mean):
    batch = []
    for _ in range(tables):
        lengths = rng.integers(1, 2 * mean + 1, size=bags)
        ids = rng.integers(0, rows, size=int(lengths.sum()))
        weights = rng.uniform(-1, 1, size=ids.size).astype(np.float32)
        batch.append((ids, lengths, weights))
    return batch


def request_line(batch, weighted):
    inputs = []
    for k, (ids, lengths, weights) in enumerate(batch):
        inputs.append({"name": "ids_%d" % k, "datatype": "INT64", "shape": [int(ids.size)], "data": ids.tolist(),
                       "parameters": {"lengths": lengths.tolist()}})
        if weighted:
            inputs.append({"name": "w_%d" % k, "datatype": "FP32", "shape": [int(ids.size)],
                           "data": [float(w) for w in weights], "parameters": {"lengths": lengths.tolist()}})
    return json.dumps({"inputs": inputs})


def torch_ms(module, batch, weighted, iters, device):
    """PyTorch's median ms for the batch: on the device alone (CUDA events, its inputs already
    there), and from host arrays to the result back on the host (what `rankd bench engine` times)."""
    host = []
    for ids, lengths, weights in batch:
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        host += [torch.from_numpy(ids), torch.from_numpy(offsets)] + ([torch.from_numpy(weights)] if weighted else [])
    on_device = [t.to(device) for t in host]
    device_ms, host_ms = [], []
    with torch.inference_mode():
        for i in range(iters + 20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module(*on_device)
            end.record()
            torch.cuda.synchronize()
            began = time.perf_counter()
            module(*[t.to(device) for t in host]).cpu()
            took = (time.perf_counter() - began) * 1000
            if i >= 20:
                device_ms.append(start.elapsed_time(end))
                host_ms.append(took)
    return float(np.median(device_ms)), float(np.median(host_ms))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rankd", required=True, help="the rankd command")
    p.add_argument("--out", required=True, help="a folder for the models and request files")
    p.add_argument("--bags", default="64,512,4096", help="bags a request (per table)")
    p.add_argument("--tables", type=int, default=4)
    p.add_argument("--rows", type=int, default=1000000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--mean-length", type=int, default=20, help="ids a bag, on average")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    bag_counts = [int(b) for b in args.bags.split(",")]
    repo = os.path.join(args.out, "models")
    modules = {}
    for weighted in (True, False):
        name = "bags_weighted" if weighted else "bags"
        modules[weighted] = Bags(args.tables, args.rows, args.dim, weighted).eval()
        write_model(repo, name, modules[weighted], args.tables, 2 * args.mean_length, max(bag_counts), weighted)
    rng = np.random.default_rng(1)
    rows_out = []
    for bags in bag_counts:
        batches = [make_batch(rng, args.tables, args.rows, bags, args.mean_length) for _ in range(4)]
        for weighted in (True, False):
            name = "bags_weighted" if weighted else "bags"
            path = os.path.join(args.out, "%s_%d.jsonl" % (name, bags))
            with open(path, "w") as f:
                for batch in batches:
                    f.write(request_line(batch, weighted) + "\n")
            result = os.path.join(args.out, "%s_%d.json" % (name, bags))
            subprocess.run(args.rankd.split() + ["bench", "engine", "--model-repo", repo, "--model", name,
                                                 "--requests", path, "--backend", "cuda", "--iters", str(args.iters),
                                                 "--warmup", "200", "--json", result], check=True,
                           stdout=subprocess.DEVNULL)
            with open(result) as f:
                figures = json.load(f)
            device = torch.device("cuda")
            device_ms, host_ms = torch_ms(modules[weighted].to(device), batches[0], weighted, args.iters // 4, device)
            rows_out.append({"bags": bags, "weighted": weighted, "ids": int(sum(b[0].size for b in batches[0])),
                             "rankd_median_ms": figures["median_ms"], "rankd_p99_ms": figures["p99_ms"],
                             "steps": figures["steps"], "torch_host_median_ms": host_ms,
                             "torch_device_median_ms": device_ms})
    print("| bags a table | weighted | ids a request | rankd steps | rankd median ms | rankd p99 ms "
          "| PyTorch host to host, median ms | PyTorch on the device, median ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows_out:
        print("| %d | %s | %d | %d | %.4f | %.4f | %.4f | %.4f |" % (
            r["bags"], "yes" if r["weighted"] else "no", r["ids"], r["steps"], r["rankd_median_ms"],
            r["rankd_p99_ms"], r["torch_host_median_ms"], r["torch_device_median_ms"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows_out}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())

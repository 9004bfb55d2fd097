"""Exports a zoo model as a rankd model package, plus requests and PyTorch's reference outputs.

  /usr/bin/python3 -m rankd_zoo.export --model din --size tiny --repo models/zoo --data tests/data/zoo

writes REPO/NAME/config.yaml (unless --no-config), REPO/NAME/1/model.onnx, DATA/NAME.requests.jsonl
(KServe v2 bodies, one per line) and DATA/NAME.expected.jsonl (PyTorch's outputs, one per line).
"""
import argparse
import inspect
import json
import os

import torch

from . import models, requests as rq


def config_yaml(name: str, feats, outputs) -> str:
    lines = [f"name: {name}", "platform: onnx", "inputs:"]
    for f in feats:
        lines.append(f"  - name: {f.name}")
        lines.append(f"    datatype: {'FP32' if f.kind == 'float' else 'INT64'}")
        if f.kind == "ragged":
            lines.append("    ragged: true")
            lines.append(f"    max_length: {f.max_length}")
        else:
            lines.append(f"    dims: {list(f.width)}")
        if f.scope == "user":
            lines.append("    scope: user")
    lines.append("outputs:")
    for o in outputs:
        lines.append(f"  - name: {o}")
    return "\n".join(lines) + "\n"


def output_names(name: str):
    return ["ctr", "cvr"] if name == "mmoe" else ["score"]


def write_onnx(model, feats, outs, args, path, opset=17):
    """`model` traced on `args` into the ONNX file `path`, every input's batch (and a ragged one's
    length) dynamic."""
    dynamic = {}
    for f in feats:
        dynamic[f.name] = {0: "batch", 1: f"{f.name}_len"} if f.kind == "ragged" else {0: "batch"}
    for o in outs:
        dynamic[o] = {0: "batch"}
    extra = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        extra["dynamo"] = False  # torch 2.x: the TorchScript exporter, as torch 1.13 uses
    torch.onnx.export(model, args, path, input_names=[f.name for f in feats], output_names=outs,
                      dynamic_axes=dynamic, opset_version=opset, do_constant_folding=True, **extra)


def export(name, size, repo, data, count, seed, no_config=False, sizes=(1, 2, 3, 5, 8), seq_len=None, package=None, opset=17):
    package = package or name
    model = models.build(name, size, seed=seed)
    feats, reqs = rq.request_set(name, model, count, seed + 1, sizes=sizes, seq_len=seq_len)
    outs = output_names(name)
    model_dir = os.path.join(repo, package)
    os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
    if not no_config:
        with open(os.path.join(model_dir, "config.yaml"), "w") as f:
            f.write(config_yaml(package, feats, outs))
    example_n, example = reqs[min(2, len(reqs) - 1)]
    write_onnx(model, feats, outs, tuple(rq.to_torch(feats, example, example_n)),
               os.path.join(model_dir, "1", "model.onnx"), opset)
    if data:
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, f"{package}.requests.jsonl"), "w") as fr, \
             open(os.path.join(data, f"{package}.expected.jsonl"), "w") as fe, torch.no_grad():
            for i, (n, req) in enumerate(reqs):
                fr.write(json.dumps(rq.to_json(feats, req, f"{package}-{i}", flat_ragged=i % 2 == 1)) + "\n")
                result = model(*rq.to_torch(feats, req, n))
                result = result if isinstance(result, tuple) else (result,)
                fe.write(json.dumps({"id": f"{package}-{i}", "outputs": [
                    {"name": o, "shape": list(t.shape), "data": t.reshape(-1).tolist()} for o, t in zip(outs, result)]}) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=["dlrm_dcnv2", "dlrm", "din", "bst", "mmoe"])
    p.add_argument("--size", default="tiny", choices=["tiny", "full"])
    p.add_argument("--repo", required=True)
    p.add_argument("--data", default="")
    p.add_argument("--count", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default=None, help="package name (default: the model's name)")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (13-17; below 17 LayerNorm is decomposed)")
    p.add_argument("--no-config", action="store_true", help="write only 1/model.onnx (config derived by rankd)")
    a = p.parse_args()
    export(a.model, a.size, a.repo, a.data, a.count, a.seed, a.no_config, package=a.name, opset=a.opset)


if __name__ == "__main__":
    main()

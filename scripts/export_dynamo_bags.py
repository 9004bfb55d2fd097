"""Exports nn.EmbeddingBag with torch.onnx's dynamo exporter: tests/data/embedding_bags/dynamo_*.onnx.

  python3 scripts/export_dynamo_bags.py OUT_DIR

Needs PyTorch 2.9 or later with onnxscript (not Debian's: the GPU machine's Python has them). Writes
a sum, mean and max bag over offsets and a sum with per-sample weights (a 50 x 4 table from seed 0),
then prints each graph's nodes, the Loop's body and branches indented, as the importer reads them
(model/dynamo_bag_import.h). The exporter keeps each node's Python stack trace (with the
machine's paths) in metadata: the files are written without it, and without doc strings.
"""
import os
import sys

import torch

from onnx_tidy import show, tidy

out = sys.argv[1]


class Bag(torch.nn.Module):
    def __init__(self, mode, weighted=False):
        super().__init__()
        torch.manual_seed(0)
        self.bag = torch.nn.EmbeddingBag(50, 4, mode=mode)
        self.weighted = weighted

    def forward(self, ids, offsets, weights=None):
        if self.weighted:
            return self.bag(ids, offsets, per_sample_weights=weights)
        return self.bag(ids, offsets)


n, b = torch.export.Dim("n", min=2), torch.export.Dim("b", min=2)
ids = torch.tensor([1, 2, 3, 4, 5, 6])
offsets = torch.tensor([0, 2, 5])
cases = [("sum", False), ("mean", False), ("max", False), ("sum", True)]
for mode, weighted in cases:
    name = "dynamo_%s%s" % ("weighted_" if weighted else "", mode)
    args = (ids, offsets, torch.rand(6)) if weighted else (ids, offsets)
    shapes = {"ids": {0: n}, "offsets": {0: b}}
    if weighted:
        shapes["weights"] = {0: n}
    try:
        prog = torch.onnx.export(Bag(mode, weighted).eval(), args, dynamo=True, dynamic_shapes=shapes,
                                 input_names=["ids", "offsets"] + (["weights"] if weighted else []),
                                 output_names=["pooled"])
        prog.save(os.path.join(out, name + ".onnx"))
        print("ok", name)
    except Exception as e:
        print("fail", name, repr(e)[:800])


for f in sorted(x for x in os.listdir(out) if x.endswith(".onnx")):
    tidy(os.path.join(out, f))
    show(os.path.join(out, f), f)

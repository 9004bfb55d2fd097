"""Exports nn.EmbeddingBag over padded 2-D ids with per-sample weights, by both of torch.onnx's
exporters: tests/data/embedding_bags/padded_weighted_sum.onnx (TorchScript, opset 17) and
dynamo_padded_weighted_sum.onnx (dynamo, opset 20).

  python3 scripts/export_padded_weighted_bags.py OUT_DIR

Needs PyTorch 2.9 or later with onnxscript (not Debian's: the GPU machine's Python has them). The
bag is a sum over a 50 x 4 table from seed 0; ids [bags, 3] and weights [bags, 3], both with a
dynamic first axis. The files are tidied and shown as scripts/onnx_tidy.py does.
"""
import os
import sys

import torch

from onnx_tidy import show, tidy

out = sys.argv[1]


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.bag = torch.nn.EmbeddingBag(50, 4, mode="sum")

    def forward(self, ids, weights):
        return self.bag(ids, per_sample_weights=weights)


ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
weights = torch.rand(2, 3)
names = {"input_names": ["ids", "weights"], "output_names": ["pooled"]}
path = os.path.join(out, "padded_weighted_sum.onnx")
torch.onnx.export(Bag().eval(), (ids, weights), path, dynamo=False, opset_version=17,
                  dynamic_axes={"ids": {0: "bags"}, "weights": {0: "bags"}}, **names)
bags = torch.export.Dim("bags", min=2)
program = torch.onnx.export(Bag().eval(), (ids, weights), dynamo=True,
                            dynamic_shapes={"ids": {0: bags}, "weights": {0: bags}}, **names)
program.save(os.path.join(out, "dynamo_padded_weighted_sum.onnx"))
for f in ("padded_weighted_sum.onnx", "dynamo_padded_weighted_sum.onnx"):
    tidy(os.path.join(out, f))
    show(os.path.join(out, f), f)

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

import onnx
import torch

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


def strip(graph):
    """Drops doc strings and metadata (stack traces) from `graph` and the graphs in its nodes."""
    graph.doc_string = ""
    del graph.metadata_props[:]
    for node in graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                strip(a.g)
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        v.doc_string = ""
        del v.metadata_props[:]


for f in sorted(x for x in os.listdir(out) if x.endswith(".onnx")):
    model = onnx.load(os.path.join(out, f))
    model.doc_string = ""
    del model.metadata_props[:]
    strip(model.graph)
    onnx.save(model, os.path.join(out, f))


def show(graph, depth):
    for node in graph.node:
        print("  " * depth, node.op_type, list(node.input), list(node.output))
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                print("  " * depth, " [", a.name, "]")
                show(a.g, depth + 2)


for f in sorted(x for x in os.listdir(out) if x.endswith(".onnx")):
    m = onnx.load(os.path.join(out, f))
    print(f, "opset", [(o.domain, o.version) for o in m.opset_import], "functions", len(m.functions))
    show(m.graph, 1)

"""Derives `mmoe_strings` (W4 with some categorical features sent as strings) from the exported
`mmoe`, with ONNX's helper alone (no PyTorch): the graph's one `sparse` [batch, 20] input becomes
`ids` [batch, 14] (features 0-13, integer ids) and `categories` [batch, 6] (features 14-19), each
feature's column read from the input that now holds it. The config says `categories` arrives as BYTES, each string hashed
by xxhash64 (seed 0) into the tables' rows (docs/strings.md, "W4s").

  /usr/bin/python3 -m rankd_zoo.string_variant --repo models/zoo [--source mmoe] [--name mmoe_strings]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STRING_FEATURES = 6


def derive(repo: str, source: str = "mmoe", name: str = "mmoe_strings") -> None:
    model = onnx.load(os.path.join(repo, source, "1", "model.onnx"))
    graph = model.graph
    sparse = next(i for i in graph.input if i.name == "sparse")
    width = sparse.type.tensor_type.shape.dim[1].dim_value
    first = width - STRING_FEATURES
    rows = next(t.dims[0] for t in graph.initializer if t.name == "tables.0.weight")
    graph.input.remove(sparse)
    graph.input.insert(0, helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", first]))
    graph.input.insert(1, helper.make_tensor_value_info("categories", TensorProto.INT64, ["batch", STRING_FEATURES]))
    # Each feature's column, `Gather(sparse, k, axis=1)`, now read from the input that holds it.
    constants = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node
                 if n.op_type == "Constant" and n.attribute[0].name == "value"}
    constants.update((t.name, numpy_helper.to_array(t)) for t in graph.initializer)
    nodes = []
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] == "sparse":
            k = int(constants[node.input[1]].reshape(-1)[0])  # a scalar index (a column of the batch)
            assert constants[node.input[1]].size == 1, node.name
            if k < first:
                node.input[0] = "ids"
            else:
                index = "/categories_column_%d" % (k - first)
                nodes.append(helper.make_node("Constant", [], [index], name=index,
                                              value=numpy_helper.from_array(np.array(k - first, dtype=np.int64))))
                node.input[0], node.input[1] = "categories", index
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    out = os.path.join(repo, name)
    os.makedirs(os.path.join(out, "1"), exist_ok=True)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "1", "model.onnx"))
    with open(os.path.join(out, "config.yaml"), "w") as f:
        f.write(f"""name: {name}
platform: onnx
inputs:
  - name: ids
    datatype: INT64
    dims: [{width - STRING_FEATURES}]
  - name: categories          # "f14=v123": a feature's name and value, hashed to a row
    datatype: BYTES
    dims: [{STRING_FEATURES}]
    hash: {{function: xxhash64, seed: 0, buckets: {rows}}}
    max_string_bytes: 256
  - name: dense
    datatype: FP32
    dims: [10]
outputs:
  - name: ctr
  - name: cvr
""")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default="models/zoo")
    parser.add_argument("--source", default="mmoe", help="the mmoe package in REPO to derive from")
    parser.add_argument("--name", default="mmoe_strings")
    args = parser.parse_args()
    derive(args.repo, args.source, args.name)

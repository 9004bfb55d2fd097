"""What the export scripts (export_dynamo_bags.py, export_padded_weighted_bags.py) do to the files
they write: `tidy` drops doc strings and metadata (the dynamo exporter keeps each node's Python
stack trace, with the machine's paths) from a model and every graph in it and saves it again;
`show` prints its opsets and nodes, Loop bodies and If branches indented, as the importer reads
them."""
import onnx


def _strip(graph):
    graph.doc_string = ""
    del graph.metadata_props[:]
    for node in graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _strip(a.g)
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        v.doc_string = ""
        del v.metadata_props[:]


def tidy(path):
    model = onnx.load(path)
    model.doc_string = ""
    del model.metadata_props[:]
    _strip(model.graph)
    onnx.save(model, path)


def _show_graph(graph, depth):
    for node in graph.node:
        print("  " * depth, node.op_type, list(node.input), list(node.output))
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                print("  " * depth, " [", a.name, "]")
                _show_graph(a.g, depth + 2)


def show(path, name):
    model = onnx.load(path)
    print(name, "opset", [(o.domain, o.version) for o in model.opset_import], "functions", len(model.functions))
    _show_graph(model.graph, 1)

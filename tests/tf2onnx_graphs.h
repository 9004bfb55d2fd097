// tf2onnx's graphs of TensorFlow's segment sums, built node for node for the tests of
// compile/segment_bags.cc (no TensorFlow here): the SegmentSum handler's grid form, and a graph as
// an ONNX file would hold it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/graph.h"
#include "onnx/onnx_pb.h"
#include "test_util.h"

namespace rankd::testing {

// A node with `outputs` outputs (GraphBuilder's Op has one).
inline std::vector<int> MultiOp(GraphBuilder& b, const std::string& op, std::vector<int> inputs, size_t outputs,
                                std::map<std::string, AttributeValue> attrs = {}) {
  Graph& g = b.graph();
  Node n;
  n.op = op;
  n.name = op + "_" + std::to_string(g.nodes.size());
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  for (size_t o = 0; o < outputs; ++o)
    n.outputs.push_back(g.AddValue({n.name + "_" + std::to_string(o), DType::kInvalid, {}, false}));
  g.nodes.push_back(n);
  return n.outputs;
}

inline int I64(GraphBuilder& b, const std::string& name, std::vector<int64_t> v, Shape shape) {
  return b.Const(name, testing::MakeI64(std::move(shape), std::move(v)));
}

// tf2onnx's SegmentSum handler (since 2021) over `rows` [T, ...] and `segment` [T] INT64 into
// `segments` rows: the segment ids sorted (TopK) and counted (Unique), an index grid filled with -1
// and scattered into, the rows plus one zero row gathered through it and summed over axis 1.
// Constants are named after `p`, so that one graph may hold several.
struct GridSum {
  int sum;            // [segments, ...]
  int sorted_unique;  // Unique's output 0 over the sorted ids
  int counts;         // Unique's output 3
  int segments_unsq;  // [segments]
};
inline GridSum Tf2onnxGridSum(GraphBuilder& b, const std::string& p, int rows, int segment, int segments) {
  const int axes0 = I64(b, p + "axes0", {0}, {1});
  const int zero = I64(b, p + "zero", {0}, {}), one = I64(b, p + "one", {1}, {});
  const int segments_unsq = b.Op("Unsqueeze", {segments, axes0});
  const int seg_shape = b.Op("Shape", {segment});
  const int seg_shape_sq = b.Op("Squeeze", {seg_shape, axes0});
  const std::vector<int> topk = MultiOp(b, "TopK", {segment, seg_shape}, 2,
                                        {{"axis", int64_t{0}}, {"largest", int64_t{0}}, {"sorted", int64_t{1}}});
  const std::vector<int> unique = MultiOp(b, "Unique", {topk[0]}, 4, {{"axis", int64_t{0}}, {"sorted", int64_t{1}}});
  const int max_cnt = b.Op("ReduceMax", {unique[3]}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{1}}});
  const int seg_range = b.Op("Range", {zero, seg_shape_sq, one});
  const int range_mod = b.Op("Mod", {seg_range, b.Op("Gather", {unique[3], unique[2]})});
  const int grid_shape = b.Op("Concat", {segments_unsq, max_cnt}, {{"axis", int64_t{0}}});
  const int grid = b.Op("ConstantOfShape", {grid_shape}, {{"value", MakeI64({1}, {-1})}});
  const int axes_last = I64(b, p + "axes_last", {-1}, {1});
  const int scatter_at =
      b.Op("Concat", {b.Op("Unsqueeze", {topk[0], axes_last}), b.Op("Unsqueeze", {range_mod, axes_last})},
           {{"axis", int64_t{1}}});
  const int scattered = b.Op("ScatterND", {grid, scatter_at, topk[1]});
  const int identity_shape = b.Op("Slice", {b.Op("Shape", {rows}), I64(b, p + "id_starts", {1}, {1}),
                                            I64(b, p + "id_ends", {INT64_MAX}, {1}), axes0});
  const int identity = b.Op("ConstantOfShape", {identity_shape}, {{"value", MakeF32({1}, {0.0f})}});
  const int with_zero = b.Op("Concat", {rows, b.Op("Unsqueeze", {identity, axes0})}, {{"axis", int64_t{0}}});
  const int sum = b.Op("ReduceSum", {b.Op("Gather", {with_zero, scattered}), I64(b, p + "axes1", {1}, {1})},
                       {{"keepdims", int64_t{0}}});
  return {sum, unique[0], unique[3], segments_unsq};
}

// `g` as an ONNX file would hold it (opset 13), for the importer's side of a segment sum: the
// ops no backend runs (TopK, Unique with four outputs, ScatterND, NonZero, OneHot, Compress) and their
// attributes imported as they are, for the recogniser to take.
inline std::string AsOnnx(const Graph& g) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("tf2onnx_segments");
  auto name = [&](int v) { return v < 0 ? std::string() : g.values[static_cast<size_t>(v)].name; };
  auto set_tensor = [](onnx::TensorProto* t, const Tensor& data, const std::string& n) {
    t->set_name(n);
    for (int64_t d : data.shape()) t->add_dims(d);
    t->set_data_type(data.dtype() == DType::kF32    ? onnx::TensorProto::FLOAT
                     : data.dtype() == DType::kBool ? onnx::TensorProto::BOOL
                                                    : onnx::TensorProto::INT64);
    t->set_raw_data(std::string(static_cast<const char*>(data.raw()), data.bytes()));
  };
  for (const auto& [id, t] : g.constants) set_tensor(graph->add_initializer(), t, name(id));
  for (int in : g.inputs) {
    onnx::ValueInfoProto* v = graph->add_input();
    v->set_name(name(in));
    auto* type = v->mutable_type()->mutable_tensor_type();
    type->set_elem_type(g.values[static_cast<size_t>(in)].dtype == DType::kF32 ? onnx::TensorProto::FLOAT
                                                                               : onnx::TensorProto::INT64);
    for (int64_t d : g.values[static_cast<size_t>(in)].shape) {
      d < 0 ? type->mutable_shape()->add_dim()->set_dim_param("n") : type->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  for (int out : g.outputs) {
    onnx::ValueInfoProto* v = graph->add_output();
    v->set_name(name(out));
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  std::set<int> read(g.outputs.begin(), g.outputs.end());
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const Node& n : g.nodes) {
    onnx::NodeProto* p = graph->add_node();
    p->set_op_type(n.op);
    p->set_name(n.name);
    for (int v : n.inputs) p->add_input(name(v));
    // An output nothing reads is left unnamed, as tf2onnx leaves Unique's indices.
    for (int v : n.outputs) p->add_output(n.outputs.size() > 1 && !read.count(v) ? std::string() : name(v));
    for (const auto& [key, value] : n.attrs) {
      onnx::AttributeProto* a = p->add_attribute();
      a->set_name(key);
      if (const auto* i = std::get_if<int64_t>(&value)) {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(*i);
      } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : *ints) a->add_ints(v);
      } else if (const auto* t = std::get_if<Tensor>(&value)) {
        a->set_type(onnx::AttributeProto::TENSOR);
        set_tensor(a->mutable_t(), *t, "");
      }
    }
  }
  return model.SerializeAsString();
}

}  // namespace rankd::testing

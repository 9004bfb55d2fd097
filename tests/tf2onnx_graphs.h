// tf2onnx's graphs of TensorFlow's segment sums, built node for node for the tests of
// compile/segment_bags.cc (no TensorFlow here): the SegmentSum handler's grid form, and a graph as
// an ONNX file would hold it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
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

inline Tensor Bools(Shape shape, std::vector<uint8_t> v) { return Tensor::FromVector<uint8_t>(DType::kBool, shape, v); }

// safe_embedding_lookup_sparse's sparse steps, as tf2onnx writes them: SparseReshape to the ids'
// shape ([rows * slots, 1] with `reshaped_to_other`), sparse_retain of the ids >= 0 and
// SparseFillEmptyRows with default id 0; with `weights` (the weights' values at the ids' entries)
// the weights retained beside the ids and filled with weight 1 by their own SparseFillEmptyRows,
// the retain's mask And(ids >= 0, ones_like(weights)) and, with `prune`, a second retain of
// the weights > 0 (TensorFlow 2's _prune_invalid_weights for a mean or sqrt-n), or with
// `prune_in_one` the weights > 0 in the first retain's mask (TensorFlow 1's _prune_invalid_ids).
struct SafeSteps {
  bool reshaped_to_other = false;
  int weights = -1;
  bool prune = false;
  bool prune_in_one = false;
};
struct SafeSparse {
  int indices, values, weights = -1;
  int empty;  // SparseFillEmptyRows' empty-row indicator
  int dense;  // the ids' shape
};
inline SafeSparse Tf2onnxSafeSparse(GraphBuilder& b, int ids, int indices, int values, const SafeSteps& s) {
  const int zero = I64(b, "safe_zero", {0}, {}), one = I64(b, "safe_one", {1}, {});
  const int axes0 = I64(b, "safe_axes0", {0}, {1}), axes1 = I64(b, "safe_axes1", {1}, {1});
  const int dense = b.Op("Shape", {ids});
  int weights = s.weights;
  // The new shape [prod(shape[:1]), shape[1]] (TensorFlow's code), through the handler.
  const int first =
      b.Op("ReduceProd", {b.Op("Slice", {dense, I64(b, "p_starts", {0}, {1}), I64(b, "p_ends", {1}, {1}), axes0})},
           {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}});
  const int last = s.reshaped_to_other ? one : b.Op("Gather", {dense, one});
  const int first_entry =
      s.reshaped_to_other ? b.Op("ReduceProd", {dense}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}})
                          : first;
  const int asked = b.Op("Concat", {b.Op("Unsqueeze", {first_entry, axes0}), b.Op("Unsqueeze", {last, axes0})},
                         {{"axis", int64_t{0}}});
  const int product = b.Op("ReduceProd", {dense}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{1}}});
  const int missing =
      b.Op("Neg", {b.Op("Div", {product, b.Op("ReduceProd", {asked},
                                              {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{1}}})})});
  const int new_shape = b.Op("Where", {b.Op("Less", {asked, zero}), missing, asked});
  const int lower = b.Const("lower_tri", Bools({2, 2}, {1, 0, 1, 1}));
  auto strides = [&](int shape) {
    return b.Op("ReduceProd", {b.Op("Where", {lower, one, shape})},
                {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  };
  const int old_strides = strides(dense), new_strides = strides(new_shape);
  const int divisors =
      b.Op("Pad", {b.Op("Concat", {product, new_strides}, {{"axis", int64_t{0}}}), I64(b, "pads", {0, -1}, {2})});
  const int flat = b.Op("Unsqueeze", {b.Op("MatMul", {indices, old_strides}), axes1});
  indices = b.Op("Div", {b.Op("Mod", {flat, divisors}), new_strides});
  // sparse_retain(mask): Where(mask) as NonZero + Transpose, flattened, once for each tensor retained.
  auto retain = [&](int mask, int& idx, int& vals, int& w) {
    auto keep = [&] {
      return b.Op("Reshape", {b.Op("Transpose", {b.Op("NonZero", {mask})}, {{"perm", std::vector<int64_t>{1, 0}}}),
                              I64(b, "flat_" + std::to_string(b.graph().nodes.size()), {-1}, {1})});
    };
    const int k = keep();
    idx = b.Op("Gather", {idx, k});
    vals = b.Op("Gather", {vals, k});
    if (w >= 0) w = b.Op("Gather", {w, keep()});
  };
  const int zero_float = b.Const("safe_zero_float", MakeF32({}, {0.0f}));
  int mask = b.Op("GreaterOrEqual", {values, zero});
  if (weights >= 0) {
    const int also = s.prune_in_one ? b.Op("Greater", {weights, zero_float})
                                    : b.Op("ConstantOfShape", {b.Op("Shape", {weights})}, {{"value", Bools({1}, {1})}});
    mask = b.Op("And", {mask, also});
  }
  retain(mask, indices, values, weights);
  if (weights >= 0 && s.prune) retain(b.Op("Greater", {weights, zero_float}), indices, values, weights);
  // SparseFillEmptyRows, for the ids (default 0) and for the weights (1.0), each its own nodes.
  const int rows = b.Op("Slice", {new_shape, I64(b, "n_starts", {0}, {1}), I64(b, "n_ends", {1}, {1}), axes0});
  auto fill = [&](int idx, int vals, int fill_value, int& empty_out) -> std::pair<int, int> {
    const std::string p = std::to_string(b.graph().nodes.size());
    const int column0 = b.Op("Slice", {idx, I64(b, "c0_starts" + p, {0}, {1}), I64(b, "c0_ends" + p, {1}, {1}), axes1});
    const std::vector<int> present = MultiOp(b, "Unique", {column0}, 4, {{"sorted", int64_t{1}}});
    const int all = b.Op("ConstantOfShape", {rows}, {{"value", Bools({1}, {1})}});
    const int none = b.Op("ConstantOfShape", {b.Op("Shape", {present[0]})}, {{"value", Bools({1}, {0})}});
    empty_out = b.Op("ScatterElements", {all, present[0], none});
    const int empty_rows = b.Op("Compress", {b.Op("Range", {zero, b.Op("Squeeze", {rows, axes0}), one}), empty_out});
    const int defaults = b.Op("Expand", {fill_value, b.Op("Shape", {empty_rows})});
    const int columns =
        b.Op("Sub", {b.Op("Slice", {b.Op("Shape", {idx}), axes1, I64(b, "two" + p, {2}, {1}), axes0}), one});
    const int pads = b.Op("Concat", {I64(b, "triple_0" + p, {0, 0, 0}, {3}), columns}, {{"axis", int64_t{0}}});
    const int filled = b.Op("Pad", {b.Op("Unsqueeze", {empty_rows, axes1}), pads});
    return {b.Op("Concat", {idx, filled}, {{"axis", int64_t{0}}}),
            b.Op("Concat", {vals, defaults}, {{"axis", int64_t{0}}})};
  };
  SafeSparse out;
  out.dense = dense;
  std::tie(out.indices, out.values) = fill(indices, values, zero, out.empty);
  if (weights >= 0) {
    int unused_empty = -1;
    out.weights = fill(indices, weights, b.Const("safe_one_float", MakeF32({}, {1.0f})), unused_empty).second;
  }
  return out;
}

// safe_embedding_lookup_sparse's end: the filled rows zeroed (`zeroed`: no default_id; by Where, else by
// tf2onnx's Add/Mul form of Select), the result reshaped to [rows, width].
inline int Tf2onnxSafeResult(GraphBuilder& b, int out, int empty, int dense, bool zeroed, bool by_where) {
  if (zeroed) {
    const int out_shape = b.Op("Shape", {out});
    const int width = b.Op(
        "Slice", {out_shape, I64(b, "w_starts", {1}, {1}), I64(b, "w_ends", {2}, {1}), I64(b, "w_axes", {0}, {1})});
    const int mask = b.Op("Tile", {b.Op("Reshape", {empty, I64(b, "column", {-1, 1}, {2})}),
                                   b.Op("Concat", {I64(b, "one_1", {1}, {1}), width}, {{"axis", int64_t{0}}})});
    const int zeros = b.Op("ConstantOfShape", {out_shape}, {{"value", MakeF32({1}, {0.0f})}});
    if (by_where) {
      out = b.Op("Where", {mask, zeros, out});
    } else {
      const int as_float = b.Op("Cast", {mask}, {{"to", int64_t{1}}});
      const int kept = b.Op("Cast", {b.Op("Not", {mask})}, {{"to", int64_t{1}}});
      out = b.Op("Add", {b.Op("Mul", {as_float, zeros}), b.Op("Mul", {out, kept})});
    }
  }
  // The shape: the ids' rows (as INT32), then the result's columns, cast back for Reshape.
  const int rows = b.Op("Slice", {b.Op("Cast", {dense}, {{"to", int64_t{6}}}), I64(b, "r_starts", {0}, {1}),
                                  I64(b, "r_ends", {1}, {1}), I64(b, "r_axes", {0}, {1})});
  const int columns =
      b.Op("Slice", {b.Op("Cast", {b.Op("Shape", {out})}, {{"to", int64_t{6}}}), I64(b, "k_starts", {1}, {1}),
                     I64(b, "k_ends", {INT64_MAX}, {1}), I64(b, "k_axes", {0}, {1})});
  const int shape = b.Op("Cast", {b.Op("Concat", {rows, columns}, {{"axis", int64_t{0}}})}, {{"to", int64_t{7}}});
  return b.Op("Reshape", {out, shape});
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

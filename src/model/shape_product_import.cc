#include "model/shape_product_import.h"

#include <string>
#include <vector>

namespace rankd {
namespace {

// Whether the reduction covers all of a 1-D input: no axes, or axes [0] or [-1] (as an attribute
// before opset 18, a constant input since).
bool OverTheWholeVector(const Node& node, const Graph& graph) {
  std::vector<int64_t> axes = node.GetInts("axes");
  if (node.HasInput(1)) {
    const Tensor* given = graph.FindConstant(node.Input(1));
    if (!given || given->dtype() != DType::kI64) return false;
    axes.assign(given->data<int64_t>(), given->data<int64_t>() + given->size());
  }
  return axes.empty() || axes == std::vector<int64_t>{0} || axes == std::vector<int64_t>{-1};
}

}  // namespace

bool ImportShapeProduct(Node& node, Graph& graph) {
  if (node.op != "ReduceProd" || !node.HasInput(0) || node.GetInt("keepdims", 1) != 0 ||
      node.GetInt("noop_with_empty_axes", 0) != 0 || !OverTheWholeVector(node, graph)) {
    return false;
  }
  const int made_by = graph.Producers()[static_cast<size_t>(node.Input(0))];
  const Node* shape = made_by >= 0 ? &graph.nodes[static_cast<size_t>(made_by)] : nullptr;
  if (!shape || shape->op != "Shape" || shape->Has("start") || shape->Has("end") || !shape->HasInput(0)) return false;
  const Value& of = graph.values[static_cast<size_t>(shape->Input(0))];
  if (!of.rank_known || of.shape.empty()) return false;
  const int shape_value = node.Input(0);
  const auto rank = static_cast<int64_t>(of.shape.size());
  // Entry i of the shape, a scalar.
  auto entry = [&](int64_t i) {
    const int index =
        graph.AddConstant(node.name + "/index_" + std::to_string(i), Tensor::FromVector<int64_t>(DType::kI64, {}, {i}));
    const std::string name = node.name + "/dim_" + std::to_string(i);
    const int out = graph.AddValue(Value{name, DType::kI64, {}, true});
    graph.nodes.push_back(Node{"Gather", name, {shape_value, index}, {out}, {{"axis", int64_t{0}}}});
    return out;
  };
  int product = entry(0);
  for (int64_t i = 1; i + 1 < rank; ++i) {
    const int next = entry(i);
    const std::string name = node.name + "/product_" + std::to_string(i);
    const int out = graph.AddValue(Value{name, DType::kI64, {}, true});
    graph.nodes.push_back(Node{"Mul", name, {product, next}, {out}, {}});
    product = out;
  }
  node.attrs.clear();
  if (rank == 1) {  // the count is the one entry
    node.op = "Identity";
    node.inputs = {product};
  } else {
    node.op = "Mul";
    node.inputs = {product, entry(rank - 1)};
  }
  return true;
}

}  // namespace rankd

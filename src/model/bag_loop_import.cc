#include "model/bag_loop_import.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "model/dynamo_bag_import.h"
#include "model/dynamo_padding_bag_import.h"
#include "model/loop_body.h"

namespace rankd {

StatusOr<BagLoop> MatchBagLoop(const onnx::NodeProto& loop, const Graph& graph, const TensorFromProto& tensor_of) {
  RANKD_ASSIGN_OR_RETURN(std::optional<BagLoop> padded, MatchDynamoPaddingBagLoop(loop, graph, tensor_of));
  if (padded) return *padded;
  RANKD_ASSIGN_OR_RETURN(std::optional<BagLoop> dynamo, MatchDynamoBagLoop(loop, graph, tensor_of));
  if (dynamo) return *dynamo;
  const std::string where = "node '" + loop.name() + "' (Loop): ";
  auto refuse = [&](const std::string& why) {
    return Unimplemented(where +
                         "a Loop is taken only as PyTorch's exported nn.EmbeddingBag (sum, mean or max "
                         "over offsets, a sum with per-sample weights); here " +
                         why);
  };
  const onnx::GraphProto* g = SubgraphOf(loop, "body");
  if (!g || loop.output_size() != 1 || g->input_size() != 2 || g->output_size() != 2) {
    return refuse("the Loop is not one scan output over bags");
  }
  const LoopScope scope(*g, graph, tensor_of);
  const std::string& index = g->input(0).name();
  // The scan output: Reduce{Sum,Mean}(Gather(table, Slice(ids, start, end)), axes [0], keepdims 0).
  const onnx::NodeProto* reduce = scope.Op(g->output(1).name(), "ReduceSum");
  BagLoop bag;
  bag.mode = "sum";
  for (const auto& [op, mode] : {std::pair{"ReduceMean", "mean"}, std::pair{"ReduceMax", "max"}}) {
    if (reduce) break;
    reduce = scope.Op(g->output(1).name(), op);
    bag.mode = mode;
  }
  if (!reduce) {
    for (const char* op : {"ReduceMin", "ReduceProd"}) {
      if (scope.Op(g->output(1).name(), op)) return refuse(std::string("the bag's rows are reduced by ") + op);
    }
    return refuse("the scan output is not a ReduceSum, ReduceMean or ReduceMax");
  }
  std::optional<std::vector<int64_t>> axes =
      reduce->input_size() > 1 ? scope.Ints(InputOf(*reduce, 1)) : IntsAttr(*reduce, "axes");
  if (IntAttr(*reduce, "keepdims", 1) != 0 || axes != std::vector<int64_t>{0}) {
    return refuse("the reduction is not over the bag's ids (axes [0], keepdims 0)");
  }
  // Per-sample weights: Mul(rows, Unsqueeze(Slice(weights, the ids' bounds), [1])), either order.
  std::string reduced = InputOf(*reduce, 0);
  const onnx::NodeProto* weighted = scope.Op(reduced, "Mul");
  const onnx::NodeProto* weight_slice = nullptr;
  if (weighted) {
    const int rows_side = scope.Op(InputOf(*weighted, 0), "Gather") ? 0 : 1;
    const onnx::NodeProto* u = scope.Op(InputOf(*weighted, 1 - rows_side), "Unsqueeze");
    std::optional<std::vector<int64_t>> u_axes = !u                    ? std::nullopt
                                                 : u->input_size() > 1 ? scope.Ints(InputOf(*u, 1))
                                                                       : IntsAttr(*u, "axes");
    weight_slice = u ? scope.Op(InputOf(*u, 0), "Slice") : nullptr;
    if (!weight_slice || u_axes != std::vector<int64_t>{1}) {
      return refuse("the rows are multiplied by something other than per-sample weights (Unsqueeze(Slice(w), [1]))");
    }
    if (bag.mode != "sum") return refuse("per-sample weights are taken with a sum only (as PyTorch takes them)");
    reduced = InputOf(*weighted, rows_side);
  }
  const onnx::NodeProto* rows = scope.Op(reduced, "Gather");
  if (!rows || IntAttr(*rows, "axis", 0) != 0) return refuse("the reduced rows are not a Gather from a table");
  bag.table = graph.FindValue(InputOf(*rows, 0));
  const Tensor* table = bag.table >= 0 ? graph.FindConstant(bag.table) : nullptr;
  if (!table || table->rank() != 2) return refuse("the rows are not gathered from a constant table [rows, dim]");
  const onnx::NodeProto* slice = scope.Op(InputOf(*rows, 1), "Slice");
  if (!slice || slice->input_size() < 3 ||
      (slice->input_size() > 3 && scope.Ints(InputOf(*slice, 3)) != std::vector<int64_t>{0}) ||
      (slice->input_size() > 4 && scope.Ints(InputOf(*slice, 4)) != std::vector<int64_t>{1})) {
    return refuse("the ids are not one Slice of the ids");
  }
  bag.ids = graph.FindValue(InputOf(*slice, 0));
  if (weight_slice) {  // the weights sliced as the ids are
    bag.weights = graph.FindValue(InputOf(*weight_slice, 0));
    for (int k = 1; k < std::max(slice->input_size(), weight_slice->input_size()); ++k) {
      if (InputOf(*weight_slice, k) != InputOf(*slice, k)) return refuse("the weights are not sliced as the ids are");
    }
    if (bag.weights < 0) return refuse("the weights are not a value of the graph");
  }
  // Bounds: Unsqueeze(Gather(starts, i)) and Unsqueeze(Gather(ends, i)), ends = starts[1:].
  auto bound = [&](const std::string& value) -> int {
    const onnx::NodeProto* u = scope.Op(value, "Unsqueeze");
    const onnx::NodeProto* at = u ? scope.Op(InputOf(*u, 0), "Gather") : nullptr;
    if (!at || InputOf(*at, 1) != index || IntAttr(*at, "axis", 0) != 0) return -1;
    std::optional<std::vector<int64_t>> u_axes =
        u->input_size() > 1 ? scope.Ints(InputOf(*u, 1)) : IntsAttr(*u, "axes");
    return u_axes == std::vector<int64_t>{0} ? graph.FindValue(InputOf(*at, 0)) : -1;
  };
  const int starts = bound(InputOf(*slice, 1)), ends = bound(InputOf(*slice, 2));
  if (bag.ids < 0 || starts < 0 || ends < 0) return refuse("a bag's bounds are not read from the offsets");
  // starts = Concat(offsets, [number of ids]); ends = Slice(starts, [1], [past the end]).
  const Node* tail = scope.OuterOp(ends, "Slice");
  const auto ints = [&](const Node* n, size_t input) {
    const int value = n ? InputOf(*n, input) : -1;
    return value >= 0 ? scope.Ints(graph.values[static_cast<size_t>(value)].name) : std::nullopt;
  };
  const auto big = ints(tail, 2);
  if (!tail || InputOf(*tail, 0) != starts || ints(tail, 1) != std::vector<int64_t>{1} || !big || big->size() != 1 ||
      (*big)[0] < std::numeric_limits<int32_t>::max() ||
      (tail->inputs.size() > 3 && ints(tail, 3) != std::vector<int64_t>{0}) ||
      (tail->inputs.size() > 4 && ints(tail, 4) != std::vector<int64_t>{1})) {
    return refuse("the bags' ends are not the offsets after the first");
  }
  const Node* concat = scope.OuterOp(starts, "Concat");
  const Node* count = concat && concat->inputs.size() == 2 ? scope.OuterOp(InputOf(*concat, 1), "Unsqueeze") : nullptr;
  const Node* first = count ? scope.OuterOp(InputOf(*count, 0), "Gather") : nullptr;
  const Node* shape = first ? scope.OuterOp(InputOf(*first, 0), "Shape") : nullptr;
  if (!shape || InputOf(*shape, 0) != bag.ids || graph.ScalarConstant(InputOf(*first, 1)) != 0.0) {
    return refuse("the bags' starts are not the offsets followed by the number of ids");
  }
  // As many iterations as bags: the trip count is the number of ends.
  const Node* trips = loop.input_size() >= 1 ? scope.OuterOp(graph.FindValue(loop.input(0)), "Gather") : nullptr;
  const Node* ends_shape = trips ? scope.OuterOp(InputOf(*trips, 0), "Shape") : nullptr;
  if (!ends_shape || InputOf(*ends_shape, 0) != ends || graph.ScalarConstant(InputOf(*trips, 1)) != 0.0 ||
      loop.input_size() != 2) {
    return refuse("the Loop does not run once per bag");
  }
  bag.offsets = starts;
  return bag;
}

void ImportBagLoop(const BagLoop& bag, Node& node, Graph& graph) {
  node.op = "EmbeddingBag";
  node.attrs = {{"mode", AttributeValue(bag.mode)}};
  // Copied: adding values below may move graph.values.
  const Value ids = graph.values[static_cast<size_t>(bag.ids)];
  auto add = [&](const std::string& op, const std::string& what, std::vector<int> inputs, DType dtype, Shape shape,
                 std::map<std::string, AttributeValue> attrs = {}) {
    const std::string name = node.name + "/" + what;
    const int out = graph.AddValue(Value{name, dtype, std::move(shape), true});
    graph.nodes.push_back(Node{op, name, std::move(inputs), {out}, std::move(attrs)});
    return out;
  };
  auto scalar = [&](const std::string& what, int64_t v, DType dtype) {
    Tensor t = dtype == DType::kI32 ? Tensor::FromVector<int32_t>(DType::kI32, {}, {static_cast<int32_t>(v)})
                                    : Tensor::FromVector<int64_t>(DType::kI64, {}, {v});
    return graph.AddConstant(node.name + "/" + what, std::move(t));
  };
  node.inputs = {bag.table, bag.ids, bag.offsets};
  if (bag.weights >= 0) {  // one bag weighting each row as it reads it (FP32 weights)
    int weights = bag.weights;
    if (graph.values[static_cast<size_t>(weights)].dtype != DType::kF32) {
      weights = add("Cast", "weights", {weights}, DType::kF32, {-1},
                    {{"to", static_cast<int64_t>(onnx::TensorProto::FLOAT)}});
    }
    node.inputs.push_back(weights);
  }
  if (bag.padding) {  // the ids equal to padding_idx become empty slots (-1), which every bag skips
    // The exporter's bounds count the ids by Size, which no backend runs: the same bounds by Shape.
    const int made_by = graph.Producers()[static_cast<size_t>(bag.offsets)];
    const int offsets = graph.nodes[static_cast<size_t>(made_by)].inputs[0];  // Concat(offsets, count)
    const int count = add("Shape", "ids_count", {bag.ids}, DType::kI64, {1});
    node.inputs[2] = add("Concat", "bounds", {offsets, count}, DType::kI64, {-1}, {{"axis", int64_t{0}}});
    const DType read = graph.values[static_cast<size_t>(node.inputs[1])].dtype;
    const int padded =
        add("Equal", "padded", {bag.ids, scalar("padding_idx", *bag.padding, ids.dtype)}, DType::kBool, ids.shape);
    node.inputs[1] =
        add("Where", "ids_kept", {padded, scalar("empty_slot", -1, read), node.inputs[1]}, read, ids.shape);
  }
}

}  // namespace rankd

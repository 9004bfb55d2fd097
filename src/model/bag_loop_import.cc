#include "model/bag_loop_import.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "model/dynamo_bag_import.h"

namespace rankd {
namespace {

// The elements of an integer constant, or nullopt.
std::optional<std::vector<int64_t>> IntsOf(const Tensor* t) {
  if (!t || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->size(); ++i) v.push_back(t->ScalarAsInt(i));
  return v;
}

// The Loop's body, by the value each node writes, with its integer constants.
class Body {
 public:
  Body(const onnx::GraphProto& g, const TensorFromProto& tensor_of) {
    for (const onnx::NodeProto& n : g.node()) {
      for (const std::string& out : n.output()) producer_[out] = &n;
      if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).name() == "value" &&
          n.output_size() == 1) {
        StatusOr<Tensor> t = tensor_of(n.attribute(0).t());
        if (auto ints = t.ok() ? IntsOf(&*t) : std::nullopt) ints_[n.output(0)] = std::move(*ints);
      }
    }
  }

  // The node writing `value` if it is `op`, else nullptr.
  const onnx::NodeProto* Op(const std::string& value, const char* op) const {
    auto it = producer_.find(value);
    return it != producer_.end() && it->second->op_type() == op ? it->second : nullptr;
  }

  // The integers of a constant `value`, of the body or of the graph around it.
  std::optional<std::vector<int64_t>> Ints(const std::string& value, const Graph& outer) const {
    if (auto it = ints_.find(value); it != ints_.end()) return it->second;
    const int id = outer.FindValue(value);
    return IntsOf(id >= 0 ? outer.FindConstant(id) : nullptr);
  }

  // A node's integer-list attribute, or nullopt.
  static std::optional<std::vector<int64_t>> Attr(const onnx::NodeProto& n, const char* name) {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    }
    return std::nullopt;
  }

  static int64_t IntAttr(const onnx::NodeProto& n, const char* name, int64_t absent) {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return a.i();
    }
    return absent;
  }

 private:
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::map<std::string, std::vector<int64_t>> ints_;
};

// A node's k-th input, or "" / -1 where it has fewer (nodes are read here before any is checked).
const std::string& In(const onnx::NodeProto& n, int k) {
  static const std::string kNone;
  return k < n.input_size() ? n.input(k) : kNone;
}
int In(const Node& n, size_t k) { return k < n.inputs.size() ? n.inputs[k] : -1; }

const onnx::GraphProto* BodyOf(const onnx::NodeProto& loop) {
  for (const auto& a : loop.attribute()) {
    if (a.name() == "body" && a.type() == onnx::AttributeProto::GRAPH) return &a.g();
  }
  return nullptr;
}

// The graph before the Loop: the node producing a value, if it is `op`.
class Outer {
 public:
  explicit Outer(const Graph& g) : g_(g), producers_(g.Producers()) {}

  const Node* Op(int value, const char* op) const {
    if (value < 0) return nullptr;
    const int p = producers_[static_cast<size_t>(value)];
    return p >= 0 && g_.nodes[static_cast<size_t>(p)].op == op ? &g_.nodes[static_cast<size_t>(p)] : nullptr;
  }

 private:
  const Graph& g_;
  const std::vector<int> producers_;
};

}  // namespace

StatusOr<BagLoop> MatchBagLoop(const onnx::NodeProto& loop, const Graph& graph, const TensorFromProto& tensor_of) {
  RANKD_ASSIGN_OR_RETURN(std::optional<BagLoop> dynamo, MatchDynamoBagLoop(loop, graph, tensor_of));
  if (dynamo) return *dynamo;
  const std::string where = "node '" + loop.name() + "' (Loop): ";
  auto refuse = [&](const std::string& why) {
    return Unimplemented(where +
                         "a Loop is taken only as PyTorch's exported nn.EmbeddingBag (sum, mean or max "
                         "over offsets, a sum with per-sample weights); here " +
                         why);
  };
  const onnx::GraphProto* g = BodyOf(loop);
  if (!g || loop.output_size() != 1 || g->input_size() != 2 || g->output_size() != 2) {
    return refuse("the Loop is not one scan output over bags");
  }
  const Body body(*g, tensor_of);
  const Outer outer(graph);
  const std::string& index = g->input(0).name();
  // The scan output: Reduce{Sum,Mean}(Gather(table, Slice(ids, start, end)), axes [0], keepdims 0).
  const onnx::NodeProto* reduce = body.Op(g->output(1).name(), "ReduceSum");
  BagLoop bag;
  bag.mode = "sum";
  for (const auto& [op, mode] : {std::pair{"ReduceMean", "mean"}, std::pair{"ReduceMax", "max"}}) {
    if (reduce) break;
    reduce = body.Op(g->output(1).name(), op);
    bag.mode = mode;
  }
  if (!reduce) {
    for (const char* op : {"ReduceMin", "ReduceProd"}) {
      if (body.Op(g->output(1).name(), op)) return refuse(std::string("the bag's rows are reduced by ") + op);
    }
    return refuse("the scan output is not a ReduceSum, ReduceMean or ReduceMax");
  }
  std::optional<std::vector<int64_t>> axes =
      reduce->input_size() > 1 ? body.Ints(In(*reduce, 1), graph) : Body::Attr(*reduce, "axes");
  if (Body::IntAttr(*reduce, "keepdims", 1) != 0 || axes != std::vector<int64_t>{0}) {
    return refuse("the reduction is not over the bag's ids (axes [0], keepdims 0)");
  }
  // Per-sample weights: Mul(rows, Unsqueeze(Slice(weights, the ids' bounds), [1])), either order.
  std::string reduced = In(*reduce, 0);
  const onnx::NodeProto* weighted = body.Op(reduced, "Mul");
  const onnx::NodeProto* weight_slice = nullptr;
  if (weighted) {
    const int rows_side = body.Op(In(*weighted, 0), "Gather") ? 0 : 1;
    const onnx::NodeProto* u = body.Op(In(*weighted, 1 - rows_side), "Unsqueeze");
    std::optional<std::vector<int64_t>> u_axes = !u                    ? std::nullopt
                                                 : u->input_size() > 1 ? body.Ints(In(*u, 1), graph)
                                                                       : Body::Attr(*u, "axes");
    weight_slice = u ? body.Op(In(*u, 0), "Slice") : nullptr;
    if (!weight_slice || u_axes != std::vector<int64_t>{1}) {
      return refuse("the rows are multiplied by something other than per-sample weights (Unsqueeze(Slice(w), [1]))");
    }
    if (bag.mode != "sum") return refuse("per-sample weights are taken with a sum only (as PyTorch takes them)");
    reduced = In(*weighted, rows_side);
  }
  const onnx::NodeProto* rows = body.Op(reduced, "Gather");
  if (!rows || Body::IntAttr(*rows, "axis", 0) != 0) return refuse("the reduced rows are not a Gather from a table");
  bag.table = graph.FindValue(In(*rows, 0));
  const Tensor* table = bag.table >= 0 ? graph.FindConstant(bag.table) : nullptr;
  if (!table || table->rank() != 2) return refuse("the rows are not gathered from a constant table [rows, dim]");
  const onnx::NodeProto* slice = body.Op(In(*rows, 1), "Slice");
  if (!slice || slice->input_size() < 3 ||
      (slice->input_size() > 3 && body.Ints(In(*slice, 3), graph) != std::vector<int64_t>{0}) ||
      (slice->input_size() > 4 && body.Ints(In(*slice, 4), graph) != std::vector<int64_t>{1})) {
    return refuse("the ids are not one Slice of the ids");
  }
  bag.ids = graph.FindValue(In(*slice, 0));
  if (weight_slice) {  // the weights sliced as the ids are
    bag.weights = graph.FindValue(In(*weight_slice, 0));
    for (int k = 1; k < std::max(slice->input_size(), weight_slice->input_size()); ++k) {
      if (In(*weight_slice, k) != In(*slice, k)) return refuse("the weights are not sliced as the ids are");
    }
    if (bag.weights < 0) return refuse("the weights are not a value of the graph");
  }
  // Bounds: Unsqueeze(Gather(starts, i)) and Unsqueeze(Gather(ends, i)), ends = starts[1:].
  auto bound = [&](const std::string& value) -> int {
    const onnx::NodeProto* u = body.Op(value, "Unsqueeze");
    const onnx::NodeProto* at = u ? body.Op(In(*u, 0), "Gather") : nullptr;
    if (!at || In(*at, 1) != index || Body::IntAttr(*at, "axis", 0) != 0) return -1;
    std::optional<std::vector<int64_t>> u_axes =
        u->input_size() > 1 ? body.Ints(In(*u, 1), graph) : Body::Attr(*u, "axes");
    return u_axes == std::vector<int64_t>{0} ? graph.FindValue(In(*at, 0)) : -1;
  };
  const int starts = bound(In(*slice, 1)), ends = bound(In(*slice, 2));
  if (bag.ids < 0 || starts < 0 || ends < 0) return refuse("a bag's bounds are not read from the offsets");
  // starts = Concat(offsets, [number of ids]); ends = Slice(starts, [1], [past the end]).
  const Node* tail = outer.Op(ends, "Slice");
  const auto ints = [&](const Node* n, size_t input) {
    return IntsOf(n ? graph.FindConstant(In(*n, input)) : nullptr);
  };
  const auto big = ints(tail, 2);
  if (!tail || In(*tail, 0) != starts || ints(tail, 1) != std::vector<int64_t>{1} || !big || big->size() != 1 ||
      (*big)[0] < std::numeric_limits<int32_t>::max() ||
      (tail->inputs.size() > 3 && ints(tail, 3) != std::vector<int64_t>{0}) ||
      (tail->inputs.size() > 4 && ints(tail, 4) != std::vector<int64_t>{1})) {
    return refuse("the bags' ends are not the offsets after the first");
  }
  const Node* concat = outer.Op(starts, "Concat");
  const Node* count = concat && concat->inputs.size() == 2 ? outer.Op(In(*concat, 1), "Unsqueeze") : nullptr;
  const Node* first = count ? outer.Op(In(*count, 0), "Gather") : nullptr;
  const Node* shape = first ? outer.Op(In(*first, 0), "Shape") : nullptr;
  if (!shape || In(*shape, 0) != bag.ids || graph.ScalarConstant(In(*first, 1)) != 0.0) {
    return refuse("the bags' starts are not the offsets followed by the number of ids");
  }
  // As many iterations as bags: the trip count is the number of ends.
  const Node* trips = loop.input_size() >= 1 ? outer.Op(graph.FindValue(loop.input(0)), "Gather") : nullptr;
  const Node* ends_shape = trips ? outer.Op(In(*trips, 0), "Shape") : nullptr;
  if (!ends_shape || In(*ends_shape, 0) != ends || graph.ScalarConstant(In(*trips, 1)) != 0.0 ||
      loop.input_size() != 2) {
    return refuse("the Loop does not run once per bag");
  }
  bag.offsets = starts;
  return bag;
}

void ImportBagLoop(const BagLoop& bag, Node& node, Graph& graph) {
  node.op = "EmbeddingBag";
  node.attrs = {{"mode", AttributeValue(bag.mode)}};
  if (bag.weights < 0) {
    node.inputs = {bag.table, bag.ids, bag.offsets};
    return;
  }
  const Value& table = graph.values[static_cast<size_t>(bag.table)];
  const int64_t width = table.rank_known && table.shape.size() == 2 ? table.shape[1] : -1;
  auto add = [&](const std::string& op, const std::string& what, std::vector<int> inputs, DType dtype, Shape shape,
                 std::map<std::string, AttributeValue> attrs = {}) {
    const std::string name = node.name + "/" + what;
    const int out = graph.AddValue(Value{name, dtype, std::move(shape), true});
    graph.nodes.push_back(Node{op, name, std::move(inputs), {out}, std::move(attrs)});
    return out;
  };
  auto scalar = [&](const std::string& what, int64_t v) {
    return graph.AddConstant(node.name + "/" + what, Tensor::FromVector<int64_t>(DType::kI64, {}, {v}));
  };
  const int rows = add("Gather", "rows", {bag.table, bag.ids}, table.dtype, {-1, width}, {{"axis", int64_t{0}}});
  const int axis = graph.AddConstant(node.name + "/axis_1", Tensor::FromVector<int64_t>(DType::kI64, {1}, {1}));
  const DType w_dtype = graph.values[static_cast<size_t>(bag.weights)].dtype;
  const int column = add("Unsqueeze", "weights", {bag.weights, axis}, w_dtype, {-1, 1});
  const int weighted = add("Mul", "weighted_rows", {rows, column}, table.dtype, {-1, width});
  const int shape = add("Shape", "ids_shape", {bag.ids}, DType::kI64, {1});
  const int count = add("Gather", "ids_count", {shape, scalar("zero", 0)}, DType::kI64, {}, {{"axis", int64_t{0}}});
  const int each = add("Range", "each_row", {scalar("first", 0), count, scalar("step", 1)}, DType::kI64, {-1});
  node.inputs = {weighted, each, bag.offsets};
}

}  // namespace rankd

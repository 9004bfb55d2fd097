#include "model/dynamo_bag_import.h"

#include <map>
#include <string>
#include <vector>

#include "model/loop_body.h"

namespace rankd {
namespace {

// Whether `value` is Reduce`op`(Slice(rows, start, end), axes [0]) with keepdims 1.
bool Reduces(const LoopScope& s, const std::string& value, const char* op, const std::string& rows,
             const std::string& start, const std::string& end) {
  const onnx::NodeProto* r = s.Op(value, op);
  if (!r) return false;
  for (const auto& a : r->attribute()) {
    if (a.name() == "keepdims" && a.i() != 1) return false;
  }
  const onnx::NodeProto* slice = s.Op(InputOf(*r, 0), "Slice");
  return slice && s.Constant(InputOf(*r, 1)) == std::vector<double>{0} && InputOf(*slice, 0) == rows &&
         InputOf(*slice, 1) == start && InputOf(*slice, 2) == end && slice->input_size() == 3;
}

}  // namespace

StatusOr<std::optional<BagLoop>> MatchDynamoBagLoop(const onnx::NodeProto& loop, const Graph& graph,
                                                    const TensorFromProto& tensor_of) {
  const onnx::GraphProto* g = SubgraphOf(loop, "body");
  if (!g || g->input_size() != 4 || g->output_size() != 3 || loop.input_size() != 4 || loop.output_size() != 2) {
    return std::optional<BagLoop>();
  }
  auto refuse = [&](const std::string& why) {
    return Unimplemented("node '" + loop.name() +
                         "' (Loop): a Loop carrying a sequence is taken only as PyTorch's nn.EmbeddingBag as the "
                         "dynamo exporter writes it (sum, mean or max over offsets, a sum with per-sample weights); "
                         "here " +
                         why);
  };
  const LoopScope s(*g, graph, tensor_of);
  // The carried values: the sequence with one more row, the index plus one, and i < Size(offsets)
  // (over offsets the exporter carries the sequence first, over padded ids with weights the index).
  const std::optional<LoopScope::CarriedRows> carried = s.CarriesRows(*g);
  if (!carried) return refuse("the body does not add one row a bag to the sequence");
  const std::string& index = carried->index;
  const onnx::NodeProto* insert = carried->insert;
  // Size(offsets) bags, or Size(offsets) - 1 with include_last_offset (the offsets end with the
  // last bag's end).
  const Node* bags = s.OuterOp(carried->count, "Size");
  const Node* minus = bags ? nullptr : s.OuterOp(carried->count, "Sub");
  const bool last_included = minus && graph.ScalarConstant(minus->Input(1)) == 1.0;
  if (last_included) bags = s.OuterOp(minus->Input(0), "Size");
  if (!bags || bags->Input(0) < 0 ||
      !s.StartsEmptyAtZero(loop, carried->count, carried->index_at, carried->sequence_at)) {
    return refuse("it does not run once per offset from an empty sequence and bag 0");
  }
  // Bag i's bounds: Slice(bounds, [i], [i + 1]) and Slice(bounds, [i + 1], [i + 2]).
  const onnx::NodeProto* row = s.Op(InputOf(*insert, 1), "If");
  const onnx::NodeProto* empty = row ? s.Op(InputOf(*row, 0), "Equal") : nullptr;
  const onnx::NodeProto* start = empty ? s.Op(InputOf(*empty, 0), "Slice") : nullptr;
  const onnx::NodeProto* end = empty ? s.Op(InputOf(*empty, 1), "Slice") : nullptr;
  const onnx::NodeProto* at = start ? s.Op(InputOf(*start, 1), "Reshape") : nullptr;
  if (!at || !end || InputOf(*at, 0) != index || InputOf(*end, 0) != InputOf(*start, 0) ||
      !s.Plus(InputOf(*start, 2), InputOf(*start, 1), 1) || !s.Plus(InputOf(*end, 1), InputOf(*start, 1), 1) ||
      !s.Plus(InputOf(*end, 2), InputOf(*start, 1), 2) || start->input_size() != 3 || end->input_size() != 3) {
    return refuse("a bag's bounds are not two Slices of the offsets at the bag's index");
  }
  // bounds = Concat(offsets, Shape(ids_1d)), or the offsets themselves with include_last_offset;
  // rows = Mul(Gather(table, ids_1d), Unsqueeze(weights, [1])).
  BagLoop bag;
  bag.offsets = graph.FindValue(InputOf(*start, 0));
  bag.stacked = true;
  bag.stacked_output = carried->sequence_at - 2;  // the Loop's outputs are its carried values, in order
  const Node* bounds = s.OuterOp(InputOf(*start, 0), "Concat");
  const Node* count = bounds && bounds->inputs.size() == 2 ? s.OuterOp(bounds->inputs[1], "Shape") : nullptr;
  if (last_included ? bag.offsets != bags->inputs[0]
                    : !count || bounds->inputs[0] != bags->inputs[0] || bounds->GetInt("axis", 0) != 0) {
    return refuse("the bags' bounds are not the offsets followed by the number of ids");
  }
  // The bag's row: zeros where it has no ids, else its rows reduced.
  if (!s.Zeros(s.BranchOutput(*row, "then_branch"))) return refuse("a bag of no ids is not a row of zeros");
  const std::string reduced = s.BranchOutput(*row, "else_branch");
  const std::string &lo = start->output(0), &hi = end->output(0), &bags_value = carried->count;
  // The last bag's own form (a mean's divisor, a max's slice end): If(i == Size(offsets) - 1).
  auto last_bag = [&](const onnx::NodeProto* branch) {
    const onnx::NodeProto* is_last = branch ? s.Op(InputOf(*branch, 0), "Equal") : nullptr;
    const onnx::NodeProto* minus = is_last ? s.Op(InputOf(*is_last, 1), "Sub") : nullptr;
    return minus && InputOf(*is_last, 0) == index && InputOf(*minus, 0) == bags_value && s.Is(InputOf(*minus, 1), 1);
  };
  std::string rows;
  if (const onnx::NodeProto* sum = s.Op(reduced, "ReduceSum")) {
    const onnx::NodeProto* slice = s.Op(InputOf(*sum, 0), "Slice");
    rows = slice ? InputOf(*slice, 0) : std::string();
    bag.mode = "sum";
    if (!Reduces(s, reduced, "ReduceSum", rows, lo, hi)) rows.clear();
  } else if (const onnx::NodeProto* max = s.Op(reduced, "ReduceMax")) {
    // ReduceMax(If(last, Slice(rows, start, id count), Slice(rows, start, end))).
    const onnx::NodeProto* pick = s.Op(InputOf(*max, 0), "If");
    const onnx::NodeProto* to_count = pick ? s.Op(s.BranchOutput(*pick, "then_branch"), "Slice") : nullptr;
    const onnx::NodeProto* to_end = pick ? s.Op(s.BranchOutput(*pick, "else_branch"), "Slice") : nullptr;
    bag.mode = "max";
    if (last_bag(pick) && to_count && to_end && InputOf(*to_count, 0) == InputOf(*to_end, 0) &&
        InputOf(*to_count, 1) == lo && InputOf(*to_end, 1) == lo && InputOf(*to_end, 2) == hi && count &&
        graph.FindValue(InputOf(*to_count, 2)) == bounds->inputs[1] &&
        s.Constant(InputOf(*max, 1)) == std::vector<double>{0}) {
      rows = InputOf(*to_end, 0);
    }
  } else if (const onnx::NodeProto* mean = s.Op(reduced, "If")) {
    // If(last, ReduceSum(slice) / (ids after the bag's start) where there are any, ReduceMean(slice)).
    const onnx::NodeProto* other = s.Op(s.BranchOutput(*mean, "else_branch"), "ReduceMean");
    const onnx::NodeProto* slice = other ? s.Op(InputOf(*other, 0), "Slice") : nullptr;
    const onnx::NodeProto* any = s.Op(s.BranchOutput(*mean, "then_branch"), "If");
    const onnx::NodeProto* positive = any ? s.Op(InputOf(*any, 0), "Greater") : nullptr;
    const onnx::NodeProto* after = positive ? s.Op(InputOf(*positive, 0), "Sub") : nullptr;
    const onnx::NodeProto* ids_shape = after ? s.Op(InputOf(*after, 0), "Shape") : nullptr;
    const onnx::NodeProto* divided = any ? s.Op(s.BranchOutput(*any, "then_branch"), "Div") : nullptr;
    const onnx::NodeProto* divisor = divided ? s.Op(InputOf(*divided, 1), "Cast") : nullptr;
    const Node* flat = s.OuterOp(count ? count->inputs[0] : -1, "Reshape");
    bag.mode = "mean";
    rows = slice ? InputOf(*slice, 0) : std::string();
    const bool last_is_mean = last_bag(mean) && after && InputOf(*after, 1) == lo && ids_shape && flat &&
                              graph.FindValue(InputOf(*ids_shape, 0)) == flat->inputs[0] && divisor &&
                              InputOf(*divisor, 0) == after->output(0) &&
                              Reduces(s, InputOf(*divided, 0), "ReduceSum", rows, lo, hi);
    if (!last_is_mean || !other || !Reduces(s, other->output(0), "ReduceMean", rows, lo, hi)) {
      rows.clear();
    }
  }
  if (rows.empty()) return refuse("a bag's rows are not reduced by a sum, mean or max over its slice");
  // With include_last_offset the exporter's last mean divides, and its last max reads, to the id
  // count rather than the last offset: taken with a sum only.
  if (last_included && bag.mode != "sum") return refuse("include_last_offset is taken with a sum only");
  // rows = Mul(Gather(table, ids), Unsqueeze(weights, [1])), weights Expand(1, Shape(ids)) or an input.
  const Node* mul = s.OuterOp(rows, "Mul");
  const Node* gather = nullptr;
  const Node* column = nullptr;
  for (int k = 0; mul && k < 2 && !gather; ++k) {
    gather = s.OuterOp(mul->Input(k), "Gather");
    column = s.OuterOp(mul->Input(1 - k), "Unsqueeze");
  }
  bag.ids = gather ? gather->Input(1) : -1;
  if (!gather || !column || (count && count->inputs[0] != bag.ids) || gather->GetInt("axis", 0) != 0 ||
      graph.ScalarConstant(column->Input(1)) != 1.0) {
    return refuse("the rows are not a Gather by the ids times per-sample weights");
  }
  bag.table = gather->Input(0);
  const Tensor* table = graph.FindConstant(bag.table);
  if (!table || table->rank() != 2) return refuse("the rows are not gathered from a constant table [rows, dim]");
  const Node* ones = s.OuterOp(column->Input(0), "Expand");
  if (!ones || graph.ScalarConstant(ones->Input(0)) != 1.0) {
    if (bag.mode != "sum") return refuse("per-sample weights are taken with a sum only (as PyTorch takes them)");
    bag.weights = column->Input(0);
  }
  // The ids flattened: Reshape(ids, [-1]) of 1-D ids is the ids, which a ragged input's values then
  // feed directly (compile/ragged_inputs.cc).
  if (const Node* flat = s.OuterOp(bag.ids, "Reshape"); flat && flat->inputs.size() == 2) {
    const Tensor* shape = graph.FindConstant(flat->inputs[1]);
    const Value& ids = graph.values[static_cast<size_t>(flat->inputs[0])];
    if (shape && shape->size() == 1 && shape->ScalarAsInt(0) == -1 && ids.rank_known && ids.shape.size() == 1) {
      bag.ids = flat->inputs[0];
    }
  }
  return std::optional<BagLoop>(bag);
}

}  // namespace rankd

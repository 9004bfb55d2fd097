#include "model/dynamo_padding_bag_import.h"

#include <string>
#include <vector>

#include "model/loop_body.h"

namespace rankd {

StatusOr<std::optional<BagLoop>> MatchDynamoPaddingBagLoop(const onnx::NodeProto& loop, const Graph& graph,
                                                           const TensorFromProto& tensor_of) {
  const onnx::GraphProto* g = SubgraphOf(loop, "body");
  if (!g || g->input_size() != 4 || g->output_size() != 3 || loop.input_size() != 4 || loop.output_size() != 2) {
    return std::optional<BagLoop>();
  }
  const onnx::NodeProto* inner = nullptr;
  for (const onnx::NodeProto& n : g->node()) {
    if (n.op_type() == "Loop") inner = &n;
  }
  if (!inner) return std::optional<BagLoop>();
  auto refuse = [&](const std::string& why) {
    return Unimplemented("node '" + loop.name() +
                         "' (Loop): a Loop over bags with a Loop over each bag's ids inside is taken only as "
                         "PyTorch's nn.EmbeddingBag with padding_idx as the dynamo exporter writes it (sum, mean or "
                         "max over offsets); here " +
                         why);
  };
  const LoopScope s(*g, graph, tensor_of);  // the inner Loop's body and the branches included
  // The carried values: i + 1, the sequence with one more row, and i + 1 < Size(offsets).
  const std::optional<LoopScope::CarriedRows> carried = s.CarriesRows(*g);
  if (!carried) return refuse("the body does not add one row a bag to the sequence");
  const std::string& index = carried->index;
  const onnx::NodeProto* insert = carried->insert;
  const Node* bags = s.OuterOp(carried->count, "Size");
  if (!bags || bags->Input(0) < 0 ||
      !s.StartsEmptyAtZero(loop, carried->count, carried->index_at, carried->sequence_at)) {
    return refuse("it does not run once per offset from bag 0 and an empty sequence");
  }
  // Bag i's positions: the inner Loop from Gather(bounds, i) while it is less than Gather(bounds, i + 1).
  const onnx::NodeProto* start = s.Op(InputOf(*inner, 3), "Gather");
  const onnx::NodeProto* runs = s.Op(InputOf(*inner, 1), "Less");
  const onnx::NodeProto* end = runs ? s.Op(InputOf(*runs, 1), "Gather") : nullptr;
  const std::optional<std::vector<int64_t>> none = s.Ints(InputOf(*inner, 2));
  if (!start || !end || InputOf(*start, 1) != index || InputOf(*runs, 0) != start->output(0) ||
      InputOf(*end, 0) != InputOf(*start, 0) || !s.Plus(InputOf(*end, 1), index, 1) || !InputOf(*inner, 0).empty() ||
      !none || !none->empty() || inner->input_size() != 4 || inner->output_size() != 2) {
    return refuse("a bag's ids are not read from Gather(bounds, i) to Gather(bounds, i + 1) into no positions");
  }
  // The inner body: positions += [j] where the id at j is not padding_idx; j + 1; j + 1 < end.
  const onnx::GraphProto* ib = SubgraphOf(*inner, "body");
  if (!ib || ib->input_size() != 4 || ib->output_size() != 3) return refuse("the Loop over a bag's ids differs");
  const std::string &positions = ib->input(2).name(), &j = ib->input(3).name();
  const onnx::NodeProto* next = s.Op(ib->output(0).name(), "Less");
  const onnx::NodeProto* keep = s.Op(ib->output(1).name(), "If");
  const onnx::NodeProto* kept = keep ? s.Op(s.BranchOutput(*keep, "then_branch"), "Concat") : nullptr;
  const onnx::NodeProto* dropped = keep ? s.Op(s.BranchOutput(*keep, "else_branch"), "Identity") : nullptr;
  const onnx::NodeProto* at = kept && kept->input_size() == 2 ? s.Op(InputOf(*kept, 1), "Reshape") : nullptr;
  if (!next || !s.Plus(ib->output(2).name(), j, 1) || InputOf(*next, 0) != ib->output(2).name() ||
      InputOf(*next, 1) != end->output(0) || !kept || !dropped || InputOf(*kept, 0) != positions ||
      IntAttr(*kept, "axis", 0) != 0 || InputOf(*dropped, 0) != positions || !at || InputOf(*at, 0) != j ||
      s.Ints(InputOf(*at, 1)) != std::vector<int64_t>{-1}) {
    return refuse("the Loop over a bag's ids does not collect the positions it keeps");
  }
  // Kept where Not(Equal(id, padding_idx)); the id Gather(ids, j), negative ones plus the table's rows.
  const onnx::NodeProto* unequal = s.Op(InputOf(*keep, 0), "Not");
  const onnx::NodeProto* equal = unequal ? s.Op(InputOf(*unequal, 0), "Equal") : nullptr;
  const std::optional<std::vector<int64_t>> padding = equal ? s.Ints(InputOf(*equal, 1)) : std::nullopt;
  if (!equal || !padding || padding->size() != 1) return refuse("the ids kept are not those unequal to padding_idx");
  std::string id = InputOf(*equal, 0);
  const onnx::NodeProto* wrap = s.Op(id, "If");
  const onnx::NodeProto* negative = wrap ? s.Op(InputOf(*wrap, 0), "Less") : nullptr;
  const onnx::NodeProto* wrapped = wrap ? s.Op(s.BranchOutput(*wrap, "then_branch"), "Add") : nullptr;
  const onnx::NodeProto* as_is = wrap ? s.Op(s.BranchOutput(*wrap, "else_branch"), "Identity") : nullptr;
  std::optional<std::vector<int64_t>> table_rows;
  if (wrap) {
    if (!negative || !wrapped || !as_is || !s.Is(InputOf(*negative, 1), 0) ||
        InputOf(*wrapped, 0) != InputOf(*negative, 0) || InputOf(*as_is, 0) != InputOf(*negative, 0)) {
      return refuse("a negative id is not counted from the table's end");
    }
    table_rows = s.Ints(InputOf(*wrapped, 1));
    id = InputOf(*negative, 0);
  }
  const onnx::NodeProto* read = s.Op(id, "Gather");
  if (!read || InputOf(*read, 1) != j || IntAttr(*read, "axis", 0) != 0) {
    return refuse("the id tested is not Gather(ids, j)");
  }
  // The bag's row: zeros where it keeps no position, else Reduce(Gather(rows, positions), [0]).
  const onnx::NodeProto* row = s.Op(InputOf(*insert, 1), "If");
  const onnx::NodeProto* empty = row ? s.Op(InputOf(*row, 0), "Equal") : nullptr;
  const onnx::NodeProto* count = empty ? s.Op(InputOf(*empty, 0), "Size") : nullptr;
  if (!count || InputOf(*count, 0) != inner->output(0) || !s.Is(InputOf(*empty, 1), 0) ||
      !s.Zeros(s.BranchOutput(*row, "then_branch"))) {
    return refuse("a bag that keeps no id is not a row of zeros");
  }
  BagLoop bag;
  bag.stacked = true;
  bag.stacked_output = carried->sequence_at - 2;
  bag.padding = (*padding)[0];
  const onnx::NodeProto* reduced = nullptr;
  for (const auto& [op, mode] :
       {std::pair{"ReduceSum", "sum"}, std::pair{"ReduceMean", "mean"}, std::pair{"ReduceMax", "max"}}) {
    if (!reduced) reduced = s.Op(s.BranchOutput(*row, "else_branch"), op);
    if (reduced && bag.mode.empty()) bag.mode = mode;
  }
  const onnx::NodeProto* picked = reduced ? s.Op(InputOf(*reduced, 0), "Gather") : nullptr;
  if (!picked || InputOf(*picked, 1) != inner->output(0) || IntAttr(*reduced, "keepdims", 1) != 1 ||
      s.Constant(InputOf(*reduced, 1)) != std::vector<double>{0} || IntAttr(*picked, "axis", 0) != 0) {
    return refuse("a bag's rows are not reduced by a sum, mean or max over the positions it keeps");
  }
  // bounds = Concat(offsets, Reshape(Size(ids), [-1])); rows = Mul(Gather(table, ids), weights).
  const Node* bounds = s.OuterOp(InputOf(*start, 0), "Concat");
  const Node* shaped = bounds && bounds->inputs.size() == 2 ? s.OuterOp(bounds->inputs[1], "Reshape") : nullptr;
  const Node* ids_count = shaped ? s.OuterOp(shaped->Input(0), "Size") : nullptr;
  if (!ids_count || ids_count->Input(0) < 0 || bounds->inputs[0] != bags->inputs[0] || bounds->GetInt("axis", 0) != 0 ||
      graph.values[static_cast<size_t>(ids_count->Input(0))].name != InputOf(*read, 0)) {
    return refuse("the bags' bounds are not the offsets followed by the number of ids");
  }
  bag.offsets = graph.FindValue(InputOf(*start, 0));
  bag.ids = ids_count->Input(0);
  const Node* mul = s.OuterOp(InputOf(*picked, 0), "Mul");
  const Node* gather = nullptr;
  const Node* column = nullptr;
  for (int k = 0; mul && k < 2 && !gather; ++k) {
    gather = s.OuterOp(mul->Input(k), "Gather");
    column = s.OuterOp(mul->Input(1 - k), "Unsqueeze");
  }
  if (!gather || !column || gather->Input(1) != bag.ids || gather->GetInt("axis", 0) != 0 ||
      graph.ScalarConstant(column->Input(1)) != 1.0) {
    return refuse("the rows are not a Gather by the ids times per-sample weights");
  }
  bag.table = gather->Input(0);
  const Tensor* table = graph.FindConstant(bag.table);
  if (!table || table->rank() != 2) return refuse("the rows are not gathered from a constant table [rows, dim]");
  if (table_rows && *table_rows != std::vector<int64_t>{table->dim(0)}) {
    return refuse("a negative id is counted from the end of a table of another size");
  }
  const Node* ones = s.OuterOp(column->Input(0), "Expand");
  if (!ones || graph.ScalarConstant(ones->Input(0)) != 1.0) {
    if (bag.mode != "sum") return refuse("per-sample weights are taken with a sum only (as PyTorch takes them)");
    bag.weights = column->Input(0);
  }
  return std::optional<BagLoop>(bag);
}

}  // namespace rankd

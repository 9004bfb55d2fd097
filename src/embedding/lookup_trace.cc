#include "embedding/lookup_trace.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "embedding/cache_policy.h"

namespace rankd {
namespace {

// How a lookup reads its ids: a bag skips negative ids (empty slots); a row Gather (and a bag part
// that reads one column as a Gather: ConcatEmbeddingBags' `columns`) counts them from the table's
// end, after clipping to its floor.
struct IdRule {
  int64_t column = -1;  // >= 0: only this column of [rows, length] ids
  bool gather = false;
  int64_t floor = std::numeric_limits<int64_t>::min();
};

void AppendIds(const Tensor& ids, int table, int64_t table_rows, const IdRule& rule, std::vector<uint64_t>& trace) {
  const int64_t n = ids.size();
  const int64_t step = rule.column >= 0 && ids.rank() == 2 ? ids.dim(1) : 1;
  for (int64_t i = rule.column >= 0 && ids.rank() == 2 ? rule.column : 0; i < n; i += step) {
    int64_t id = ids.dtype() == DType::kI32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
    if (rule.gather) {
      id = std::max(id, rule.floor);
      if (id < 0) id += table_rows;
    }
    if (id >= 0 && id < table_rows) trace.push_back(RowKey(table, id));
  }
}

}  // namespace

void AppendLookups(const Graph& graph, const std::vector<TableInfo>& tables, std::span<const Tensor> graph_inputs,
                   std::vector<uint64_t>& trace) {
  std::unordered_map<int, int> table_of;  // table value id -> index in `tables`
  for (size_t t = 0; t < tables.size(); ++t) table_of[tables[t].value] = static_cast<int>(t);
  std::unordered_map<int, size_t> input_of;  // graph input value id -> index in graph_inputs
  for (size_t i = 0; i < graph.inputs.size() && i < graph_inputs.size(); ++i) input_of[graph.inputs[i]] = i;
  // A lookup: its table's value and its ids' value (the ids, or a ragged input's values).
  auto lookup = [&](int table, int ids, const IdRule& rule) {
    auto t = table_of.find(table);
    auto in = input_of.find(ids);
    if (t == table_of.end() || in == input_of.end()) return;
    const Tensor& tensor = graph_inputs[in->second];
    if (tensor.dtype() != DType::kI64 && tensor.dtype() != DType::kI32) return;
    AppendIds(tensor, t->second, tables[static_cast<size_t>(t->second)].shape[0], rule, trace);
  };
  for (const Node& n : graph.nodes) {
    if (n.op == "EmbeddingBag") lookup(n.inputs[0], n.inputs[1], {});
    if (n.op == "Gather" && n.GetInt("axis", 0) == 0) lookup(n.inputs[0], n.inputs[1], {-1, true});
    if (n.op != "ConcatEmbeddingBags") continue;
    const std::vector<int64_t> parts = n.GetInts("parts"), columns = n.GetInts("columns"), floors = n.GetInts("floors");
    size_t first = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      const int64_t column = p < columns.size() ? columns[p] : -1;
      IdRule rule{column, column >= 0, column >= 0 && p < floors.size() ? floors[p] : IdRule{}.floor};
      if (parts[p] > 1) lookup(n.inputs[first], n.inputs[first + 1], rule);
      first += static_cast<size_t>(parts[p]);
    }
  }
}

}  // namespace rankd

#include "embedding/lookup_trace.h"

#include <algorithm>
#include <unordered_map>

#include "embedding/cache_policy.h"
#include "embedding/lookups.h"
#include "model/key_index.h"

namespace rankd {
namespace {

// With `keyed`, the KeyedRows node the lookup reads its ids through: each id a key, mapped to its
// row (or the default row) as the node maps it.
void AppendIds(const Tensor& ids, int table, int64_t table_rows, const Lookup& rule, const Graph& graph,
               const Node* keyed, std::vector<uint64_t>& trace) {
  const int64_t n = ids.size();
  const int64_t step = rule.column >= 0 && ids.rank() == 2 ? ids.dim(1) : 1;
  const Tensor* keys = keyed ? graph.FindConstant(keyed->inputs[1]) : nullptr;
  const Tensor* key_rows = keyed ? graph.FindConstant(keyed->inputs[2]) : nullptr;
  if (keyed && (!keys || !key_rows)) return;
  for (int64_t i = rule.column >= 0 && ids.rank() == 2 ? rule.column : 0; i < n; i += step) {
    int64_t id = ids.dtype() == DType::kI32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
    if (keyed && !(keyed->GetInt("bag", 0) != 0 && id < 0)) {
      id = RowOfKey(keys->data<int64_t>(), key_rows->data<int32_t>(), static_cast<uint64_t>(keys->size()) - 1, id);
      if (id < 0) id = keyed->GetInt("default_row", 0);
    }
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
  const std::vector<int> producer = graph.Producers();
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      auto t = table_of.find(n.inputs[l.table_input]);
      int ids_value = n.inputs[l.ids_input];
      const Node* keyed = nullptr;  // a keyed table's lookup reads the keys' rows
      if (const int p = producer[static_cast<size_t>(ids_value)]; p >= 0) {
        const Node& from = graph.nodes[static_cast<size_t>(p)];
        if (from.op == "KeyedRows") keyed = &from, ids_value = from.inputs[0];
      }
      auto in = input_of.find(ids_value);
      if (t == table_of.end() || in == input_of.end()) continue;
      const Tensor& ids = graph_inputs[in->second];
      if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32) continue;
      AppendIds(ids, t->second, tables[static_cast<size_t>(t->second)].shape[0], l, graph, keyed, trace);
    }
  }
}

}  // namespace rankd

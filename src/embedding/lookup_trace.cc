#include "embedding/lookup_trace.h"

#include <algorithm>
#include <unordered_map>

#include "embedding/cache_policy.h"
#include "embedding/lookups.h"
#include "model/key_index.h"
#include "model/ops/keyed_rows.h"

namespace rankd {
namespace {

// With `keyed`, the index of the keyed table the lookup reads through KeyedRows (part `part` of
// it): each id a key, traced as the row it reads.
void AppendIds(const Tensor& ids, int table, int64_t table_rows, const Lookup& rule, const Tensor* keyed,
               const keyed_rows::Part& part, std::vector<uint64_t>& trace) {
  const int64_t n = ids.size();
  const int64_t step = rule.column >= 0 && ids.rank() == 2 ? ids.dim(1) : 1;
  for (int64_t i = rule.column >= 0 && ids.rank() == 2 ? rule.column : 0; i < n; i += step) {
    int64_t id = ids.dtype() == DType::kI32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
    if (keyed && !(part.bag && id < 0)) {
      id = RowOfKey(keyed->data<int64_t>(), static_cast<uint64_t>(keyed->dim(0)) - 1, id);
      if (id < 0) id = part.default_row;
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
      const Tensor* keyed = nullptr;  // a keyed table's lookup reads the keys' rows
      keyed_rows::Part part;
      if (const int p = producer[static_cast<size_t>(ids_value)]; p >= 0) {
        const Node& from = graph.nodes[static_cast<size_t>(p)];
        const auto o =
            static_cast<size_t>(std::find(from.outputs.begin(), from.outputs.end(), ids_value) - from.outputs.begin());
        std::vector<keyed_rows::Part> parts;
        if (from.op == "KeyedRows") parts = keyed_rows::Parts(from);
        if (o < parts.size()) {
          keyed = graph.FindConstant(from.inputs[2 * o + 1]);
          part = parts[o];
          ids_value = from.inputs[2 * o];
          if (!keyed) continue;
        }
      }
      auto in = input_of.find(ids_value);
      if (t == table_of.end() || in == input_of.end()) continue;
      const Tensor& ids = graph_inputs[in->second];
      if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32) continue;
      AppendIds(ids, t->second, tables[static_cast<size_t>(t->second)].shape[0], l, keyed, part, trace);
    }
  }
}

}  // namespace rankd

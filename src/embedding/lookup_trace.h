// The rows a request looks up, in the order its lookups read them: the trace a cache of the
// model's tables would see, for sizing it from a file of real requests (rankd inspect --requests).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "embedding/table_budget.h"
#include "model/graph.h"
#include "rankd/tensor.h"

namespace rankd {

// Appends to `trace` RowKey(t, row) for every id a lookup of `graph` reads from tables[t], where
// the ids come straight from a graph input (`graph_inputs`, in graph order), or are a keyed
// table's keys (KeyedRows over a graph input: each key traced as the row it reads); negative ids
// (empty slots) read nothing. Lookups whose ids are otherwise computed inside the graph are not
// traced.
void AppendLookups(const Graph& graph, const std::vector<TableInfo>& tables, std::span<const Tensor> graph_inputs,
                   std::vector<uint64_t>& trace);

}  // namespace rankd

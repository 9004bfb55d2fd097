// The rows a request looks up, in the order its lookups read them: the trace a cache of the
// model's tables would see, for sizing it from a file of real requests (rankd inspect --requests).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "embedding/table_budget.h"
#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// Ids a lookup of a table reads that the graph computes (e.g. Mod(ids, rows), Cast, Clip, a cross
// of two features, Mod(Add(Mul(a, k), b), rows), or a row Gather of a constant table of integer
// ids, a vocabulary's map) from graph inputs and constants: `nodes`, in
// graph order, compute `value` from `inputs`. Sampled inputs keep the same rows of each input (a
// user input's one row broadcasts), so the ids are computed row by row as the graph computes them.
struct ComputedIds {
  int value = -1;
  std::vector<size_t> inputs;  // indices in graph.inputs, ascending
  std::vector<size_t> nodes;
};

// Graph inputs a computed id may be made from, at most.
constexpr size_t kMaxComputedIdInputs = 4;

// The computed ids of the lookups of `tables` (by value id) that AppendLookups can trace once they
// are computed: each from at most kMaxComputedIdInputs graph inputs, in at most `max_nodes` nodes
// that look up no rows (a Gather of a constant table of integers aside).
std::vector<ComputedIds> FindComputedIds(const Graph& graph, const std::vector<int>& tables, size_t max_nodes = 16);

// The graph inputs (by index in graph.inputs) whose ids the lookups of `tables` read as they are or
// as a keyed table's keys: those AppendLookups traces without `computed`.
std::vector<size_t> LookupIdInputs(const Graph& graph, const std::vector<int>& tables);

// Runs one node on the CPU (compile/evaluate.h's EvaluateNode, which this layer cannot call).
using NodeEvaluator = std::function<StatusOr<std::vector<Tensor>>(const Node&, const std::vector<const Tensor*>&)>;

// Each of `computed` computed from `graph_inputs` (graph order) with `evaluate`, by value id; one
// that fails is left out, and the first failure is returned in `error`.
std::unordered_map<int, Tensor> ComputeIdValues(const Graph& graph, std::span<const ComputedIds> computed,
                                                std::span<const Tensor> graph_inputs, const NodeEvaluator& evaluate,
                                                Status* error);

// Appends to `trace` RowKey(t, row) for every id a lookup of `graph` reads from tables[t], where
// the ids come straight from a graph input (`graph_inputs`, in graph order), are a value in
// `computed` (by value id: FindComputedIds' values, computed by the caller), or are a keyed
// table's keys (KeyedRows over either: each key traced as the row it reads); negative ids (empty
// slots) read nothing. Lookups whose ids are otherwise computed inside the graph are not traced.
void AppendLookups(const Graph& graph, const std::vector<TableInfo>& tables, std::span<const Tensor> graph_inputs,
                   std::vector<uint64_t>& trace, const std::unordered_map<int, Tensor>* computed = nullptr);

}  // namespace rankd

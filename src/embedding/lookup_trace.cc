#include "embedding/lookup_trace.h"

#include <algorithm>
#include <optional>
#include <set>
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

// The ids a lookup reads: its ids input or, through KeyedRows, the keys it maps (`keyed` then
// the keyed table's index, null when it is not a constant).
struct LookupIds {
  int value = -1;
  bool through_keys = false;
  const Tensor* keyed = nullptr;
  keyed_rows::Part part;
};

LookupIds IdsOf(const Graph& graph, const std::vector<int>& producer, const Node& n, const Lookup& l) {
  LookupIds ids;
  ids.value = n.inputs[l.ids_input];
  if (const int p = producer[static_cast<size_t>(ids.value)]; p >= 0) {
    const Node& from = graph.nodes[static_cast<size_t>(p)];
    const auto o =
        static_cast<size_t>(std::find(from.outputs.begin(), from.outputs.end(), ids.value) - from.outputs.begin());
    std::vector<keyed_rows::Part> parts;
    if (from.op == "KeyedRows") parts = keyed_rows::Parts(from);
    if (o < parts.size()) {
      ids.through_keys = true;
      ids.keyed = graph.FindConstant(from.inputs[2 * o + 1]);
      ids.part = parts[o];
      ids.value = from.inputs[2 * o];
    }
  }
  return ids;
}

// Whether the keeper may compute node `n` on the host on the way to a lookup's ids: anything but a
// lookup, save a row Gather of a constant table of integers (a vocabulary's map from one id space
// to another), which reads no cached rows.
bool ComputableOnTheWay(const Graph& graph, const Node& n) {
  if (n.op == "KeyedRows") return false;
  for (const Lookup& l : NodeLookups(n)) {
    const Tensor* map = l.table_input < n.inputs.size() ? graph.FindConstant(n.inputs[l.table_input]) : nullptr;
    if (n.op != "Gather" || !map || (map->dtype() != DType::kI64 && map->dtype() != DType::kI32)) return false;
  }
  return true;
}

// The nodes that compute `value` from graph inputs and constants, in graph order, or nothing (more
// than `max_nodes` or kMaxComputedIdInputs inputs, a lookup of rows on the way).
std::optional<ComputedIds> Compute(const Graph& graph, const std::vector<int>& producer, int value, size_t max_nodes) {
  ComputedIds c;
  c.value = value;
  std::set<size_t> nodes;
  std::set<size_t> inputs;
  std::set<int> seen;
  std::vector<int> todo = {value};
  while (!todo.empty()) {
    const int v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second || graph.FindConstant(v)) continue;
    const auto input = std::find(graph.inputs.begin(), graph.inputs.end(), v);
    if (input != graph.inputs.end()) {
      inputs.insert(static_cast<size_t>(input - graph.inputs.begin()));
      continue;
    }
    const int p = v >= 0 && static_cast<size_t>(v) < producer.size() ? producer[static_cast<size_t>(v)] : -1;
    if (p < 0) return std::nullopt;  // neither an input, a constant nor computed
    const Node& n = graph.nodes[static_cast<size_t>(p)];
    if (!ComputableOnTheWay(graph, n)) return std::nullopt;
    if (nodes.insert(static_cast<size_t>(p)).second && nodes.size() > max_nodes) return std::nullopt;
    for (int in : n.inputs) {
      if (in >= 0) todo.push_back(in);
    }
  }
  if (inputs.empty() || inputs.size() > kMaxComputedIdInputs || nodes.empty()) return std::nullopt;
  c.inputs.assign(inputs.begin(), inputs.end());
  c.nodes.assign(nodes.begin(), nodes.end());  // node indices ascend in graph order
  return c;
}

}  // namespace

std::vector<ComputedIds> FindComputedIds(const Graph& graph, const std::vector<int>& tables, size_t max_nodes) {
  const std::vector<int> producer = graph.Producers();
  std::vector<ComputedIds> out;
  std::set<int> found;
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      if (std::find(tables.begin(), tables.end(), n.inputs[l.table_input]) == tables.end()) continue;
      const LookupIds ids = IdsOf(graph, producer, n, l);
      if (std::find(graph.inputs.begin(), graph.inputs.end(), ids.value) != graph.inputs.end()) continue;
      if (found.count(ids.value)) continue;
      if (std::optional<ComputedIds> c = Compute(graph, producer, ids.value, max_nodes)) {
        found.insert(ids.value);
        out.push_back(std::move(*c));
      }
    }
  }
  return out;
}

std::vector<size_t> LookupIdInputs(const Graph& graph, const std::vector<int>& tables) {
  const std::vector<int> producer = graph.Producers();
  std::set<size_t> inputs;
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      if (std::find(tables.begin(), tables.end(), n.inputs[l.table_input]) == tables.end()) continue;
      const LookupIds ids = IdsOf(graph, producer, n, l);
      if (ids.through_keys && !ids.keyed) continue;
      auto at = std::find(graph.inputs.begin(), graph.inputs.end(), ids.value);
      if (at != graph.inputs.end()) inputs.insert(static_cast<size_t>(at - graph.inputs.begin()));
    }
  }
  return {inputs.begin(), inputs.end()};
}

std::unordered_map<int, Tensor> ComputeIdValues(const Graph& graph, std::span<const ComputedIds> computed,
                                                std::span<const Tensor> graph_inputs, const NodeEvaluator& evaluate,
                                                Status* error) {
  std::unordered_map<int, Tensor> out;
  for (const ComputedIds& c : computed) {
    std::unordered_map<int, Tensor> values;
    for (size_t i : c.inputs) {
      if (i < graph_inputs.size() && graph_inputs[i].defined()) values[graph.inputs[i]] = graph_inputs[i];
    }
    if (values.size() != c.inputs.size()) continue;  // an input not sampled
    Status status;
    for (size_t index : c.nodes) {
      const Node& n = graph.nodes[index];
      std::vector<const Tensor*> args;
      for (int v : n.inputs) {
        const Tensor* constant = v >= 0 ? graph.FindConstant(v) : nullptr;
        auto at = values.find(v);
        args.push_back(constant ? constant : at != values.end() ? &at->second : nullptr);
      }
      StatusOr<std::vector<Tensor>> outputs = evaluate(n, args);
      if (!outputs.ok()) {
        status = outputs.status().WithContext("node '" + n.name + "'");
        break;
      }
      for (size_t o = 0; o < n.outputs.size() && o < outputs->size(); ++o) values[n.outputs[o]] = (*outputs)[o];
    }
    auto ids = values.find(c.value);
    if (status.ok() && ids != values.end()) {
      out[c.value] = ids->second;
    } else if (error && error->ok()) {
      *error = status.ok() ? Internal("no value computed") : status;
    }
  }
  return out;
}

void AppendLookups(const Graph& graph, const std::vector<TableInfo>& tables, std::span<const Tensor> graph_inputs,
                   std::vector<uint64_t>& trace, const std::unordered_map<int, Tensor>* computed) {
  std::unordered_map<int, int> table_of;  // table value id -> index in `tables`
  for (size_t t = 0; t < tables.size(); ++t) table_of[tables[t].value] = static_cast<int>(t);
  std::unordered_map<int, const Tensor*> ids_of;  // graph input or computed value id -> its ids
  for (size_t i = 0; i < graph.inputs.size() && i < graph_inputs.size(); ++i)
    ids_of[graph.inputs[i]] = &graph_inputs[i];
  if (computed) {
    for (const auto& [value, ids] : *computed) ids_of[value] = &ids;
  }
  const std::vector<int> producer = graph.Producers();
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      auto t = table_of.find(n.inputs[l.table_input]);
      const LookupIds lookup = IdsOf(graph, producer, n, l);
      if (lookup.through_keys && !lookup.keyed) continue;
      auto in = ids_of.find(lookup.value);
      if (t == table_of.end() || in == ids_of.end() || !in->second->defined()) continue;
      const Tensor& ids = *in->second;
      if (ids.dtype() != DType::kI64 && ids.dtype() != DType::kI32) continue;
      AppendIds(ids, t->second, tables[static_cast<size_t>(t->second)].shape[0], l, lookup.keyed, lookup.part, trace);
    }
  }
}

}  // namespace rankd

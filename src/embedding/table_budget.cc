#include "embedding/table_budget.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "embedding/lookups.h"

namespace rankd {

const char* TableTierName(TableTier tier) { return tier == TableTier::kDevice ? "gpu" : "host"; }

StatusOr<TableTier> ParseTableTier(const std::string& name) {
  if (name == "gpu") return TableTier::kDevice;
  if (name == "host") return TableTier::kHost;
  return InvalidArgument("table tier '" + name + "' (gpu or host)");
}

std::vector<TableInfo> FindTables(const Graph& graph) {
  std::set<int> tables;
  // Any other read: an input of a node that is not a table slot, or a graph output.
  std::set<int> other_reads(graph.outputs.begin(), graph.outputs.end());
  for (const Node& n : graph.nodes) {
    std::vector<bool> table_slot(n.inputs.size(), false);
    for (const Lookup& l : NodeLookups(n)) {
      const int table = n.inputs[l.table_input];
      if (!graph.IsConstant(table)) continue;
      tables.insert(table);
      table_slot[l.table_input] = true;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!table_slot[i] && n.inputs[i] >= 0) other_reads.insert(n.inputs[i]);
    }
  }
  std::vector<TableInfo> found;
  for (int id : tables) {
    const Tensor& t = graph.constants.at(id);
    found.push_back({id, graph.values[static_cast<size_t>(id)].name, t.shape(), t.dtype(),
                     static_cast<int64_t>(t.bytes()), other_reads.count(id) == 0, TableTier::kDevice});
  }
  return found;
}

StatusOr<std::vector<TableInfo>> PlaceTables(const Graph& graph, const TableBudget& budget) {
  std::vector<TableInfo> tables = FindTables(graph);
  std::map<std::string, TableTier> named = budget.tiers;
  int64_t on_device = 0;
  for (TableInfo& t : tables) {
    auto it = named.find(t.name);
    if (it == named.end()) continue;
    t.tier = it->second;
    named.erase(it);
    if (t.tier == TableTier::kHost && !t.lookups_only) {
      return InvalidArgument("tables.tiers: table '" + t.name +
                             "' is read by other ops than lookups, so it stays on the GPU");
    }
    if (t.tier == TableTier::kDevice) on_device += t.bytes;
  }
  if (!named.empty()) {
    std::string known;
    for (const TableInfo& t : tables) known += (known.empty() ? "" : ", ") + t.name;
    return InvalidArgument("tables.tiers names '" + named.begin()->first + "', which is not an embedding table of " +
                           "the model (its tables: " + (known.empty() ? "none" : known) + ")");
  }
  if (budget.gpu_bytes < 0) return tables;
  if (on_device > budget.gpu_bytes) {
    return InvalidArgument("the tables tables.tiers puts on the GPU take " + std::to_string(on_device) +
                           " bytes, more than tables.gpu_budget_mb allows (" + std::to_string(budget.gpu_bytes) +
                           " bytes)");
  }
  // The rest, smallest first (then by name, for a placement that does not depend on value ids).
  std::vector<size_t> order(tables.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tables[a].bytes != tables[b].bytes ? tables[a].bytes < tables[b].bytes : tables[a].name < tables[b].name;
  });
  for (size_t i : order) {
    TableInfo& t = tables[i];
    if (budget.tiers.count(t.name)) continue;
    if (!t.lookups_only || on_device + t.bytes <= budget.gpu_bytes) {
      on_device += t.bytes;  // a table read by other ops stays on the GPU whatever the budget
    } else {
      t.tier = TableTier::kHost;
    }
  }
  return tables;
}

TablePlacement ToPlacement(const std::vector<TableInfo>& tables) {
  TablePlacement placement;
  for (const TableInfo& t : tables) {
    if (t.tier == TableTier::kHost) placement.host.insert(t.value);
  }
  return placement;
}

int64_t TierBytes(const std::vector<TableInfo>& tables, TableTier tier) {
  int64_t total = 0;
  for (const TableInfo& t : tables) total += t.tier == tier ? t.bytes : 0;
  return total;
}

}  // namespace rankd

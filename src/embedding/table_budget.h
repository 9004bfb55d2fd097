// A model's embedding tables, and where each is kept: on the GPU, or in host memory read by the
// GPU in place, placed by the config's GPU memory budget for tables (docs/embedding.md).
//
// With no budget every table stays on the device, as it always has. With one, the tables the
// config names go where it says, and the rest stay on the device smallest first while they fit
// the budget: every table gets about one lookup per request and feature, so the smallest tables
// serve the most lookups per byte of device memory. The others are kept in host memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/table_placement.h"
#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

enum class TableTier { kDevice, kHost };
// "gpu" or "host", as the config writes them.
const char* TableTierName(TableTier tier);
StatusOr<TableTier> ParseTableTier(const std::string& name);

struct TableInfo {
  int value = -1;  // the constant's value id in the graph
  std::string name;
  Shape shape;
  DType dtype = DType::kInvalid;
  int64_t bytes = 0;
  // Read only as the rows of lookups (embedding bags, a Gather of rows): such a table may leave
  // the device. A table anything else reads (a product, say) stays there.
  bool lookups_only = true;
  TableTier tier = TableTier::kDevice;
};

struct TableBudget {
  int64_t gpu_bytes = -1;                  // for tables on the GPU; -1: no limit
  std::map<std::string, TableTier> tiers;  // per table, by its name in the graph
};

// The graph's lookup tables (constants read as the rows of an embedding bag or a row Gather), in
// value order, each on the device.
std::vector<TableInfo> FindTables(const Graph& graph);

// FindTables, placed by `budget`. Errors: a tier naming no table of the graph, a table read by
// other ops than lookups sent to host memory, tables named for the GPU that exceed the budget.
StatusOr<std::vector<TableInfo>> PlaceTables(const Graph& graph, const TableBudget& budget);

// What the backend is told: the tables kept in host memory.
TablePlacement ToPlacement(const std::vector<TableInfo>& tables);

// Bytes of the tables on `tier`.
int64_t TierBytes(const std::vector<TableInfo>& tables, TableTier tier);

}  // namespace rankd

// A model's embedding tables, and where each is kept: on the GPU; in host memory with a cache of
// its hot rows on the GPU; or in host memory alone, read by the GPU in place. Placed by the
// config's GPU memory budget for tables (docs/embedding.md).
//
// With no budget every table stays on the device, as it always has. With one, the tables the
// config names go where it says, and tables other ops read stay on the device. The rest, smallest
// first, stay on the device while a table takes at most half of an even share of what the budget
// has left for the lookup tables not on the device: every table gets about one lookup per request and
// feature, so small tables serve the most lookups per byte, and a cache of a large table's hot rows
// serves most of its lookups (Zipf traffic) for a fraction of its bytes. The others are cached:
// what the budget has left is shared among their caches in proportion to their bytes (every byte of
// a cache counts, its index of an int32 per table row included). A table whose share cannot hold
// its index and a row stays in host memory uncached.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/table_placement.h"
#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

// kDisk: in a file on disk, the rows each run reads fetched before it runs (embedding/disk_tables.h).
enum class TableTier { kDevice, kCache, kHost, kDisk };
// "gpu", "cache", "host" or "disk", as the config writes them.
const char* TableTierName(TableTier tier);
StatusOr<TableTier> ParseTableTier(const std::string& name);
// A tier as tables.tiers writes it: those four, or "gpu:N[,M...]" (kDevice on those GPUs for every
// replica, its rows split over them: `gpus` lists them, else it is emptied).
StatusOr<TableTier> ParseTablePlace(const std::string& name, std::vector<int>* gpus);

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
  // With kCache: the rows its device cache holds (at least 1); with kDisk, the rows of a GPU cache in
  // front of its host cache (0: none).
  int64_t cache_rows = 0;
  // With kDevice: the GPUs holding the table for every replica of the model, its rows split evenly
  // over them in order, read there by the replicas elsewhere over NVLink (tables.tiers' gpu:N,M,
  // docs/replicas.md); empty: each replica's own GPU.
  std::vector<int> gpus;

  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t row_bytes() const { return rows() > 0 ? bytes / rows() : 0; }
};

struct TableBudget {
  int64_t gpu_bytes = -1;                  // for tables on the GPU and caches; -1: no limit
  std::map<std::string, TableTier> tiers;  // per table, by its name in the graph
  // Caches of a given size, by table name (the table is cached whatever `tiers` says of it).
  std::map<std::string, int64_t> cache_rows = {};
  // Tables on named GPUs (tier kDevice), by table name: not counted against gpu_bytes, which is
  // each replica's own GPU's.
  std::map<std::string, std::vector<int>> gpus = {};
  // With gpu_bytes and two or more GPUs (the replicas', tables.shard_over_gpus): the lookup tables
  // no replica keeps are placed once over them before any is cached, largest first, whole on the
  // GPU with the most room left, else their rows split over all of them (as tables.tiers' gpu:N and
  // gpu:N,M place them), each counted against the budget of the GPUs it lies on; the caches then
  // share what the fullest GPU has left.
  std::vector<int> shard_gpus = {};
  // Host memory for the tables not on the GPU: host and cached tables' rows, and the host caches of
  // tables on disk; -1: no limit. Past it, the tables the host would hold that may go on disk
  // (their lookups' ids are request inputs, DiskTables::CanServe) do, largest first, until the rest
  // fits; what is left is their host caches' (DiskCacheBytes).
  int64_t host_bytes = -1;
};

// The device bytes a table of `bytes` takes on each of `gpus` GPUs when placed on them (its rows
// split evenly, each part whole 2 MiB granules of virtual memory: backend/cuda/shared_tables.h).
int64_t GpuPartBytes(int64_t bytes, size_t gpus);

// The device bytes of a cache of `cache_rows` rows of `table`: its index (an int32 per table row)
// and its rows; of a table on disk, its rows (its index is on the host: embedding/gpu_row_tier.h).
int64_t CacheBytes(const TableInfo& table, int64_t cache_rows);

// The graph's lookup tables (constants read as the rows of an embedding bag or a row Gather), in
// value order, each on the device.
std::vector<TableInfo> FindTables(const Graph& graph);

// Device bytes of the keyed tables' indexes (KeyedRows' constant inputs, model/key_index.h): they
// stay on the GPU and count against the budget.
int64_t KeyIndexBytes(const Graph& graph);

// FindTables, placed by `budget` (what is left after the key indexes). Errors: a tier or cache size naming no table of
// the graph, a table read by other ops than lookups sent to host memory or cached, tables named for the GPU (and caches
// of a given size) that exceed the budget, a table named for a cache that the budget leaves no room for (or with no
// budget to size it by), tables the host budget cannot hold that may not go on disk.
StatusOr<std::vector<TableInfo>> PlaceTables(const Graph& graph, const TableBudget& budget);

// What `budget`'s host budget leaves for the host caches of the tables on disk (DiskTablesOptions::
// cache_bytes, shared among them in proportion to their bytes); -1 without a host budget.
int64_t DiskCacheBytes(const std::vector<TableInfo>& tables, const TableBudget& budget);

// What the backend is told: the tables kept in host memory, and the cached ones' cache sizes.
TablePlacement ToPlacement(const std::vector<TableInfo>& tables);

// Bytes of the tables on `tier` (a cached table's bytes are in host memory: kCache).
int64_t TierBytes(const std::vector<TableInfo>& tables, TableTier tier);
// Device bytes of the tables' caches (CacheBytes, summed).
int64_t CachesBytes(const std::vector<TableInfo>& tables);

}  // namespace rankd

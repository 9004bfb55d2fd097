#include "embedding/table_budget.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "embedding/disk_tables.h"
#include "embedding/lookups.h"
#include "model/config.h"
#include "model/table_place.h"

namespace rankd {

const char* TableTierName(TableTier tier) {
  switch (tier) {
    case TableTier::kDevice:
      return "gpu";
    case TableTier::kCache:
      return "cache";
    case TableTier::kDisk:
      return "disk";
    case TableTier::kHost:
      break;
  }
  return "host";
}

StatusOr<TableTier> ParseTableTier(const std::string& name) {
  if (name == "gpu") return TableTier::kDevice;
  if (name == "cache") return TableTier::kCache;
  if (name == "host") return TableTier::kHost;
  if (name == "disk") return TableTier::kDisk;
  return InvalidArgument("table tier '" + name + "' (gpu, cache, host or disk)");
}

StatusOr<TableTier> ParseTablePlace(const std::string& name, std::vector<int>* gpus) {
  gpus->clear();
  std::optional<TablePlaceText> place = ParseTablePlaceText(name);
  if (!place)
    return InvalidArgument("table tier '" + name +
                           "' (gpu, gpu:N or gpu:N,M,... with GPU indices, cache, host or disk)");
  *gpus = std::move(place->gpus);
  return ParseTableTier(place->tier);
}

int64_t GpuPartBytes(int64_t bytes, size_t gpus) {
  constexpr int64_t kGrain = int64_t{2} << 20;
  const auto n = static_cast<int64_t>(std::max<size_t>(gpus, 1));
  const int64_t share = std::max<int64_t>((bytes + n - 1) / n, 1);
  return (share + kGrain - 1) / kGrain * kGrain;
}

int64_t CacheBytes(const TableInfo& table, int64_t cache_rows) {
  if (table.tier == TableTier::kDisk) return cache_rows * table.row_bytes();  // its index is on the host
  return table.rows() * static_cast<int64_t>(sizeof(int32_t)) + cache_rows * table.row_bytes();
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
    found.push_back({id,
                     graph.values[static_cast<size_t>(id)].name,
                     t.shape(),
                     t.dtype(),
                     static_cast<int64_t>(t.bytes()),
                     other_reads.count(id) == 0,
                     TableTier::kDevice,
                     0,
                     {}});
  }
  return found;
}

namespace {

std::string TableNames(const std::vector<TableInfo>& tables) {
  std::string known;
  for (const TableInfo& t : tables) known += (known.empty() ? "" : ", ") + t.name;
  return known.empty() ? "none" : known;
}

// The tables' tiers and cache sizes the config names; the device bytes they take.
StatusOr<int64_t> PlaceNamed(std::vector<TableInfo>& tables, const TableBudget& budget) {
  std::map<std::string, TableTier> named = budget.tiers;
  // A table on disk with a cache size has a GPU cache in front of its host cache (gpu_row_tier.h).
  for (const auto& [name, rows] : budget.cache_rows) {
    auto tier = budget.tiers.find(name);
    if (tier == budget.tiers.end() || tier->second != TableTier::kDisk) named[name] = TableTier::kCache;
  }
  int64_t on_device = 0;
  for (TableInfo& t : tables) {
    auto it = named.find(t.name);
    if (it == named.end()) continue;
    t.tier = it->second;
    named.erase(it);
    if (t.tier != TableTier::kDevice && !t.lookups_only) {
      return InvalidArgument("tables: table '" + t.name +
                             "' is read by other ops than lookups, so it stays on the GPU");
    }
    auto gpu = budget.gpus.find(t.name);
    if (gpu != budget.gpus.end()) {
      if (t.tier != TableTier::kDevice || !t.lookups_only) {
        return InvalidArgument("tables: table '" + t.name + "' is placed on GPUs " + GpuSetText({false, gpu->second}) +
                               (t.lookups_only ? " and cached" : ", but other ops than lookups read it"));
      }
      t.gpus = gpu->second;  // on its own GPUs, outside each replica's budget
    } else if (t.tier == TableTier::kDevice) {
      on_device += t.bytes;
    }
    auto rows = budget.cache_rows.find(t.name);
    if (rows != budget.cache_rows.end()) {
      t.cache_rows = std::clamp<int64_t>(rows->second, 1, std::max<int64_t>(t.rows(), 1));
      on_device += CacheBytes(t, t.cache_rows);
    }
  }
  if (!named.empty()) {
    return InvalidArgument("tables names '" + named.begin()->first + "', which is not an embedding table of " +
                           "the model (its tables: " + TableNames(tables) + ")");
  }
  return on_device;
}

}  // namespace

int64_t KeyIndexBytes(const Graph& graph) {
  std::set<int> indexes;
  for (const Node& n : graph.nodes) {
    if (n.op != "KeyedRows") continue;
    for (size_t i = 1; i < n.inputs.size(); i += 2) indexes.insert(n.inputs[i]);
  }
  int64_t bytes = 0;
  for (int v : indexes) {
    if (const Tensor* t = graph.FindConstant(v)) bytes += static_cast<int64_t>(t->bytes());
  }
  return bytes;
}

namespace {

// Past the host budget, tables the host would hold go on disk, largest first (each table serves
// about as many lookups as another: the largest free the most memory a lookup).
Status PlaceOnDisk(const Graph& graph, const TableBudget& budget, std::vector<TableInfo>& tables) {
  auto held = [](const TableInfo& t) { return t.tier == TableTier::kHost || t.tier == TableTier::kCache; };
  int64_t host = 0;
  std::vector<size_t> movable;
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableInfo& t = tables[i];
    if (!held(t)) continue;
    host += t.bytes;
    if (!budget.tiers.count(t.name) && !budget.cache_rows.count(t.name) && DiskTables::CanServe(graph, t).ok())
      movable.push_back(i);
  }
  std::stable_sort(movable.begin(), movable.end(), [&](size_t a, size_t b) {
    return tables[a].bytes != tables[b].bytes ? tables[a].bytes > tables[b].bytes : tables[a].name < tables[b].name;
  });
  for (size_t i : movable) {
    if (host <= budget.host_bytes) break;
    TableInfo& t = tables[i];
    const int64_t gpu_bytes = t.tier == TableTier::kCache ? CacheBytes(t, t.cache_rows) : 0;
    t.tier = TableTier::kDisk;
    // A cache the GPU budget gave it stays, in front of its host cache, where its lookups can read
    // one; its index now lives on the host, so the GPU bytes the budget gave it are all rows.
    if (gpu_bytes > 0 && DiskTables::CanCacheOnGpu(graph, t).ok())
      t.cache_rows = std::min(t.rows(), gpu_bytes / t.row_bytes());
    else
      t.cache_rows = 0;
    host -= tables[i].bytes;
  }
  if (host > budget.host_bytes) {
    return InvalidArgument("the tables kept in host memory take " + std::to_string(host) +
                           " bytes, more than tables.host_budget_mb allows (" + std::to_string(budget.host_bytes) +
                           " bytes), and no other table may go on disk (tables.tiers names it, or its lookups' ids "
                           "are not request inputs)");
  }
  return Status::Ok();
}

// PlaceTables without the host budget.
StatusOr<std::vector<TableInfo>> PlaceOnGpus(const Graph& graph, const TableBudget& budget) {
  std::vector<TableInfo> tables = FindTables(graph);
  RANKD_ASSIGN_OR_RETURN(int64_t on_device, PlaceNamed(tables, budget));
  on_device += KeyIndexBytes(graph);
  auto named = [&](const TableInfo& t) {
    return budget.tiers.count(t.name) > 0 || budget.cache_rows.count(t.name) > 0;
  };
  if (budget.gpu_bytes < 0) {
    for (const TableInfo& t : tables) {
      if (t.tier == TableTier::kCache && t.cache_rows == 0)
        return InvalidArgument("tables.tiers puts table '" + t.name +
                               "' in a cache, which needs tables.gpu_budget_mb (or tables.cache_rows) to size it");
    }
    return tables;
  }
  if (on_device > budget.gpu_bytes) {
    return InvalidArgument("the tables, caches and key indexes the config sizes take " + std::to_string(on_device) +
                           " bytes on the GPU, more than tables.gpu_budget_mb allows (" +
                           std::to_string(budget.gpu_bytes) + " bytes)");
  }
  // The rest, smallest first (then by name, for a placement that does not depend on value ids): a
  // table read by other ops stays on the GPU whatever the budget; a lookup table does while it
  // takes at most half of an even share of what is left among the tables not on the GPU (each
  // table serves about as many lookups as another, and a cache of its hottest rows serves most of
  // them for a fraction of its bytes); the others are cached.
  std::vector<size_t> order;
  for (size_t i = 0; i < tables.size(); ++i) {
    if (!named(tables[i])) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tables[a].bytes != tables[b].bytes ? tables[a].bytes < tables[b].bytes : tables[a].name < tables[b].name;
  });
  for (size_t i : order) {
    if (!tables[i].lookups_only) on_device += tables[i].bytes;
  }
  int64_t sharing = 0;  // lookup tables not (yet) on the device: the cached ones share what is left
  for (size_t i : order) sharing += tables[i].lookups_only;
  for (size_t i : order) {
    TableInfo& t = tables[i];
    if (!t.lookups_only) continue;
    const int64_t left_now = budget.gpu_bytes - on_device;
    if (left_now >= t.bytes && t.bytes <= left_now / (2 * sharing)) {
      on_device += t.bytes;
      --sharing;
    } else {
      t.tier = TableTier::kCache;
    }
  }
  // Placed once over the replicas' GPUs: largest first, whole on the GPU with the most room left,
  // else split over all of them; what fits neither way is cached. (Read over NVLink, such tables
  // gave W1 78-82% of resident pairs/s per GPU, where caches of 10% of the rows gave 39%:
  // docs/log/benchmarks.md.)
  std::vector<int64_t> room(budget.shard_gpus.size(), budget.gpu_bytes - on_device);
  if (room.size() >= 2) {
    std::vector<size_t> rest;
    for (size_t i : order) {
      if (tables[i].tier == TableTier::kCache) rest.push_back(i);
    }
    std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return tables[a].bytes > tables[b].bytes; });
    for (size_t i : rest) {
      TableInfo& t = tables[i];
      const auto most = std::max_element(room.begin(), room.end());
      const int64_t whole = GpuPartBytes(t.bytes, 1), part = GpuPartBytes(t.bytes, room.size());
      if (whole <= *most) {
        t.gpus = {budget.shard_gpus[static_cast<size_t>(most - room.begin())]};
        *most -= whole;
      } else if (part <= *std::min_element(room.begin(), room.end())) {
        t.gpus = budget.shard_gpus;
        for (int64_t& r : room) r -= part;
      } else {
        continue;
      }
      t.tier = TableTier::kDevice;
    }
  }
  // What is left, shared by the caches still to be sized in proportion to their tables' bytes.
  const int64_t left = room.size() >= 2 ? *std::min_element(room.begin(), room.end()) : budget.gpu_bytes - on_device;
  double sized_bytes = 0;
  for (const TableInfo& t : tables) sized_bytes += t.tier == TableTier::kCache && t.cache_rows == 0 ? t.bytes : 0;
  for (TableInfo& t : tables) {
    if (t.tier != TableTier::kCache || t.cache_rows > 0) continue;
    const auto share = static_cast<int64_t>(static_cast<double>(left) * static_cast<double>(t.bytes) / sized_bytes);
    const int64_t room = share - CacheBytes(t, 0);
    const int64_t rows = t.row_bytes() > 0 ? std::min(room / t.row_bytes(), t.rows()) : 0;
    if (rows >= 1) {
      t.cache_rows = rows;
    } else if (budget.tiers.count(t.name)) {
      return InvalidArgument("tables.tiers puts table '" + t.name + "' in a cache, and tables.gpu_budget_mb " +
                             "leaves it " + std::to_string(std::max<int64_t>(share, 0)) + " bytes, less than its " +
                             "index and one row take (" + std::to_string(CacheBytes(t, 1)) + ")");
    } else {
      t.tier = TableTier::kHost;  // not even the index fits: read from host memory alone
    }
  }
  return tables;
}

}  // namespace

StatusOr<std::vector<TableInfo>> PlaceTables(const Graph& graph, const TableBudget& budget) {
  RANKD_ASSIGN_OR_RETURN(std::vector<TableInfo> tables, PlaceOnGpus(graph, budget));
  if (budget.host_bytes >= 0) RANKD_RETURN_IF_ERROR(PlaceOnDisk(graph, budget, tables));
  return tables;
}

int64_t DiskCacheBytes(const std::vector<TableInfo>& tables, const TableBudget& budget) {
  if (budget.host_bytes < 0) return -1;
  return std::max<int64_t>(
      budget.host_bytes - TierBytes(tables, TableTier::kHost) - TierBytes(tables, TableTier::kCache), 0);
}

TablePlacement ToPlacement(const std::vector<TableInfo>& tables) {
  TablePlacement placement;
  for (const TableInfo& t : tables) {
    if (t.tier == TableTier::kHost) placement.host.insert(t.value);
    if (t.tier == TableTier::kCache) placement.cached[t.value] = t.cache_rows;
    if (t.tier == TableTier::kDevice && !t.gpus.empty()) placement.gpus[t.value] = t.gpus;
  }
  return placement;
}

int64_t TierBytes(const std::vector<TableInfo>& tables, TableTier tier) {
  int64_t total = 0;
  for (const TableInfo& t : tables) total += t.tier == tier ? t.bytes : 0;
  return total;
}

int64_t CachesBytes(const std::vector<TableInfo>& tables) {
  int64_t total = 0;
  for (const TableInfo& t : tables) {
    if (t.tier == TableTier::kCache || (t.tier == TableTier::kDisk && t.cache_rows > 0))
      total += CacheBytes(t, t.cache_rows);
  }
  return total;
}

}  // namespace rankd

#include "runtime/cuda/placed_ids.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cuda/device.h"
#include "embedding/lookups.h"

namespace rankd::cuda {
namespace {

// 262,144 ids: W1 from about 2,200 pairs. Smaller runs gain little from staged rows, and would
// wait for the host's pass over their ids in their latency.
std::atomic<int64_t> placed_ids_from{int64_t{1} << 18};
// W1 `mlperf` at 32,768 pairs with a 10% cache misses about 114 MB of rows a run.
std::atomic<size_t> staged_rows_bytes{size_t{256} << 20};

// Off until every test of the gather has run on a GPU (docs/embedding.md); W1 `mlperf` at 32,768
// pairs with every table in host memory was measured with 1 GiB.
std::atomic<size_t> gathered_rows_bytes{0};

std::atomic<uint64_t> placed_ids{0}, staged_rows{0}, unstaged_rows{0}, gathered_ids{0};

// Misses whose rows are fetched ahead of the one being copied.
constexpr size_t kPrefetchAhead = 8;

template <typename From, typename To>
PlacedCounts Place(const PlacedTable& t, const From* from, To* to, size_t n, StagedRoom& room) {
  const int64_t rows = t.cached->rows();
  const auto row_bytes = static_cast<size_t>(t.row_bytes);
  const size_t row_units = row_bytes / kStagedUnitBytes;
  // First the ids as they are (-1 for any negative one, an empty slot of a bag; the table's end
  // for one past it, which the kernel reports), each miss marked -2 - id and counted.
  size_t misses = 0, placed = 0;
  for (size_t j = 0; j < n; ++j) {
    const auto id = static_cast<int64_t>(from[j]);
    if (id < 0) {
      to[j] = To{-1};
    } else if (id >= rows) {
      to[j] = static_cast<To>(rows);
    } else if (t.cached->Test(id)) {
      to[j] = static_cast<To>(id);
      ++placed;
    } else {
      to[j] = static_cast<To>(-2 - id);
      ++placed, ++misses;
    }
  }
  placed_ids.fetch_add(placed, std::memory_order_relaxed);
  if (misses == 0) return {placed, 0, 0};
  // Then each miss's row into the room this piece takes, its id now -2 - the row's unit there, or
  // where the room has run out the id again.
  const size_t first = room.used.fetch_add(misses * row_units, std::memory_order_relaxed);
  const size_t end = first >= room.units ? first : std::min(room.units, first + misses * row_units);
  const uint8_t* table = t.rows;
  auto marked = [&](size_t j) { return static_cast<int64_t>(to[j]) < -1; };
  auto row_of = [&](size_t j) { return table + static_cast<size_t>(-2 - static_cast<int64_t>(to[j])) * row_bytes; };
  size_t unit = first, ahead = 0, prefetched = 0;  // rows prefetched kPrefetchAhead misses ahead
  for (size_t j = 0; j < n; ++j) {
    if (!marked(j)) continue;
    if (unit + row_units > end) {
      to[j] = static_cast<To>(-2 - static_cast<int64_t>(to[j]));
      continue;
    }
    for (ahead = std::max(ahead, j); ahead < n && prefetched < kPrefetchAhead; ++ahead) {
      if (!marked(ahead)) continue;
      __builtin_prefetch(row_of(ahead));
      __builtin_prefetch(row_of(ahead) + row_bytes - 1);
      ++prefetched;
    }
    std::memcpy(room.host + unit * kStagedUnitBytes, row_of(j), row_bytes);
    to[j] = static_cast<To>(-2 - static_cast<int64_t>(unit));
    unit += row_units;
    --prefetched;
  }
  const size_t staged = (unit - first) / std::max<size_t>(row_units, 1);
  staged_rows.fetch_add(staged, std::memory_order_relaxed);
  unstaged_rows.fetch_add(misses - staged, std::memory_order_relaxed);
  return {placed, staged, misses - staged};
}

}  // namespace

PlacedCounts PlacedTotals() {
  return {placed_ids.load(std::memory_order_relaxed), staged_rows.load(std::memory_order_relaxed),
          unstaged_rows.load(std::memory_order_relaxed)};
}

void SetPlacedIdsFrom(int64_t ids) { placed_ids_from.store(ids); }
int64_t PlacedIdsFrom() { return placed_ids_from.load(); }
void SetStagedRowsBytes(size_t bytes) { staged_rows_bytes.store(bytes); }
size_t StagedRowsBytes() { return staged_rows_bytes.load(); }
void SetGatheredRowsBytes(size_t bytes) { gathered_rows_bytes.store(bytes); }
size_t GatheredRowsBytes() { return gathered_rows_bytes.load(); }
void CountGatheredIds(uint64_t ids) { gathered_ids.fetch_add(ids, std::memory_order_relaxed); }
uint64_t GatheredIdsTotal() { return gathered_ids.load(std::memory_order_relaxed); }

PlacedCounts PlaceIds(const PlacedTable& table, const void* from, bool wide_from, void* to, bool wide_to, size_t n,
                      StagedRoom& room) {
  if (wide_from && wide_to) return Place(table, static_cast<const int64_t*>(from), static_cast<int64_t*>(to), n, room);
  if (wide_from) return Place(table, static_cast<const int64_t*>(from), static_cast<int32_t*>(to), n, room);
  return Place(table, static_cast<const int32_t*>(from), static_cast<int32_t*>(to), n, room);
}

std::vector<int> BagOnlyInputs(const Plan& plan, const std::vector<Tensor>& views, const std::vector<int>& input_of,
                               const std::function<bool(const void*)>& eligible) {
  const Graph& graph = plan.graph();
  const size_t count = graph.inputs.size();
  std::vector<int> table_of(count, -1);
  std::vector<bool> only_bags(count, true);
  auto input = [&](int v) { return v >= 0 ? input_of[static_cast<size_t>(v)] : -1; };
  for (const PlanStep& step : plan.steps()) {
    const Node& node = graph.nodes[static_cast<size_t>(step.node)];
    std::vector<bool> bag_ids(step.inputs.size(), false);  // node inputs read as an eligible bag's ids
    for (const Lookup& l : NodeLookups(node)) {
      if (l.ids_input >= step.inputs.size() || l.table_input >= step.inputs.size()) continue;
      const int in = input(step.inputs[l.ids_input]);
      const int table = step.inputs[l.table_input];
      if (in < 0 || table < 0 || node.op != "ConcatEmbeddingBags" || l.gather || l.column >= 0) continue;
      const void* at = views[static_cast<size_t>(table)].raw();
      const Tensor& rows = views[static_cast<size_t>(table)];
      auto& mine = table_of[static_cast<size_t>(in)];
      if (!at || rows.rank() != 2 || rows.dim(0) > INT32_MAX - 2 ||
          rows.bytes() / static_cast<size_t>(std::max<int64_t>(rows.dim(0), 1)) % kStagedUnitBytes != 0 ||
          !eligible(at) || (mine >= 0 && views[static_cast<size_t>(mine)].raw() != at)) {
        continue;  // read some other way: the input stays out (below)
      }
      mine = table;
      bag_ids[l.ids_input] = true;
    }
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      const int in = input(step.inputs[k]);
      if (in >= 0 && !bag_ids[k]) only_bags[static_cast<size_t>(in)] = false;
    }
  }
  for (int v : graph.outputs) {
    const int in = input(v);
    if (in >= 0) only_bags[static_cast<size_t>(in)] = false;
  }
  int64_t ids = 0;
  for (size_t i = 0; i < count; ++i) {
    const Tensor& v = views[static_cast<size_t>(graph.inputs[i])];
    if (v.dtype() != DType::kI64 && v.dtype() != DType::kI32) only_bags[i] = false;
    if (!only_bags[i]) table_of[i] = -1;
    if (table_of[i] >= 0) ids += v.size();
  }
  const int64_t from = PlacedIdsFrom();
  if (from < 0 || ids < from) std::fill(table_of.begin(), table_of.end(), -1);
  return table_of;
}

std::vector<const CudaRowCache*> PlaceableInputs(const Plan& plan, const std::vector<Tensor>& views,
                                                 const std::vector<int>& input_of,
                                                 const std::function<const CudaRowCache*(const void*)>& cache_of) {
  const std::vector<int> tables =
      BagOnlyInputs(plan, views, input_of, [&](const void* table) { return cache_of(table) != nullptr; });
  std::vector<const CudaRowCache*> cache(tables.size(), nullptr);
  for (size_t i = 0; i < tables.size(); ++i) {
    if (tables[i] >= 0) cache[i] = cache_of(views[static_cast<size_t>(tables[i])].raw());
  }
  return cache;
}

}  // namespace rankd::cuda

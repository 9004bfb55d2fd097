// Placed ids: a large run's misses of cached tables gathered by the host before the launch.
//
// A lookup kernel that reads a row missing from its table's device cache reads it from host memory
// over the bus, inside the kernel; from a table of tens of GiB an H200 does that at 8-9 GB/s (the
// GPU's translation of so many host pages), where the host's cores gather the same rows at over
// 30 GB/s (docs/embedding.md). So for a run with many ids the host looks at each id of a cached
// table's bags as it packs the inputs: an id whose row the cache holds (a bit per row the cache
// keeps on the host, CudaRowCache::Cached) stays as it is and the kernel finds its slot as ever;
// a miss's row is copied into the executor's staged rows (pinned, mapped host memory, which the
// kernel reads in place, rows side by side) and its id becomes -2 - the row's offset there
// (RowCacheView, device.h). Rows past the staged rows' room stay ids, read from the table by the
// kernel as before; so do ids out of range, which the kernel reports as before. The bits only
// steer the work: a staged row is the table's row, and a row staged or not is read right
// whatever the cache holds when the kernel runs.
//
// Which inputs are placed is fixed per plan (PlaceableInputs): graph inputs that only ever give
// the ids of bags (not a Gather's, nor a column's) of one cached table, in a plan whose placeable
// ids number at least PlacedIdsFrom().
//
// The ids of tables held only in host memory (no cache) are placed on the device instead, by the
// same rule (BagOnlyInputs): sorted there and their rows gathered into device memory in address
// order (backend/cuda/host_row_gather.h), where the host's gather would be no faster than the
// kernel's reads in place.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/row_cache.h"
#include "common/row_bits.h"
#include "compile/plan.h"

namespace rankd::cuda {

// Runs whose placeable ids (the plan's shapes) number at least this many are placed (`--cuda
// placed_ids_from=N`; -1: none). Bindings made after a change follow it.
void SetPlacedIdsFrom(int64_t ids);
int64_t PlacedIdsFrom();
// The staged rows' room an executor keeps, at most (`--cuda staged_rows_mb=N`; 0: every miss read in
// place). Bindings made after a change follow it.
void SetStagedRowsBytes(size_t bytes);
size_t StagedRowsBytes();

// The device memory an executor keeps at most for the rows a run gathers on the device (`--cuda
// gathered_rows_mb=N`; 0: none gathered, every row read in place). Bindings made after a change
// follow it.
void SetGatheredRowsBytes(size_t bytes);
size_t GatheredRowsBytes();
// The ids of runs gathered on the device in this process (each run's count added when launched),
// for tests.
void CountGatheredIds(uint64_t ids);
uint64_t GatheredIdsTotal();

// A cached table as placing reads it: which rows its cache holds, and its rows in host memory.
struct PlacedTable {
  const RowBits* cached = nullptr;
  const uint8_t* rows = nullptr;  // [cached->rows(), row_bytes]
  int64_t row_bytes = 0;          // a multiple of kStagedUnitBytes
};

// What one PlaceIds did: ids placed (empty slots not counted), misses staged, misses left as ids.
struct PlacedCounts {
  uint64_t ids = 0, staged = 0, unstaged = 0;
};

// The room for one run's staged rows, handed out in kStagedUnitBytes units.
struct StagedRoom {
  uint8_t* host = nullptr;  // pinned, mapped
  size_t units = 0;
  std::atomic<size_t> used{0};
};

// What placing has done in this process (every PlaceIds' counts added up), for tests.
PlacedCounts PlacedTotals();

// Writes `n` ids (INT64 at `from` when wide_from, else INT32) into `to` (INT64 when wide_to, else
// INT32) as a bag of `table` reads them, the misses' rows staged in `room` while it has any.
// Thread-safe for disjoint `to`.
PlacedCounts PlaceIds(const PlacedTable& table, const void* from, bool wide_from, void* to, bool wide_to, size_t n,
                      StagedRoom& room);

// Per graph input of `plan`: the table (its value id) whose bags alone read its ids, where
// `eligible(the table's address as kernels read it)` and its rows are whole kStagedUnitBytes
// units, fewer than 2^31 - 2; -1 otherwise, and all -1 when those inputs' ids are fewer than
// PlacedIdsFrom(). `views`: the binding's device views, by value id; `input_of`: per value, the
// graph input it is or aliases (-1).
std::vector<int> BagOnlyInputs(const Plan& plan, const std::vector<Tensor>& views, const std::vector<int>& input_of,
                               const std::function<bool(const void*)>& eligible);

// Per graph input of `plan`: the cache whose bags alone read its ids, where the input is placeable
// (null otherwise). `cache_of(table)`: the cache of the table a step reads at that device
// address, or null; `views`: the binding's device views, by value id; `input_of`: per value, the
// graph input it is or aliases (-1). All null when the plan's placeable ids are fewer than
// PlacedIdsFrom().
std::vector<const CudaRowCache*> PlaceableInputs(const Plan& plan, const std::vector<Tensor>& views,
                                                 const std::vector<int>& input_of,
                                                 const std::function<const CudaRowCache*(const void*)>& cache_of);

}  // namespace rankd::cuda

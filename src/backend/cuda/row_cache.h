// CudaRowCache: a table's cache on the GPU (backend/table_cache.h) over its rows in page-locked,
// mapped host memory.
//
// On the device: slot_of_row, an int32 per row of the table (-1: not cached), and the slots, a
// [capacity, width] array of the table's dtype. Lookup kernels read slot_of_row[id] and then the
// row from its slot, or from the host table when there is none (RowCacheView, device.h). On the
// host: a bit per row, set while the row is cached, for runs whose ids the host places before
// launching them (runtime/cuda/placed_ids.h): the host gathers the rows whose bit is clear.
//
// Apply keeps every lookup's row right while rows move in and out:
//   1. the rows leaving (the slots' old rows) are unmapped: slot_of_row[row] = -1, and the host
//      waits for that to land;
//   2. the lookups' grace period passes (common/grace_period.h): every run that entered before it
//      may still read an old slot, and is waited for; later runs see the old rows unmapped;
//   3. the new rows are copied from the host table into their slots, and only then mapped
//      (slot_of_row[row] = slot, a later kernel on the same stream).
// A lookup thus reads a row from a slot only while the slot holds that row. Step 2 is skipped when
// no row leaves (slots still empty). A cache shared by several versions of a model (the one
// serving and the one loaded beside it: shared_row_caches.h) waits for the runs of each: every
// version's executors enter its own grace period, added to the cache's readers while it lives. A row's host bit is
// cleared in step 1 and set in step 3; it only steers which rows the host gathers (a row it gathers is the table's, and
// one it leaves is found by the kernel as any other), so it needs no ordering with the device.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/table_cache.h"
#include "common/grace_period.h"
#include "common/latency_histogram.h"
#include "common/mutex.h"
#include "common/row_bits.h"

namespace rankd::cuda {

class CudaRowCache final : public TableCache {
 public:
  // A cache of `capacity` rows (at least 1, at most the table's) of the [rows, row_bytes] table
  // the device reads at `table` (mapped host memory) and the host at `host_table` (the same
  // bytes). Its lookups enter the grace periods AddReaders gives it while they run.
  static StatusOr<std::unique_ptr<CudaRowCache>> Create(int device, const void* table, const void* host_table,
                                                        int64_t rows, int64_t row_bytes, int64_t capacity);
  // The device memory such a cache takes: its index and its slots.
  static size_t DeviceBytes(int64_t rows, int64_t row_bytes, int64_t capacity);
  ~CudaRowCache() override;
  CudaRowCache(const CudaRowCache&) = delete;
  CudaRowCache& operator=(const CudaRowCache&) = delete;

  RowCacheView view() const;

  int64_t capacity() const override { return capacity_; }
  uint64_t Claim() override;
  void Release(uint64_t claim) override;
  bool Claimed(uint64_t claim) const override;
  Status Apply(std::span<const Fill> fills, uint64_t claim) override;
  // The runs of a model that reads this cache enter `readers`: Apply waits for them too, until
  // RemoveReaders (which waits for an Apply in progress, so `readers` may go right after).
  void AddReaders(GracePeriod* readers);
  void RemoveReaders(GracePeriod* readers);
  std::span<const int64_t> rows_of_slots() const override { return row_of_slot_; }

  // Which rows are cached, as the host last knew (a bit each); the table as the host reads it, and
  // its shape.
  const RowBits& cached_rows() const { return *cached_rows_; }
  const uint8_t* host_table() const { return host_table_; }
  int64_t rows() const { return rows_; }
  int64_t row_bytes() const { return row_bytes_; }
  Gathered gathered() const override;
  // Counts misses a run gathered (placed_ids.h). Thread-safe.
  void CountGathered(uint64_t staged, uint64_t unstaged) const {
    gathered_staged_.fetch_add(staged, std::memory_order_relaxed);
    gathered_unstaged_.fetch_add(unstaged, std::memory_order_relaxed);
  }
  // The host time one run spent placing one input's ids (Gathered::seconds). Thread-safe.
  void RecordGatherTime(double seconds) const;

 private:
  CudaRowCache() = default;
  // Applies fills whose slots are distinct and whose rows differ from their slots' (at most
  // kStagedFills of them).
  Status ApplyDistinct(std::span<const Fill> fills) RANKD_REQUIRES(apply_mu_);

  static constexpr int64_t kStagedFills = 65536;

  int device_ = 0;
  const void* table_ = nullptr;
  const uint8_t* host_table_ = nullptr;
  std::unique_ptr<RowBits> cached_rows_;
  mutable std::atomic<uint64_t> gathered_staged_{0}, gathered_unstaged_{0};  // CountGathered
  mutable Mutex gather_mu_;
  mutable LatencyHistogram gather_seconds_ RANKD_GUARDED_BY(gather_mu_);  // RecordGatherTime
  int64_t rows_ = 0, row_bytes_ = 0, capacity_ = 0;
  // Held through an Apply: the claims and the readers change between Applies.
  mutable Mutex apply_mu_;
  CacheClaims claims_ RANKD_GUARDED_BY(apply_mu_);
  std::vector<GracePeriod*> readers_ RANKD_GUARDED_BY(apply_mu_);
  DeviceBuffer index_, slots_;
  PinnedBuffer staged_;  // the rows (int64) and slots (int64) of the fills being applied
  cudaStream_t stream_ = nullptr;
  std::vector<int64_t> row_of_slot_;
};

// The kernels of Apply's steps, on `stream` (row_cache.cu). `rows` and `slots` are device-readable.
Status LaunchUnmapRows(cudaStream_t stream, int32_t* slot_of_row, const int64_t* rows, int64_t n);
Status LaunchCopyRows(cudaStream_t stream, const void* table, int64_t row_bytes, void* slots_base, const int64_t* rows,
                      const int64_t* slots, int64_t n);
Status LaunchMapRows(cudaStream_t stream, int32_t* slot_of_row, const int64_t* rows, const int64_t* slots, int64_t n);

}  // namespace rankd::cuda

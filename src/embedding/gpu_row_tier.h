// GpuRowTier: a GPU cache in front of one table on disk (docs/embedding.md, "Tables on disk": the
// GPU cache over the host cache over the file).
//
// The table's hot rows are kept in device slots (backend/row_slots.h). DiskTables::Stage asks
// SlotOf for each distinct row a run reads: a row with a slot is neither read nor staged, and its
// ids become Encode(slot), below -1, which the lookup kernels read from the slots (as a staged row:
// RowCacheView::staged, backend/cuda/device.h); the other rows are staged as before. Keep (the
// keeper's step, DiskTables' keeper thread) feeds the cache policy (embedding/cache_policy.h,
// W-TinyLFU as every cache here) with the distinct rows runs offered and moves rows in and out,
// off the request path:
//   1. the rows leaving their slots lose them on the host (SlotOf answers -1 for them);
//   2. the grace period passes: every run that may have seen the old slots (it entered readers()
//      before its first SlotOf and leaves once its kernels have finished) is waited for;
//   3. the rows coming in are read (through the table's host cache) and written into their slots,
//      and only then given them.
// A run thus reads a slot only while it holds the row the run saw there. Offers past kMaxOffers
// waiting are dropped: the policy samples the traffic, never slows it.
//
// Across runs (embedding/host_cache_hotness.h): Snapshot gives the rows the slots hold with their
// counts, saved beside the host caches' rows; WarmFrom hands a new run's cache the rows saved, which
// the next Keep moves in as it moves any row (the host cache, warmed first, then holds them).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/row_slots.h"
#include "common/grace_period.h"
#include "common/mutex.h"
#include "embedding/cache_policy.h"
#include "embedding/front_row_cache.h"
#include "rankd/status.h"

namespace rankd {

struct GpuRowTierStats {
  int64_t capacity = 0;       // rows the device slots hold at most
  int64_t cached = 0;         // rows they hold now
  uint64_t device_bytes = 0;  // the slots'
  uint64_t host_bytes = 0;    // the host's index (an int32 a table row) and the policy's bookkeeping
  uint64_t hits = 0;          // distinct rows of runs found in a slot (not staged)
  uint64_t inserted = 0, evicted = 0;
  uint64_t warmed = 0;               // of the rows inserted, those moved in from a hotness snapshot
  uint64_t offers = 0, dropped = 0;  // runs' rows offered to the policy, and offers dropped while it was busy
};

class GpuRowTier final : public FrontRowCache {
 public:
  // Reads `rows` of the table into `out` (row_bytes each, side by side): the table's host cache.
  using RowReader = std::function<Status(std::span<const int64_t> rows, uint8_t* out)>;
  // Bytes of slot memory an encoded id counts in (kStagedUnitBytes of backend/cuda/device.h).
  static constexpr int64_t kUnitBytes = 16;

  // A cache of `slots` (its capacity, at least 1) over a table of `table_rows` rows of
  // `slots->row_bytes()` bytes (a multiple of kUnitBytes), whose rows `read` gives.
  static StatusOr<std::unique_ptr<GpuRowTier>> Create(std::unique_ptr<RowSlots> slots, int64_t table_rows,
                                                      RowReader read);
  GpuRowTier(const GpuRowTier&) = delete;
  GpuRowTier& operator=(const GpuRowTier&) = delete;

  // The slot holding `row`, or -1. Call it between entering readers() and leaving it after the
  // run's kernels are done.
  int32_t SlotOf(int64_t row) const { return slot_of_[static_cast<size_t>(row)].load(std::memory_order_acquire); }
  // The id a lookup reads slot `slot` by.
  int64_t Encode(int32_t slot) const { return -2 - static_cast<int64_t>(slot) * units_per_row_; }
  GracePeriod& readers() { return readers_; }
  // A run's distinct rows, `hits` of them found in slots: counted, and queued for the policy unless
  // kMaxOffers wait already.
  void Offer(std::vector<int64_t> rows, uint64_t hits);
  // Feeds the queued offers to the policy and applies its changes (the keeper's step). Thread-safe
  // against runs, Snapshot and itself.
  Status Keep();
  // FrontRowCache. WarmFrom: the first capacity() rows are moved into empty slots by the next Keep,
  // their counts raised to the saved ones (CachePolicy::WarmStart), before the offers waiting.
  // Snapshot: the policy's counts; it waits for a Keep in progress.
  int64_t capacity() const override { return static_cast<int64_t>(row_of_slot_.size()); }
  bool Holds(int64_t row) const override { return SlotOf(row) >= 0; }
  std::vector<std::pair<uint64_t, int>> Snapshot() const override;
  void WarmFrom(std::vector<std::pair<uint64_t, int>> hottest) override;
  uint64_t changes() const override;
  // Blocks until no rows given by WarmFrom wait for Keep.
  void WaitUntilWarm() const;
  // Whether every slot holds a row.
  bool full() const { return cached_.load(std::memory_order_relaxed) == static_cast<int64_t>(row_of_slot_.size()); }

  const void* device_slots() const { return slots_->device(); }
  int64_t row_bytes() const { return slots_->row_bytes(); }
  GpuRowTierStats stats() const;

 private:
  GpuRowTier() = default;
  // Moves the policy's changes into the slots (Keep's steps 1-3).
  Status ApplyChanges() RANKD_REQUIRES(keep_mu_);

  static constexpr size_t kMaxOffers = 16;  // two runs of a table of 8 shards

  std::unique_ptr<RowSlots> slots_;
  int64_t table_rows_ = 0, units_per_row_ = 0;
  RowReader read_;
  std::unique_ptr<std::atomic<int32_t>[]> slot_of_;  // by table row
  mutable Mutex keep_mu_;                            // held by Keep
  std::vector<int64_t> row_of_slot_;                 // Keep's: -1 for an empty slot
  std::unique_ptr<CachePolicy> policy_ RANKD_PT_GUARDED_BY(keep_mu_);
  GracePeriod readers_;

  mutable Mutex mu_;
  mutable std::condition_variable warm_cv_;
  std::vector<std::vector<int64_t>> offers_ RANKD_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, int>> warm_ RANKD_GUARDED_BY(mu_);
  bool warming_ RANKD_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> hits_{0}, offered_{0}, dropped_{0}, inserted_{0}, evicted_{0}, warmed_{0};
  std::atomic<int64_t> cached_{0};
  std::atomic<uint64_t> policy_bytes_{0};  // policy_->bytes() after the last Keep
};

}  // namespace rankd

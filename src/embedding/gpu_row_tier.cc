#include "embedding/gpu_row_tier.h"

#include <algorithm>
#include <string>
#include <utility>

#include "backend/table_cache.h"

namespace rankd {

StatusOr<std::unique_ptr<GpuRowTier>> GpuRowTier::Create(std::unique_ptr<RowSlots> slots, int64_t table_rows,
                                                         RowReader read) {
  if (!slots || slots->slots() < 1 || table_rows < 1 || slots->row_bytes() <= 0 || slots->row_bytes() % kUnitBytes != 0)
    return InvalidArgument("a GPU cache of a table on disk needs rows of whole " + std::to_string(kUnitBytes) +
                           "-byte units and at least one slot");
  const int64_t capacity = std::min(slots->slots(), table_rows);
  const int64_t units = slots->row_bytes() / kUnitBytes;
  // Encoded ids name a slot's first unit below 2^30 (RowCacheView's staged rows).
  if (capacity > INT32_MAX || capacity * units >= (int64_t{1} << 30) - 1)
    return InvalidArgument("a GPU cache of a table on disk of " + std::to_string(capacity) + " rows of " +
                           std::to_string(slots->row_bytes()) + " bytes: at most 16 GiB");
  std::unique_ptr<GpuRowTier> tier(new GpuRowTier());
  tier->slots_ = std::move(slots);
  tier->table_rows_ = table_rows;
  tier->units_per_row_ = units;
  tier->read_ = std::move(read);
  tier->slot_of_ = std::make_unique<std::atomic<int32_t>[]>(static_cast<size_t>(table_rows));
  for (int64_t r = 0; r < table_rows; ++r) tier->slot_of_[static_cast<size_t>(r)].store(-1, std::memory_order_relaxed);
  tier->row_of_slot_.assign(static_cast<size_t>(capacity), -1);
  CachePolicyOptions options;
  options.capacity = capacity;
  MutexLock keeping(tier->keep_mu_);
  tier->policy_ = std::make_unique<CachePolicy>(options);
  tier->policy_bytes_ = tier->policy_->bytes();
  return tier;
}

void GpuRowTier::Offer(std::vector<int64_t> rows, uint64_t hits) {
  hits_.fetch_add(hits, std::memory_order_relaxed);
  if (rows.empty()) return;
  {
    MutexLock lock(mu_);
    if (offers_.size() >= kMaxOffers) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    offers_.push_back(std::move(rows));
  }
  offered_.fetch_add(1, std::memory_order_relaxed);
}

Status GpuRowTier::Keep() {
  MutexLock keeping(keep_mu_);
  std::vector<std::vector<int64_t>> offers;
  std::vector<std::pair<uint64_t, int>> warm;
  bool warming = false;
  {
    MutexLock lock(mu_);
    offers.swap(offers_);
    warm.swap(warm_);
    warming = warming_;
  }
  if (!warm.empty()) {
    const int64_t before = policy_->size();
    policy_->WarmStart(warm);
    warmed_.fetch_add(static_cast<uint64_t>(policy_->size() - before), std::memory_order_relaxed);
  }
  for (const std::vector<int64_t>& rows : offers) {
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i + kAhead < rows.size()) policy_->Prefetch(static_cast<uint64_t>(rows[i + kAhead]));
      policy_->Access(static_cast<uint64_t>(rows[i]));
    }
  }
  const Status applied = ApplyChanges();
  policy_bytes_.store(policy_->bytes(), std::memory_order_relaxed);
  if (warming) {  // done, well or not: nothing waits for it longer
    MutexLock lock(mu_);
    warming_ = !warm_.empty();
    warm_cv_.notify_all();
  }
  return applied;
}

void GpuRowTier::WarmFrom(std::vector<std::pair<uint64_t, int>> hottest) {
  std::erase_if(hottest, [&](const auto& r) { return r.first >= static_cast<uint64_t>(table_rows_); });
  hottest.resize(std::min(hottest.size(), row_of_slot_.size()));
  if (hottest.empty()) return;
  MutexLock lock(mu_);
  warm_ = std::move(hottest);
  warming_ = true;
}

void GpuRowTier::WaitUntilWarm() const {
  MutexLock lock(mu_);
  while (warming_) warm_cv_.wait(lock.native());
}

uint64_t GpuRowTier::changes() const {
  return inserted_.load(std::memory_order_relaxed) + evicted_.load(std::memory_order_relaxed);
}

std::vector<std::pair<uint64_t, int>> GpuRowTier::Snapshot() const {
  MutexLock keeping(keep_mu_);
  return policy_->Snapshot();
}

Status GpuRowTier::ApplyChanges() {
  if (!policy_->has_changes()) return Status::Ok();
  std::vector<TableCache::Fill> fills;
  for (const CachePolicy::Change& c : policy_->TakeChanges()) fills.push_back({c.slot, static_cast<int64_t>(c.key)});
  const std::vector<TableCache::Fill> last = LastFills(fills, row_of_slot_);
  if (last.empty()) return Status::Ok();
  // 1 and 2: the leaving rows lose their slots, then every run that may have seen them is waited for.
  bool leaving = false;
  for (const auto& [slot, row] : last) {
    const int64_t old = row_of_slot_[static_cast<size_t>(slot)];
    if (old < 0) continue;
    slot_of_[static_cast<size_t>(old)].store(-1, std::memory_order_release);
    row_of_slot_[static_cast<size_t>(slot)] = -1;
    cached_.fetch_sub(1, std::memory_order_relaxed);
    evicted_.fetch_add(1, std::memory_order_relaxed);
    leaving = true;
  }
  if (leaving) readers_.WaitForEarlierReaders();
  // 3: the new rows read, written into their slots, and only then given them.
  const auto row_bytes = static_cast<size_t>(slots_->row_bytes());
  constexpr size_t kBatch = 4096;
  std::vector<int64_t> rows, slots;
  std::vector<uint8_t> bytes;
  for (size_t begin = 0; begin < last.size(); begin += kBatch) {
    const size_t n = std::min(last.size() - begin, kBatch);
    rows.clear();
    slots.clear();
    for (size_t i = begin; i < begin + n; ++i) {
      slots.push_back(last[i].slot);
      rows.push_back(last[i].row);
    }
    bytes.resize(n * row_bytes);
    RANKD_RETURN_IF_ERROR(read_(rows, bytes.data()));
    RANKD_RETURN_IF_ERROR(slots_->Write(slots, bytes.data()));
    for (size_t i = 0; i < n; ++i) {
      row_of_slot_[static_cast<size_t>(slots[i])] = rows[i];
      slot_of_[static_cast<size_t>(rows[i])].store(static_cast<int32_t>(slots[i]), std::memory_order_release);
    }
    cached_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    inserted_.fetch_add(n, std::memory_order_relaxed);
  }
  return Status::Ok();
}

GpuRowTierStats GpuRowTier::stats() const {
  GpuRowTierStats s;
  s.capacity = static_cast<int64_t>(row_of_slot_.size());
  s.cached = cached_.load(std::memory_order_relaxed);
  s.device_bytes = static_cast<uint64_t>(slots_->slots() * slots_->row_bytes());
  s.host_bytes = static_cast<uint64_t>(table_rows_) * sizeof(int32_t) + policy_bytes_.load(std::memory_order_relaxed) +
                 row_of_slot_.size() * sizeof(int64_t);
  s.hits = hits_.load(std::memory_order_relaxed);
  s.inserted = inserted_.load(std::memory_order_relaxed);
  s.evicted = evicted_.load(std::memory_order_relaxed);
  s.warmed = warmed_.load(std::memory_order_relaxed);
  s.offers = offered_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace rankd

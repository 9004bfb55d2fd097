#include "embedding/cache_policy.h"

#include <algorithm>
#include <climits>

#include "rankd/status.h"

namespace rankd {

CachePolicy::CachePolicy(const CachePolicyOptions& options)
    : capacity_(std::clamp<int64_t>(options.capacity, 1, INT32_MAX)),
      sample_(std::max(options.sample, 1)),
      record_changes_(options.record_changes),
      sketch_(options.sketch_counters > 0 ? options.sketch_counters : 4 * capacity_,
              options.reset_period > 0 ? options.reset_period : 30 * capacity_),
      slot_of_(capacity_),
      rng_(options.seed) {
  key_of_.reserve(static_cast<size_t>(capacity_));
}

bool CachePolicy::Access(uint64_t key) {
  sketch_.Add(key);
  if (slot_of_.Contains(key)) return true;
  if (size() < capacity_) {
    Insert(key, size(), std::nullopt);
    return false;
  }
  // The least frequent of a few sampled cached keys is the victim; the missed key must beat it.
  // The samples' keys are read first and then their counts, so that the reads overlap.
  constexpr int kMostSamples = 32;
  const int samples = std::min(sample_, kMostSamples);
  std::uniform_int_distribution<int64_t> any_slot(0, capacity_ - 1);
  int64_t slots[kMostSamples];
  for (int i = 0; i < samples; ++i) {
    slots[i] = any_slot(rng_);
    sketch_.Prefetch(key_of_[static_cast<size_t>(slots[i])]);
  }
  int64_t victim = slots[0];
  int victim_count = sketch_.Estimate(key_of_[static_cast<size_t>(victim)]);
  for (int i = 1; i < samples; ++i) {
    const int count = sketch_.Estimate(key_of_[static_cast<size_t>(slots[i])]);
    if (count < victim_count) victim = slots[i], victim_count = count;
  }
  if (sketch_.Estimate(key) <= victim_count) return false;
  const uint64_t evicted = key_of_[static_cast<size_t>(victim)];
  slot_of_.Erase(evicted);
  Insert(key, victim, evicted);
  return false;
}

void CachePolicy::Insert(uint64_t key, int64_t slot, std::optional<uint64_t> evicted) {
  if (slot == static_cast<int64_t>(key_of_.size())) {
    key_of_.push_back(key);
  } else {
    key_of_[static_cast<size_t>(slot)] = key;
  }
  slot_of_.Insert(key, slot);
  if (record_changes_) changes_.push_back({key, slot, evicted});
}

std::vector<CachePolicy::Change> CachePolicy::TakeChanges() {
  std::vector<Change> taken;
  taken.swap(changes_);
  return taken;
}

std::vector<std::pair<uint64_t, int>> CachePolicy::Counts() const {
  std::vector<std::pair<uint64_t, int>> hot;
  hot.reserve(key_of_.size());
  for (uint64_t key : key_of_) hot.emplace_back(key, sketch_.Estimate(key));
  return hot;
}

std::vector<std::pair<uint64_t, int>> CachePolicy::Snapshot() const {
  std::vector<std::pair<uint64_t, int>> hot = Counts();
  std::stable_sort(hot.begin(), hot.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return hot;
}

void CachePolicy::WarmStart(std::span<const std::pair<uint64_t, int>> hottest) {
  for (const auto& [key, count] : hottest) {
    if (size() >= capacity_ && !slot_of_.Contains(key)) continue;
    sketch_.Raise(key, count / 2);
    if (!slot_of_.Contains(key)) Insert(key, size(), std::nullopt);
  }
}

void CachePolicy::Adopt(std::span<const int64_t> keys_of_slots) {
  if (size() != 0) return;
  for (int64_t key : keys_of_slots) {
    if (key < 0 || size() >= capacity_ || slot_of_.Contains(static_cast<uint64_t>(key))) break;
    sketch_.Add(static_cast<uint64_t>(key));
    slot_of_.Insert(static_cast<uint64_t>(key), static_cast<int64_t>(key_of_.size()));
    key_of_.push_back(static_cast<uint64_t>(key));
  }
}

}  // namespace rankd

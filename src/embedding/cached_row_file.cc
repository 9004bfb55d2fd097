#include "embedding/cached_row_file.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <unordered_map>
#include <vector>

namespace rankd {

StatusOr<std::unique_ptr<CachedRowFile>> CachedRowFile::Create(std::unique_ptr<RowFile> file, int64_t capacity) {
  if (!file) return InvalidArgument("a cached row file needs a file");
  if (capacity < 1) return InvalidArgument("row file '" + file->path() + "': a host cache of at least one row");
  const size_t bytes = static_cast<size_t>(capacity) * file->row_bytes();
  std::unique_ptr<uint8_t[]> slots(new (std::nothrow) uint8_t[bytes]);
  if (!slots) {
    return ResourceExhausted("row file '" + file->path() + "': no host memory for a cache of " +
                             std::to_string(capacity) + " rows (" + std::to_string(bytes) + " bytes)");
  }
  return std::unique_ptr<CachedRowFile>(new CachedRowFile(std::move(file), capacity, std::move(slots)));
}

CachedRowFile::CachedRowFile(std::unique_ptr<RowFile> file, int64_t capacity, std::unique_ptr<uint8_t[]> slots)
    : file_(std::move(file)),
      capacity_(capacity),
      row_bytes_(file_->row_bytes()),
      policy_(CachePolicyOptions{.capacity = capacity}),
      slots_(std::move(slots)) {}

size_t CachedRowFile::host_bytes() const {
  MutexLock lock(mu_);
  return static_cast<size_t>(capacity_) * row_bytes_ + policy_.bytes();
}

CachedRowFileStats CachedRowFile::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

int64_t CachedRowFile::cached_rows() const {
  MutexLock lock(mu_);
  return policy_.size();
}

std::vector<std::pair<uint64_t, int>> CachedRowFile::Snapshot() const {
  MutexLock lock(mu_);
  return policy_.Counts();
}

int64_t CachedRowFile::room() const {
  MutexLock lock(mu_);
  return capacity_ - policy_.size();
}

int64_t CachedRowFile::Admit(std::span<const std::pair<uint64_t, int>> rows, std::span<const uint8_t* const> bytes) {
  MutexLock lock(mu_);
  policy_.WarmStart(rows);
  int64_t admitted = 0;
  for (const CachePolicy::Change& change : policy_.TakeChanges()) {
    const auto at = std::lower_bound(rows.begin(), rows.end(), change.key,
                                     [](const std::pair<uint64_t, int>& r, uint64_t key) { return r.first < key; });
    std::memcpy(slots_.get() + static_cast<size_t>(change.slot) * row_bytes_,
                bytes[static_cast<size_t>(at - rows.begin())], row_bytes_);
    ++stats_.warmed;
    ++admitted;
  }
  return admitted;
}

Status CachedRowFile::Read(std::span<const int64_t> ids, void* out) {
  auto* to = static_cast<uint8_t*>(out);
  RANKD_RETURN_IF_ERROR(file_->CheckIds(ids));
  // Hits copied under the lock (slots change only under it); the rest listed for the file.
  std::vector<size_t> missed;
  {
    MutexLock lock(mu_);
    // Each row costs a few misses of the CPU's caches that depend on one another (its index
    // entry, then its slot's bytes) and one beside them (its counters): a row's index and counters
    // are fetched kIndexAhead rows before its copy, its slot's bytes kRowAhead rows before, so the
    // memory serves many rows at once (docs/log/benchmarks.md, "Host-cache hits prefetched").
    constexpr size_t kIndexAhead = 16, kRowAhead = 8;
    for (size_t i = 0; i < std::min(ids.size(), kIndexAhead); ++i) policy_.Prefetch(static_cast<uint64_t>(ids[i]));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i + kIndexAhead < ids.size()) policy_.Prefetch(static_cast<uint64_t>(ids[i + kIndexAhead]));
      if (i + kRowAhead < ids.size()) {
        if (const std::optional<int64_t> ahead = policy_.SlotOf(static_cast<uint64_t>(ids[i + kRowAhead]))) {
          const uint8_t* row = slots_.get() + static_cast<size_t>(*ahead) * row_bytes_;
          for (size_t b = 0; b < row_bytes_; b += 64) __builtin_prefetch(row + b);
        }
      }
      const uint64_t key = static_cast<uint64_t>(ids[i]);
      if (std::optional<int64_t> slot = policy_.Hit(key)) {  // counted as a hit
        std::memcpy(to + i * row_bytes_, slots_.get() + static_cast<size_t>(*slot) * row_bytes_, row_bytes_);
        ++stats_.hits;
      } else {
        missed.push_back(i);
      }
    }
    stats_.lookups += ids.size();
  }
  if (missed.empty()) return Status::Ok();
  // The misses from the file, each distinct row once, then to every position that asked for it.
  std::unordered_map<int64_t, size_t> first;  // row -> its place among the distinct misses
  std::vector<int64_t> rows;
  for (size_t i : missed) {
    if (first.emplace(ids[i], rows.size()).second) rows.push_back(ids[i]);
  }
  std::vector<uint8_t> read(rows.size() * row_bytes_);
  const auto began = std::chrono::steady_clock::now();
  RANKD_RETURN_IF_ERROR(file_->Read(rows, read.data()));
  const double read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  for (size_t i : missed) std::memcpy(to + i * row_bytes_, read.data() + first[ids[i]] * row_bytes_, row_bytes_);
  // Offered to the cache: the policy admits each or not; an admitted row takes its slot now.
  MutexLock lock(mu_);
  stats_.reads.Add(read_seconds);
  for (size_t k = 0; k < rows.size(); ++k) {
    policy_.Access(static_cast<uint64_t>(rows[k]));
    for (const CachePolicy::Change& change : policy_.TakeChanges()) {
      const size_t from = first.at(static_cast<int64_t>(change.key));
      std::memcpy(slots_.get() + static_cast<size_t>(change.slot) * row_bytes_, read.data() + from * row_bytes_,
                  row_bytes_);
      ++stats_.inserted;
      if (change.evicted) ++stats_.evicted;
    }
  }
  return Status::Ok();
}

}  // namespace rankd

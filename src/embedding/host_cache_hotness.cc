#include "embedding/host_cache_hotness.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>

#include "common/log.h"
#include "embedding/cache_policy.h"
#include "embedding/hotness_snapshot.h"

namespace rankd {
namespace {

constexpr uint64_t kRowMask = (uint64_t{1} << 48) - 1;
constexpr size_t kChunk = 16384;  // rows read at a time by the warm start
constexpr size_t kWarmingThreads = 4;

}  // namespace

HostCacheHotness::HostCacheHotness(std::vector<std::string> names, std::vector<std::vector<CachedRowFile*>> tables,
                                   std::string path, double save_every_s, std::vector<FrontRowCache*> front)
    : names_(std::move(names)),
      tables_(std::move(tables)),
      front_([&] {
        front.resize(tables_.size());  // none for tables past the list
        return std::move(front);
      }()),
      path_(std::move(path)),
      save_every_s_(save_every_s),
      reads_(tables_.size()) {
  thread_ = std::thread([this] { Loop(); });
}

HostCacheHotness::~HostCacheHotness() {
  stopping_ = true;
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (Status saved = Save(); !saved.ok()) LogError(saved.ToString());
}

RowFileStats HostCacheHotness::reads(size_t t) const {
  MutexLock lock(reads_mu_);
  return t < reads_.size() ? reads_[t] : RowFileStats{};
}

void HostCacheHotness::WaitForWarmStart() {
  MutexLock lock(mu_);
  while (!warm_) cv_.wait(lock.native());
}

uint64_t HostCacheHotness::Changes() const {
  uint64_t changes = 0;
  for (const auto& shards : tables_) {
    for (const CachedRowFile* shard : shards) {
      const CachedRowFileStats s = shard->stats();
      changes += s.inserted + s.evicted + s.warmed;
    }
  }
  for (const FrontRowCache* front : front_) changes += front ? front->changes() : 0;
  return changes;
}

void HostCacheHotness::Loop() {
  WarmStart();
  {
    MutexLock saved(save_mu_);
    saved_changes_ = Changes();  // the caches now hold what the file says
  }
  MutexLock lock(mu_);
  warm_ = true;
  cv_.notify_all();
  const auto every =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(save_every_s_));
  auto next = std::chrono::steady_clock::now() + every;
  while (!stop_) {
    cv_.wait_until(lock.native(), next);
    if (stop_ || std::chrono::steady_clock::now() < next) continue;
    lock.Unlock();
    if (Status saved = Save(); !saved.ok()) LogError(saved.ToString());
    lock.Lock();
    next = std::chrono::steady_clock::now() + every;
  }
}

void HostCacheHotness::WarmStart() {
  StatusOr<HotnessSnapshot> saved = LoadHotness(path_);
  if (saved.status().code() == StatusCode::kNotFound) return;  // a first run
  if (!saved.ok()) {
    LogWarning("hotness snapshot " + path_ + ": " + saved.status().ToString() +
               " (the host caches of the tables on disk start cold)");
    return;
  }
  // Each table's rows, most frequent first as saved; rows past its end dropped.
  HotKeys keys = RekeyHotness(std::move(*saved), names_);
  std::vector<std::vector<std::pair<uint64_t, int>>> per_table(tables_.size());
  for (const auto& [key, count] : keys) {
    const auto t = static_cast<size_t>(key >> 48);
    if (t >= tables_.size() || tables_[t].empty()) continue;
    const uint64_t row = key & kRowMask;
    if (row < static_cast<uint64_t>(tables_[t].front()->file().rows())) per_table[t].emplace_back(row, count);
  }
  keys = HotKeys();
  // A few tables at a time, each on a reader of its own.
  std::atomic<size_t> next{0};
  auto warm = [&] {
    for (size_t t = next++; t < tables_.size() && !stopping_; t = next++) {
      if (per_table[t].empty()) continue;
      if (Status warmed = WarmTable(t, per_table[t]); !warmed.ok()) {
        LogWarning("hotness snapshot " + path_ + ": " + warmed.ToString() + " (that table's host cache starts cold)");
      }
      if (FrontRowCache* front = front_[t]) {  // its first rows, now in the host cache
        const auto n = std::min(per_table[t].size(), static_cast<size_t>(front->capacity()));
        front->WarmFrom({per_table[t].begin(), per_table[t].begin() + static_cast<std::ptrdiff_t>(n)});
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < std::min(kWarmingThreads, tables_.size()); ++i) threads.emplace_back(warm);
  warm();
  for (std::thread& th : threads) th.join();
}

Status HostCacheHotness::WarmTable(size_t t, const std::vector<std::pair<uint64_t, int>>& hottest) {
  const std::vector<CachedRowFile*>& shards = tables_[t];
  // The hottest rows each shard has room for, then all of them in file order.
  std::vector<int64_t> room(shards.size());
  for (size_t s = 0; s < shards.size(); ++s) room[s] = shards[s]->room();
  std::vector<std::pair<uint64_t, int>> wanted;
  for (const auto& [row, count] : hottest) {
    const size_t s = RowShard(static_cast<int64_t>(row), shards.size());
    if (room[s] > 0) {
      --room[s];
      wanted.emplace_back(row, count);
    }
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(
      std::unique(wanted.begin(), wanted.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
      wanted.end());
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<RowFile> reader, shards.front()->file().Reopen());
  const size_t row_bytes = reader->row_bytes();
  std::vector<int64_t> ids;
  std::vector<uint8_t> bytes;
  std::vector<std::vector<std::pair<uint64_t, int>>> shard_rows(shards.size());
  std::vector<std::vector<const uint8_t*>> shard_bytes(shards.size());
  for (size_t at = 0; at < wanted.size() && !stopping_; at += kChunk) {
    const size_t n = std::min(kChunk, wanted.size() - at);
    ids.resize(n);
    for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(wanted[at + i].first);
    bytes.resize(n * row_bytes);
    const Status read = reader->Read(ids, bytes.data());
    {
      MutexLock lock(reads_mu_);
      reads_[t] = reader->stats();  // the table's reader: its counts are the warm start's
    }
    RANKD_RETURN_IF_ERROR(read);
    for (size_t s = 0; s < shards.size(); ++s) shard_rows[s].clear(), shard_bytes[s].clear();
    for (size_t i = 0; i < n; ++i) {  // ascending within each shard, as Admit wants them
      const size_t s = RowShard(ids[i], shards.size());
      shard_rows[s].push_back(wanted[at + i]);
      shard_bytes[s].push_back(bytes.data() + i * row_bytes);
    }
    for (size_t s = 0; s < shards.size(); ++s) {
      if (!shard_rows[s].empty()) shards[s]->Admit(shard_rows[s], shard_bytes[s]);
    }
  }
  return Status::Ok();
}

Status HostCacheHotness::Save() {
  MutexLock lock(save_mu_);
  const uint64_t changes = Changes();
  if (changes == saved_changes_) return Status::Ok();
  // The rows of the caches in front, then every host-cache shard's rows not among them, each part most frequent
  // first over all tables (counts are 0-255: placed by part and count in one pass).
  HotKeys all;
  std::vector<uint8_t> part;  // 0: a row of a cache in front, 1: a host cache's
  std::array<size_t, 2 * 256 + 1> at{};
  auto add = [&](size_t t, uint64_t row, int count, uint8_t p) {
    const int c = std::clamp(count, 0, 255);
    all.emplace_back(RowKey(static_cast<int>(t), static_cast<int64_t>(row)), c);
    part.push_back(p);
    ++at[p * size_t{256} + static_cast<size_t>(256 - c)];
  };
  for (size_t t = 0; t < tables_.size(); ++t) {
    const FrontRowCache* front = front_[t];
    if (front) {
      for (const auto& [row, count] : front->Snapshot()) add(t, row, count, 0);
    }
    for (const CachedRowFile* shard : tables_[t]) {
      for (const auto& [row, count] : shard->Snapshot()) {
        // A row the cache in front holds now is saved once, as its (one it took since its snapshot, twice).
        if (!front || !front->Holds(static_cast<int64_t>(row))) add(t, row, count, 1);
      }
    }
  }
  for (size_t c = 1; c < at.size(); ++c) at[c] += at[c - 1];
  HotKeys hot(all.size());
  for (size_t i = all.size(); i-- > 0;)
    hot[--at[part[i] * size_t{256} + static_cast<size_t>(256 - all[i].second)]] = all[i];
  all = HotKeys();
  RANKD_RETURN_IF_ERROR(SaveHotness(path_, names_, hot));
  saved_changes_ = changes;
  return Status::Ok();
}

}  // namespace rankd

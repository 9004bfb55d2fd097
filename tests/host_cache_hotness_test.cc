// The host caches of tables on disk kept warm across runs (embedding/host_cache_hotness.h): a new
// run's caches start with the rows the last run's held, read from the file, every row the file's;
// a smaller cache takes part of them; a file that is not a snapshot and rows past a table start
// cold; rows read while the warm start runs are the file's; each table finds its own rows by name
// when tables were added or reordered; the snapshot is saved while the caches change.
#include "embedding/host_cache_hotness.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "embedding/cache_policy.h"
#include "embedding/hotness_snapshot.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 20000;
constexpr size_t kRowBytes = 48;
constexpr size_t kShards = 4;

class HostCacheHotnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tag = std::to_string(getpid());
    path_ = fs::current_path() / ("host_cache_hotness_test_" + tag + ".bin");
    snapshot_ = (fs::current_path() / ("host_cache_hotness_test_" + tag + ".hot")).string();
    std::mt19937_64 rng(5);
    bytes_.resize(kRows * kRowBytes);
    for (auto& b : bytes_) b = static_cast<char>(rng());
    std::ofstream(path_, std::ios::binary).write(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
  }
  void TearDown() override {
    fs::remove(path_);
    fs::remove(snapshot_);
  }

  // One table's cache in kShards shards of `capacity` rows each.
  std::vector<std::unique_ptr<CachedRowFile>> OpenShards(int64_t capacity) const {
    std::vector<std::unique_ptr<CachedRowFile>> shards;
    for (size_t s = 0; s < kShards; ++s) {
      auto file = RowFile::Open(path_.string(), 0, kRows, kRowBytes);
      EXPECT_TRUE(file.ok()) << file.status().ToString();
      auto cached = CachedRowFile::Create(std::move(*file), capacity);
      EXPECT_TRUE(cached.ok()) << cached.status().ToString();
      shards.push_back(std::move(*cached));
    }
    return shards;
  }
  static std::vector<std::vector<CachedRowFile*>> Tables(const std::vector<std::unique_ptr<CachedRowFile>>& shards) {
    std::vector<CachedRowFile*> table;
    for (const auto& s : shards) table.push_back(s.get());
    return {table};
  }

  // Reads `ids` through their shards, checking every row against the file.
  void ExpectRows(const std::vector<std::unique_ptr<CachedRowFile>>& shards, const std::vector<int64_t>& ids) const {
    for (int64_t id : ids) {
      std::vector<char> out(kRowBytes);
      const int64_t one[] = {id};
      Status s = shards[RowShard(id, kShards)]->Read(one, out.data());
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(0, std::memcmp(out.data(), bytes_.data() + id * kRowBytes, kRowBytes)) << "row " << id;
    }
  }

  // Skewed traffic: rank r with weight 1 / (r + 1), hot rows spread over the file.
  // `shift` moves the hot rows.
  void Traffic(const std::vector<std::unique_ptr<CachedRowFile>>& shards, int batches, int64_t shift = 0) const {
    std::vector<double> weights(kRows);
    for (int64_t r = 0; r < kRows; ++r) weights[r] = 1.0 / static_cast<double>(r + 1);
    std::discrete_distribution<int64_t> rank(weights.begin(), weights.end());
    std::mt19937_64 rng(9);
    for (int b = 0; b < batches; ++b) {
      std::vector<std::vector<int64_t>> per_shard(kShards);
      for (int i = 0; i < 256; ++i) {
        const int64_t id = (rank(rng) * 7919 + shift) % kRows;
        per_shard[RowShard(id, kShards)].push_back(id);
      }
      for (size_t s = 0; s < kShards; ++s) {
        std::vector<char> out(per_shard[s].size() * kRowBytes);
        ASSERT_TRUE(shards[s]->Read(per_shard[s], out.data()).ok());
      }
    }
  }

  // A first run of skewed traffic through caches of 250 rows a shard, saved as it ends: the rows it held.
  std::set<uint64_t> FirstRun() const {
    auto shards = OpenShards(250);
    HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
    Traffic(shards, 60);
    return Cached(shards);
  }

  static std::set<uint64_t> Cached(const std::vector<std::unique_ptr<CachedRowFile>>& shards) {
    std::set<uint64_t> rows;
    for (const auto& s : shards) {
      for (const auto& [row, count] : s->Snapshot()) rows.insert(row);
    }
    return rows;
  }

  fs::path path_;
  std::string snapshot_;
  std::string bytes_;
};

// A cache in front of the host cache (FrontRowCache, as a GPU cache is): the rows it was made with,
// and the rows a warm start hands it.
class RecordingFront final : public FrontRowCache {
 public:
  RecordingFront(int64_t capacity, HotKeys rows) : capacity_(capacity), rows_(std::move(rows)) {
    for (const auto& [row, count] : rows_) held_.insert(static_cast<int64_t>(row));
  }
  int64_t capacity() const override { return capacity_; }
  bool Holds(int64_t row) const override { return held_.contains(row); }
  HotKeys Snapshot() const override { return rows_; }
  void WarmFrom(HotKeys hottest) override { given = std::move(hottest); }
  uint64_t changes() const override { return rows_.size(); }
  HotKeys given;  // read once the warm start is done (HostCacheHotness::WaitForWarmStart)

 private:
  int64_t capacity_;
  HotKeys rows_;
  std::set<int64_t> held_;
};

// The rows of a cache in front are saved ahead of the host cache's, however low their counts (the
// host cache no longer sees their lookups), each row once; the next run's host cache reads them
// first and the cache in front is handed back its capacity's worth of the first rows: its own.
TEST_F(HostCacheHotnessTest, TheRowsOfACacheInFrontAreSavedFirstAndHandedBack) {
  HotKeys front_rows;
  std::set<uint64_t> host_rows;
  {
    auto shards = OpenShards(250);
    Traffic(shards, 60);
    host_rows = Cached(shards);
    ASSERT_GT(host_rows.size(), 500u);
    // 200 rows the host cache does not hold, seen once; and one it does, which is saved once, as the front's.
    for (int64_t r = 0; front_rows.size() < 199; ++r) {
      if (!host_rows.contains(static_cast<uint64_t>(r))) front_rows.emplace_back(r, 1);
    }
    front_rows.emplace_back(*host_rows.begin(), 1);
    RecordingFront front(static_cast<int64_t>(front_rows.size()), front_rows);
    HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600, {&front});
    hotness.WaitForWarmStart();
    Traffic(shards, 5, 5000);  // changes since the warm start: saved as it goes
    host_rows = Cached(shards);
  }
  auto saved = LoadHotness(snapshot_);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  std::set<uint64_t> all;
  for (const auto& [key, count] : saved->keys) EXPECT_TRUE(all.insert(key).second) << "row " << key << " twice";
  ASSERT_GE(saved->keys.size(), front_rows.size());
  for (size_t i = 0; i < front_rows.size(); ++i) EXPECT_EQ(saved->keys[i].first, front_rows[i].first) << i;
  for (size_t i = front_rows.size(); i < saved->keys.size(); ++i) EXPECT_TRUE(host_rows.contains(saved->keys[i].first));

  // Room for 400 rows in the host cache: the front's 200 go in first, and come back to the front.
  auto shards = OpenShards(100);
  RecordingFront front(static_cast<int64_t>(front_rows.size()), {});
  HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600, {&front});
  hotness.WaitForWarmStart();
  const std::set<uint64_t> cached = Cached(shards);
  for (const auto& [row, count] : front_rows) EXPECT_TRUE(cached.contains(row)) << "row " << row;
  ASSERT_EQ(front.given.size(), front_rows.size());
  for (size_t i = 0; i < front_rows.size(); ++i) EXPECT_EQ(front.given[i].first, front_rows[i].first) << i;
}

TEST_F(HostCacheHotnessTest, ANewRunStartsWithTheRowsTheLastHeld) {
  std::set<uint64_t> held;
  {
    auto shards = OpenShards(250);
    HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
    hotness.WaitForWarmStart();  // no file yet: a first run, cold
    EXPECT_EQ(Cached(shards).size(), 0u);
    Traffic(shards, 60);
    held = Cached(shards);
    ASSERT_GT(held.size(), 500u);
  }  // saved as it goes
  auto saved = LoadHotness(snapshot_);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->tables, std::vector<std::string>{"t"});
  ASSERT_EQ(saved->keys.size(), held.size());
  for (size_t i = 1; i < saved->keys.size(); ++i) ASSERT_GE(saved->keys[i - 1].second, saved->keys[i].second) << i;

  auto shards = OpenShards(250);
  HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
  hotness.WaitForWarmStart();
  EXPECT_EQ(Cached(shards), held);
  uint64_t warmed = 0, read_before = 0;
  for (const auto& s : shards) warmed += s->stats().warmed, read_before += s->file().stats().rows;
  EXPECT_EQ(warmed, held.size());
  EXPECT_EQ(read_before, 0u);  // read by the warm start's own reader, not the shards'
  EXPECT_EQ(hotness.reads(0).rows, held.size());
  EXPECT_GT(hotness.reads(0).bytes_read, 0u);
  // Every row it holds is served from the cache, and is the file's.
  ExpectRows(shards, std::vector<int64_t>(held.begin(), held.end()));
  uint64_t hits = 0, read_after = 0;
  for (const auto& s : shards) hits += s->stats().hits, read_after += s->file().stats().rows;
  EXPECT_EQ(hits, held.size());
  EXPECT_EQ(read_after, 0u);
}

// Requests are served while the warm start moves rows in: reads from two threads race the warm
// start's admissions (ThreadSanitizer runs this), and every row read is the file's.
TEST_F(HostCacheHotnessTest, RowsReadWhileTheWarmStartMovesRowsInAreTheFiles) {
  const std::set<uint64_t> held = FirstRun();
  auto shards = OpenShards(250);
  HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
  std::thread other([&] { Traffic(shards, 40, 3); });
  ExpectRows(shards, std::vector<int64_t>(held.begin(), held.end()));
  Traffic(shards, 40);
  other.join();
  hotness.WaitForWarmStart();
  const std::set<uint64_t> now = Cached(shards);
  EXPECT_EQ(now.size(), kShards * 250);  // full: the warm start and the traffic filled it
  ExpectRows(shards, std::vector<int64_t>(now.begin(), now.end()));
}

TEST_F(HostCacheHotnessTest, ASmallerCacheTakesPartOfTheRowsAndEveryRowIsTheFiles) {
  const std::set<uint64_t> held = FirstRun();
  auto shards = OpenShards(40);
  HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
  hotness.WaitForWarmStart();
  const std::set<uint64_t> now = Cached(shards);
  EXPECT_EQ(now.size(), kShards * 40);
  for (uint64_t row : now) EXPECT_TRUE(held.count(row)) << row;
  ExpectRows(shards, std::vector<int64_t>(now.begin(), now.end()));
}

TEST_F(HostCacheHotnessTest, AFileThatIsNotASnapshotStartsColdAndIsReplaced) {
  std::ofstream(snapshot_) << "not a snapshot";
  {
    auto shards = OpenShards(100);
    HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
    hotness.WaitForWarmStart();
    EXPECT_EQ(Cached(shards).size(), 0u);
    Traffic(shards, 10);
  }
  auto saved = LoadHotness(snapshot_);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_GT(saved->keys.size(), 0u);
}

TEST_F(HostCacheHotnessTest, RowsPastTheTableAndOtherTablesAreDropped) {
  HotKeys keys = {{RowKey(0, kRows), 200}, {RowKey(0, kRows + 5), 100}, {RowKey(3, 7), 100},
                  {RowKey(0, 11), 50},     {RowKey(0, 12), 40},         {RowKey(0, kRows - 1), 10}};
  ASSERT_TRUE(SaveHotness(snapshot_, std::vector<std::string>{"t"}, keys).ok());
  auto shards = OpenShards(100);
  {
    HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 3600);
    hotness.WaitForWarmStart();
    EXPECT_EQ(Cached(shards), (std::set<uint64_t>{11, 12, kRows - 1}));
    ExpectRows(shards, {11, 12, kRows - 1});
  }
  // Nothing changed but hits: the file is left as it was.
  auto saved = LoadHotness(snapshot_);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->keys, keys);
}

TEST_F(HostCacheHotnessTest, EachTableIsFoundByItsNameAfterTablesAreAddedAndReordered) {
  std::set<uint64_t> held_a, held_b;
  {
    auto a = OpenShards(100), b = OpenShards(100);
    HostCacheHotness hotness({"a", "b"}, {Tables(a)[0], Tables(b)[0]}, snapshot_, 3600);
    hotness.WaitForWarmStart();
    Traffic(a, 30);
    Traffic(b, 30, 5000);
    held_a = Cached(a);
    held_b = Cached(b);
    ASSERT_GT(held_a.size(), 200u);
    ASSERT_NE(held_a, held_b);
  }
  auto c = OpenShards(100), b = OpenShards(100), a = OpenShards(100);
  HostCacheHotness hotness({"c", "b", "a"}, {Tables(c)[0], Tables(b)[0], Tables(a)[0]}, snapshot_, 3600);
  hotness.WaitForWarmStart();
  EXPECT_EQ(Cached(c).size(), 0u);  // new: cold
  EXPECT_EQ(Cached(b), held_b);
  EXPECT_EQ(Cached(a), held_a);
  ExpectRows(a, std::vector<int64_t>(held_a.begin(), held_a.end()));
}

TEST_F(HostCacheHotnessTest, SavesWhileTheCachesChange) {
  auto shards = OpenShards(100);
  HostCacheHotness hotness({"t"}, Tables(shards), snapshot_, 0.05);
  hotness.WaitForWarmStart();
  Traffic(shards, 20);
  const size_t cached = Cached(shards).size();
  StatusOr<HotnessSnapshot> saved = NotFound("");
  for (int i = 0; i < 200; ++i) {
    saved = LoadHotness(snapshot_);
    if (saved.ok() && saved->keys.size() == cached) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->keys.size(), cached);
}

}  // namespace
}  // namespace rankd

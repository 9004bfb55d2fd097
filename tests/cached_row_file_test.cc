// A host cache of a table's rows in front of its file (embedding/cached_row_file.h): every row is
// the file's, whether it came from the cache or the disk; repeated rows come from the cache; a scan
// of cold rows does not flush the hot ones; threads read at once.
#include "embedding/cached_row_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

namespace rankd {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 20000;
constexpr size_t kRowBytes = 48;

class CachedRowFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::current_path() / ("cached_row_file_test_" + std::to_string(getpid()) + ".bin");
    std::mt19937_64 rng(11);
    bytes_.resize(kRows * kRowBytes);
    for (auto& b : bytes_) b = static_cast<char>(rng());
    std::ofstream(path_, std::ios::binary).write(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
  }
  void TearDown() override { fs::remove(path_); }

  std::unique_ptr<CachedRowFile> Open(int64_t capacity) {
    auto file = RowFile::Open(path_.string(), 0, kRows, kRowBytes);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    auto cached = CachedRowFile::Create(std::move(*file), capacity);
    EXPECT_TRUE(cached.ok()) << cached.status().ToString();
    return std::move(*cached);
  }

  void ExpectRows(CachedRowFile& cache, const std::vector<int64_t>& ids) const {
    std::vector<char> out(ids.size() * kRowBytes);
    Status s = cache.Read(ids, out.data());
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(out.data() + i * kRowBytes, bytes_.data() + ids[i] * kRowBytes, kRowBytes))
          << "row " << ids[i] << " at " << i;
    }
  }

  // `n` ids with a Zipf-like skew over the table (rank r drawn with weight 1 / (r + 1)).
  static std::vector<int64_t> Skewed(size_t n, std::mt19937_64& rng) {
    static const std::vector<double> weights = [] {
      std::vector<double> w(kRows);
      for (int64_t r = 0; r < kRows; ++r) w[r] = 1.0 / static_cast<double>(r + 1);
      return w;
    }();
    std::discrete_distribution<int64_t> rank(weights.begin(), weights.end());
    std::vector<int64_t> ids(n);
    for (auto& id : ids) id = (rank(rng) * 7919) % kRows;  // hot rows spread over the file
    return ids;
  }

  fs::path path_;
  std::string bytes_;
};

TEST_F(CachedRowFileTest, EveryRowIsTheFilesAndHotRowsComeFromTheCache) {
  auto cache = Open(1000);  // 5% of the rows
  std::mt19937_64 rng(3);
  for (int b = 0; b < 40; ++b) ExpectRows(*cache, Skewed(512, rng));
  CachedRowFileStats s = cache->stats();
  EXPECT_EQ(s.lookups, 40u * 512);
  EXPECT_LE(cache->cached_rows(), 1000);
  EXPECT_GT(cache->cached_rows(), 0);
  EXPECT_GT(s.inserted, 0u);
  // Under this skew 5% of the rows serve well over a third of the lookups once warm.
  const uint64_t before_hits = s.hits, before_lookups = s.lookups;
  for (int b = 0; b < 20; ++b) ExpectRows(*cache, Skewed(512, rng));
  s = cache->stats();
  const double warm = static_cast<double>(s.hits - before_hits) / static_cast<double>(s.lookups - before_lookups);
  std::printf("hit ratio once warm, 5%% of the rows cached: %.3f\n", warm);
  EXPECT_GT(warm, 0.35);
  // A batch of rows all cached reads nothing from the disk.
  std::vector<int64_t> held;
  for (int64_t id = 0; id < kRows && held.size() < 100; ++id) {
    std::vector<int64_t> one = {id};
    std::vector<char> row(kRowBytes);
    const uint64_t batches = cache->file().stats().batches;
    ASSERT_TRUE(cache->Read(one, row.data()).ok());
    if (cache->file().stats().batches == batches) held.push_back(id);  // it was a hit
  }
  ASSERT_FALSE(held.empty());
  const uint64_t batches = cache->file().stats().batches;
  const LatencyHistogram reads = cache->stats().reads;
  ExpectRows(*cache, held);
  EXPECT_EQ(cache->file().stats().batches, batches);
  // Each read of the file is timed, one a Read that missed; a Read of cached rows times none.
  EXPECT_EQ(cache->stats().reads.count, reads.count);
  EXPECT_EQ(reads.count, batches);
  EXPECT_EQ(reads.AtMost(LatencyHistogram::kBounds.size()), reads.count);
  EXPECT_GT(reads.sum_seconds, 0.0);
}

// Durations fall into the first bucket whose bound they do not exceed; AtMost is cumulative, as
// Prometheus's `le` buckets are, and sums add.
TEST(LatencyHistogram, BucketsAreUpperBoundsAndCumulative) {
  LatencyHistogram h;
  for (double s : {0.00005, 0.0001, 0.0003, 0.002, 0.7, 3.0}) h.Add(s);
  EXPECT_EQ(h.count, 6u);
  EXPECT_EQ(h.counts[0], 2u);  // 50 µs and 100 µs: at most 0.0001
  EXPECT_EQ(h.AtMost(0), 2u);
  EXPECT_EQ(h.AtMost(2), 3u);                                     // and 300 µs, at most 0.0005
  EXPECT_EQ(h.AtMost(4), 4u);                                     // and 2 ms, at most 0.0025
  EXPECT_EQ(h.AtMost(LatencyHistogram::kBounds.size() - 1), 5u);  // and 0.7 s, at most 1 s
  EXPECT_EQ(h.AtMost(LatencyHistogram::kBounds.size()), 6u);      // +Inf
  LatencyHistogram twice = h;
  twice += h;
  EXPECT_EQ(twice.count, 12u);
  EXPECT_EQ(twice.AtMost(0), 4u);
  EXPECT_DOUBLE_EQ(twice.sum_seconds, 2 * h.sum_seconds);
}

TEST_F(CachedRowFileTest, AScanOfColdRowsDoesNotFlushTheHotOnes) {
  auto cache = Open(200);
  std::vector<int64_t> hot(100);
  for (size_t i = 0; i < hot.size(); ++i) hot[i] = static_cast<int64_t>(i) * 37;
  for (int round = 0; round < 20; ++round) ExpectRows(*cache, hot);
  const uint64_t hits_before = cache->stats().hits;
  std::vector<int64_t> scan;
  for (int64_t id = 10000; id < 15000; ++id) scan.push_back(id);  // 5,000 rows seen once
  ExpectRows(*cache, scan);
  ExpectRows(*cache, hot);
  EXPECT_GE(cache->stats().hits - hits_before, 90u);  // the hot rows (100 lookups) stayed cached
}

TEST_F(CachedRowFileTest, RepeatsInABatchAndThreadsAtOnce) {
  auto cache = Open(500);
  ExpectRows(*cache, {5, 5, 5, 19999, 0, 5, 0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(50 + t);
      for (int b = 0; b < 30; ++b) ExpectRows(*cache, Skewed(256, rng));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache->stats().lookups, 7u + 4 * 30 * 256);
  EXPECT_LE(cache->cached_rows(), 500);
}

TEST_F(CachedRowFileTest, BadIdsAndSizesAreClearErrors) {
  auto cache = Open(10);
  std::vector<char> out(2 * kRowBytes);
  std::vector<int64_t> ids = {1, kRows};
  Status s = cache->Read(ids, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside its 20000 rows"), std::string::npos) << s.ToString();
  EXPECT_EQ(cache->stats().lookups, 0u);  // refused before anything was read
  auto file = RowFile::Open(path_.string(), 0, kRows, kRowBytes);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(CachedRowFile::Create(std::move(*file), 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rankd

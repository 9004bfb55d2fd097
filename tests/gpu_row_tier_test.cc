// A GPU cache in front of a table on disk (embedding/gpu_row_tier.h), its device slots here in host
// memory: every id a run's staging rewrites names either its staged row or a slot holding the
// table's row for it, while the keeper moves rows in and out and runs stage at once.
#include "embedding/gpu_row_tier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "embedding/disk_tables.h"
#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;
using testing::GraphBuilder;

// RowSlots in host memory, read as the kernels would read device memory.
class HostRowSlots final : public RowSlots {
 public:
  HostRowSlots(int64_t slots, int64_t row_bytes)
      : bytes_(static_cast<size_t>(slots * row_bytes)), slots_(slots), row_bytes_(row_bytes) {}
  const void* device() const override { return bytes_.data(); }
  int64_t slots() const override { return slots_; }
  int64_t row_bytes() const override { return row_bytes_; }
  Status Write(std::span<const int64_t> slots, const uint8_t* rows) override {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] < 0 || slots[i] >= slots_) return InvalidArgument("slot out of range");
      std::memcpy(bytes_.data() + slots[i] * row_bytes_, rows + i * static_cast<size_t>(row_bytes_),
                  static_cast<size_t>(row_bytes_));
    }
    ++writes;
    return Status::Ok();
  }
  std::atomic<int> writes{0};

 private:
  std::vector<uint8_t> bytes_;
  int64_t slots_, row_bytes_;
};

std::string DiskDir(const std::string& name) {
  const fs::path dir = fs::path(testing::WriteTempFile("gpu_row_tier/" + name + "/x", "")).parent_path();
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove(entry.path());
  return dir.string();
}

constexpr int64_t kRows = 20000, kWidth = 4;

// A table of kRows x kWidth FP32 read by the bags of a concatenation (or `op`), on disk with a GPU
// cache of `cache_rows` rows in HostRowSlots (*slots).
struct OnDisk {
  Tensor rows;
  std::unique_ptr<DiskTables> disk;
  HostRowSlots* slots = nullptr;
};

OnDisk OpenOnDisk(int64_t cache_rows, bool keeper, const std::string& name,
                  const std::string& op = "ConcatEmbeddingBags", Status* error = nullptr,
                  const std::string& snapshot = "", int64_t host_cache_bytes = int64_t{1} << 20) {
  std::mt19937_64 rng(7);
  OnDisk o;
  o.rows = testing::RandomTable(DType::kF32, kRows, kWidth, rng);
  GraphBuilder g;
  const int table = g.Const("t", o.rows);
  const int ids = g.Input("ids", DType::kI64, {-1, 5});
  if (op == "ConcatEmbeddingBags") {
    g.Output(g.Op(op, {table, ids}, {{"parts", std::vector<int64_t>{2}}, {"modes", std::vector<int64_t>{0}}}));
  } else {
    g.Output(g.Op(op, {table, ids}));
  }
  Graph graph = g.graph();
  std::vector<TableInfo> tables = FindTables(graph);
  for (TableInfo& t : tables) t.tier = TableTier::kDisk, t.cache_rows = cache_rows;
  DiskTablesOptions options;
  options.directory = DiskDir(name);
  options.cache_bytes = host_cache_bytes;
  options.snapshot_path = snapshot;
  options.gpu_keeper = keeper;
  options.make_slots = [&o](int64_t slots, int64_t row_bytes) -> StatusOr<std::unique_ptr<RowSlots>> {
    auto s = std::make_unique<HostRowSlots>(slots, row_bytes);
    o.slots = s.get();
    return std::unique_ptr<RowSlots>(std::move(s));
  };
  auto disk = DiskTables::Open(graph, tables, options);
  if (error) *error = disk.status();
  if (disk.ok()) o.disk = std::move(*disk);
  return o;
}

// Checks that every id of `values` reads its table row from a run's inputs `staged` (its rewritten
// ids, then the staged rows), through `slots` for an id below -1. Returns the ids read from slots.
int64_t ExpectRowsRead(const OnDisk& o, const std::vector<int64_t>& values, const StagedRun& staged,
                       const std::string& what) {
  EXPECT_EQ(staged.inputs.size(), 2u) << what;
  if (staged.inputs.size() != 2) return 0;
  const int64_t* rewritten = staged.inputs[0].data<int64_t>();
  const auto* staged_rows = staged.inputs[1].data<float>();
  const auto* slot_bytes = static_cast<const uint8_t*>(o.slots->device());
  int64_t from_slots = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float* want = o.rows.data<float>() + values[i] * kWidth;
    const float* got = nullptr;
    if (rewritten[i] >= 0) {
      got = staged_rows + rewritten[i] * kWidth;
    } else {
      EXPECT_LT(rewritten[i], -1) << what << ": id " << i;
      const int64_t unit = -2 - rewritten[i];
      got = reinterpret_cast<const float*>(slot_bytes + unit * GpuRowTier::kUnitBytes);
      ++from_slots;
    }
    for (int64_t d = 0; d < kWidth; ++d) {
      if (got[d] != want[d]) {
        ADD_FAILURE() << what << ": id " << i << " (row " << values[i] << ") reads " << got[d] << " at " << d
                      << ", the table holds " << want[d];
        return from_slots;
      }
    }
  }
  return from_slots;
}

std::vector<int64_t> ZipfIds(std::mt19937_64& rng, size_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) {  // about Zipf: a few hundred hot rows, a long tail
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    id = std::min<int64_t>(kRows - 1, static_cast<int64_t>(std::pow(static_cast<double>(kRows), u * u * u)) - 1);
  }
  return ids;
}

TEST(GpuRowTier, RowsTheCacheHoldsAreReadFromTheirSlotsAndNotStaged) {
  OnDisk o = OpenOnDisk(2000, /*keeper=*/false, "slots");
  ASSERT_TRUE(o.disk);
  ASSERT_NE(o.slots, nullptr);
  const std::map<size_t, const void*> slots = o.disk->gpu_row_slots();
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots.begin()->first, 1u);  // the graph's second input: the run's staged rows
  EXPECT_EQ(slots.begin()->second, o.slots->device());
  std::mt19937_64 rng(3);
  const std::vector<int64_t> values = ZipfIds(rng, 64 * 5);
  const std::vector<Tensor> inputs{Tensor::FromVector(DType::kI64, {64, 5}, values)};
  auto cold = o.disk->Stage(inputs, std::vector<int64_t>{320});
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(ExpectRowsRead(o, values, *cold, "cold"), 0);
  EXPECT_NE(cold->hold, nullptr);  // inside the cache's grace period until the run lets go
  cold->hold.reset();
  ASSERT_TRUE(o.disk->stats()[0].gpu_cache);
  EXPECT_EQ(o.disk->stats()[0].gpu.cached, 0);
  // The keeper takes the offered rows into empty slots (read through the host cache); the next run
  // reads them there.
  ASSERT_TRUE(o.disk->KeepGpuCaches().ok());
  EXPECT_GT(o.disk->stats()[0].gpu.cached, 0);
  EXPECT_GT(o.slots->writes.load(), 0);
  const DiskTableStats before = o.disk->stats()[0];
  auto warm = o.disk->Stage(inputs, std::vector<int64_t>{320});
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  const int64_t from_slots = ExpectRowsRead(o, values, *warm, "warm");
  EXPECT_GT(from_slots, 0);
  const DiskTableStats after = o.disk->stats()[0];
  EXPECT_GT(after.gpu.hits, 0u);
  // Rows held in slots are not asked of the host cache: every distinct row of the run is in one.
  EXPECT_EQ(after.lookups, before.lookups);
  EXPECT_EQ(after.gpu.hits - before.gpu.hits,
            static_cast<uint64_t>(std::set<int64_t>(values.begin(), values.end()).size()));
}

// Four threads stage runs of drifting Zipf ids and check every id's row while the keeper thread
// swaps the rows of a cache of 300 slots: no run reads a slot whose row changed under it.
TEST(GpuRowTier, RunsReadTheirRowsWhileTheKeeperSwapsThem) {
  OnDisk o = OpenOnDisk(300, /*keeper=*/true, "swaps");
  ASSERT_TRUE(o.disk);
  std::atomic<int64_t> from_slots{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int run = 0; run < 150; ++run) {
        std::vector<int64_t> values = ZipfIds(rng, 64 * 5);
        const int64_t shift = (run / 30) * 997;  // the hot set moves: rows leave their slots
        for (int64_t& v : values) v = (v + shift) % kRows;
        const std::vector<Tensor> inputs{Tensor::FromVector(DType::kI64, {64, 5}, values)};
        auto staged = o.disk->Stage(inputs, std::vector<int64_t>{320});
        ASSERT_TRUE(staged.ok()) << staged.status().ToString();
        from_slots += ExpectRowsRead(o, values, *staged, "thread " + std::to_string(t) + " run " + std::to_string(run));
        if (::testing::Test::HasFailure()) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const DiskTableStats s = o.disk->stats()[0];
  EXPECT_GT(from_slots.load(), 0);
  EXPECT_GT(s.gpu.evicted, 0u);  // rows did leave their slots meanwhile
  EXPECT_LE(s.gpu.cached, 300);
}

// A restarted model's GPU cache starts with the rows the last one held: they are saved ahead of the
// host cache's rows, the host cache reads them first, and the GPU cache's keeper moves them in from
// there (no read of the file), before any run offers a row.
TEST(GpuRowTier, ARestartedModelsGpuCacheStartsWithTheRowsTheLastHeld) {
  const std::string snapshot = DiskDir("hotness") + "/tables.hot";
  // A host cache of about 1,600 rows (58 bytes a row with its policy's), a GPU cache of 1,000.
  constexpr int64_t kHostBytes = 1600 * (kWidth * 4 + 42), kGpuRows = 1000;
  std::mt19937_64 rng(11);
  std::vector<int64_t> last;
  int64_t held = 0;
  uint64_t last_hits = 0;
  {
    OnDisk first = OpenOnDisk(kGpuRows, false, "first", "ConcatEmbeddingBags", nullptr, snapshot, kHostBytes);
    ASSERT_TRUE(first.disk);
    for (int run = 0; run < 40; ++run) {
      last = ZipfIds(rng, 64 * 5);
      const std::vector<Tensor> inputs{Tensor::FromVector(DType::kI64, {64, 5}, last)};
      const uint64_t hits = first.disk->stats()[0].gpu.hits;
      auto staged = first.disk->Stage(inputs, std::vector<int64_t>{320});
      ASSERT_TRUE(staged.ok()) << staged.status().ToString();
      last_hits = first.disk->stats()[0].gpu.hits - hits;
      staged->hold.reset();
      ASSERT_TRUE(first.disk->KeepGpuCaches().ok());
    }
    held = first.disk->stats()[0].gpu.cached;
    ASSERT_GT(held, kGpuRows / 2);
    ASSERT_GT(last_hits, 0u);
  }  // saved as the tables go
  ASSERT_TRUE(fs::exists(snapshot));
  const std::vector<Tensor> inputs{Tensor::FromVector(DType::kI64, {64, 5}, last)};
  {
    OnDisk second = OpenOnDisk(kGpuRows, false, "second", "ConcatEmbeddingBags", nullptr, snapshot, kHostBytes);
    ASSERT_TRUE(second.disk);
    second.disk->WaitForWarmStart();  // the host cache warm; without the keeper thread the GPU cache waits for Keep
    const DiskTableStats warm = second.disk->stats()[0];
    EXPECT_EQ(warm.gpu.cached, 0);
    EXPECT_GE(warm.warmed, static_cast<uint64_t>(held));
    ASSERT_TRUE(second.disk->KeepGpuCaches().ok());
    const DiskTableStats kept = second.disk->stats()[0];
    EXPECT_EQ(kept.gpu.cached, held);
    EXPECT_EQ(kept.gpu.warmed, static_cast<uint64_t>(held));
    EXPECT_EQ(kept.rows_read, warm.rows_read);  // every row the GPU cache took came from the host cache
    EXPECT_EQ(kept.hits - warm.hits, static_cast<uint64_t>(held));
    // The last run of the first model, again: its rows are read from the slots as they were then.
    auto staged = second.disk->Stage(inputs, std::vector<int64_t>{320});
    ASSERT_TRUE(staged.ok()) << staged.status().ToString();
    EXPECT_GT(ExpectRowsRead(second, last, *staged, "restarted"), 0);
    EXPECT_GE(second.disk->stats()[0].gpu.hits - kept.gpu.hits, last_hits * 9 / 10);
  }
  // With the keeper thread, the warm start waits for it to move the rows in.
  OnDisk third = OpenOnDisk(kGpuRows, true, "third", "ConcatEmbeddingBags", nullptr, snapshot, kHostBytes);
  ASSERT_TRUE(third.disk);
  third.disk->WaitForWarmStart();
  EXPECT_EQ(third.disk->stats()[0].gpu.warmed, static_cast<uint64_t>(held));
  EXPECT_EQ(third.disk->stats()[0].gpu.cached, held);
}

TEST(GpuRowTier, OnlyTheBagsOfAConcatenationReadAGpuCacheOfATableOnDisk) {
  Status error;
  OnDisk o = OpenOnDisk(100, false, "refused", "EmbeddingBag", &error);
  EXPECT_FALSE(o.disk);
  EXPECT_NE(error.message().find("cannot have a GPU cache"), std::string::npos) << error.ToString();
  EXPECT_NE(error.message().find("EmbeddingBag"), std::string::npos) << error.ToString();
  // Rows that are not whole 16-byte units cannot be named by a slot's id.
  auto odd = GpuRowTier::Create(std::make_unique<HostRowSlots>(4, 12), 100,
                                [](std::span<const int64_t>, uint8_t*) { return Status::Ok(); });
  EXPECT_FALSE(odd.ok());
}

}  // namespace
}  // namespace rankd

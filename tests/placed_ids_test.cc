// Placed ids (runtime/cuda/placed_ids.h): a run whose misses of cached tables the host gathers
// into staged rows before the launch scores exactly as with resident tables, whatever the caches
// hold, with room for every staged row, for a few or for none, while the keeper moves rows, in
// small launches and large ones; an id out of range still fails only its request, placed or not.
// The host's side (PlaceIds) is also checked alone, without a device.
#include <gtest/gtest.h>

#include <cstring>

#include "embedding/cache_keeper.h"
#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "common/row_bits.h"
#include "runtime/cuda/placed_ids.h"

namespace rankd {
namespace {

// Sets how ids are placed for the models loaded while it lives.
class Placing {
 public:
  Placing(int64_t from, size_t staged_bytes) : from_(cuda::PlacedIdsFrom()), staged_bytes_(cuda::StagedRowsBytes()) {
    cuda::SetPlacedIdsFrom(from);
    cuda::SetStagedRowsBytes(staged_bytes);
  }
  ~Placing() {
    cuda::SetPlacedIdsFrom(from_);
    cuda::SetStagedRowsBytes(staged_bytes_);
  }
  Placing(const Placing&) = delete;
  Placing& operator=(const Placing&) = delete;

 private:
  int64_t from_;
  size_t staged_bytes_;
};

struct Room {
  size_t bytes;
  const char* what;
};
// Room for every miss's row, for a few (256 bytes: four 64-byte rows of the zoo's DLRMs), none.
constexpr Room kRooms[] = {{size_t{64} << 20, "room for every row"}, {256, "room for a few rows"}, {0, "no room"}};

StatusOr<std::unique_ptr<Model>> LoadCached(const std::string& dir, const Model& resident, double fraction,
                                            const ModelOptions& options) {
  auto config = LoadModelConfig(dir);
  if (!config.ok()) return config.status();
  for (const TableInfo& t : resident.tables()) {
    if (t.lookups_only)
      config->table_cache_rows[t.name] =
          std::max<int64_t>(1, static_cast<int64_t>(fraction * static_cast<double>(t.rows())));
  }
  return Model::LoadFile(dir + "/1/model.onnx", *config, options);
}

// On the host alone: hits stay ids, misses become staged rows (-2 - their unit) while the room
// lasts and stay ids after, empty slots -1, ids past the table the table's end; at every width.
TEST(PlacedIds, MissesAreStagedWhileTheRoomLastsAndHitsStayIds) {
  constexpr int64_t kRows = 10, kRowBytes = 32;  // two units a row
  std::vector<uint8_t> table(kRows * kRowBytes);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint8_t>(i * 7 + 1);
  RowBits cached(kRows);
  cached.Set(2, true), cached.Set(5, true), cached.Set(9, true), cached.Set(9, false);
  EXPECT_TRUE(cached.Test(2) && cached.Test(5) && !cached.Test(9) && !cached.Test(3));
  const cuda::PlacedTable placed{&cached, table.data(), kRowBytes};
  const std::vector<int64_t> ids{3, 2, -1, -7, 12, 5, 3, 9};
  // 3 is staged at unit 0 and again at unit 2; the room (two rows) is then full and 9 stays an id.
  const std::vector<int64_t> want{-2, 2, -1, -1, kRows, 5, -4, 9};
  for (int widths = 0; widths < 3; ++widths) {
    const bool wide_from = widths < 2, wide_to = widths == 0;
    const std::vector<int32_t> narrow(ids.begin(), ids.end());
    alignas(16) uint8_t room_bytes[4 * kStagedUnitBytes] = {};
    cuda::StagedRoom room;
    room.host = room_bytes;
    room.units = 4;
    std::vector<int64_t> out64(ids.size());
    std::vector<int32_t> out32(ids.size());
    const cuda::PlacedCounts counts =
        cuda::PlaceIds(placed, wide_from ? static_cast<const void*>(ids.data()) : narrow.data(), wide_from,
                       wide_to ? static_cast<void*>(out64.data()) : out32.data(), wide_to, ids.size(), room);
    for (size_t j = 0; j < ids.size(); ++j) {
      EXPECT_EQ(wide_to ? out64[j] : out32[j], want[j]) << "id " << j << ", widths " << widths;
    }
    EXPECT_EQ(counts.ids, 5u);
    EXPECT_EQ(counts.staged, 2u);
    EXPECT_EQ(counts.unstaged, 1u);
    for (int unit : {0, 2}) {  // row 3 at both places
      EXPECT_EQ(std::memcmp(room_bytes + unit * kStagedUnitBytes, table.data() + 3 * kRowBytes, kRowBytes), 0) << unit;
    }
    // With the room used up, every miss stays an id.
    const cuda::PlacedCounts later = cuda::PlaceIds(placed, ids.data(), true, out64.data(), true, ids.size(), room);
    EXPECT_EQ(later.staged, 0u);
    EXPECT_EQ(later.unstaged, 3u);
    EXPECT_EQ(out64[0], 3);
    EXPECT_EQ(out64[6], 3);
  }
}

class PlacedZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(PlacedZooModel, ScoresAsWithResidentTables) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string name = GetParam(), dir = testing::SourcePath("models/zoo/" + name);
  ModelOptions options;
  options.backend = cuda;
  options.batching = 0;  // scores compared exactly
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<InferRequest> requests = testing::ZooRequests(name);
  std::vector<std::vector<InferOutput>> want;
  for (const InferRequest& r : requests) {
    auto out = (*resident)->Infer(r);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    want.push_back(std::move(*out));
  }
  for (const Room& room : kRooms) {
    for (double fraction : {0.0, 0.01, 0.5}) {
      const std::string what = name + ", caches of " + std::to_string(fraction) + " of the rows, " + room.what;
      const Placing placing(0, room.bytes);
      const cuda::PlacedCounts before = cuda::PlacedTotals();
      auto cached = LoadCached(dir, **resident, fraction, options);
      ASSERT_TRUE(cached.ok()) << what << ": " << cached.status().ToString();
      CacheKeeper* keeper = (*cached)->cache_keeper();
      ASSERT_NE(keeper, nullptr) << what;
      for (int round = 0; round < 2; ++round) {  // cold, then filled
        for (size_t i = 0; i < requests.size(); ++i) {
          auto got = (*cached)->Infer(requests[i]);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
          testing::ExpectIdenticalOutputs(*got, want[i], what + ", round " + std::to_string(round));
          ASSERT_TRUE(keeper->Flush().ok()) << what;
        }
      }
      const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(**cached, requests, want, 4, 30);
      EXPECT_EQ(at_once.failed, 0) << what;
      EXPECT_EQ(at_once.wrong, 0) << what;
      ASSERT_TRUE(keeper->Flush().ok()) << what;
      const cuda::PlacedCounts after = cuda::PlacedTotals();
      if (name != "dlrm_dcnv2" && name != "dlrm") continue;  // bags of one table per input: placed
      EXPECT_GT(after.ids, before.ids) << what;
      // The cold round misses every row but a one-row cache's.
      if (room.bytes == 0) {
        EXPECT_EQ(after.staged, before.staged) << what;
        EXPECT_GT(after.unstaged, before.unstaged) << what;
      } else {
        EXPECT_GT(after.staged, before.staged) << what;
      }
      if (room.bytes > 1024) {
        EXPECT_EQ(after.unstaged, before.unstaged) << what;
      }
      // Each cache counts its own (the model's metrics: rankd_table_cache_staged_rows).
      uint64_t staged = 0, unstaged = 0;
      for (const TableCacheStats& t : keeper->stats()) staged += t.gathered.staged, unstaged += t.gathered.unstaged;
      EXPECT_EQ(staged, after.staged - before.staged) << what;
      EXPECT_EQ(unstaged, after.unstaged - before.unstaged) << what;
      // And the time placing took, per run and input (rankd_table_cache_gather_seconds).
      uint64_t timed = 0;
      double seconds = 0;
      for (const TableCacheStats& t : keeper->stats()) {
        timed += t.gathered.seconds.count;
        seconds += t.gathered.seconds.sum_seconds;
      }
      EXPECT_GT(timed, 0u) << what;
      EXPECT_GT(seconds, 0.0) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, PlacedZooModel, ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "mmoe"));

TEST(PlacedIds, ALargeLaunchScoresAsWithResidentTables) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.batching = 0;
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  int64_t rows = INT64_MAX;
  for (const TableInfo& t : (*resident)->tables()) {
    if (t.lookups_only) rows = std::min(rows, t.rows());
  }
  const InferRequest request = testing::LargeW1Request(rows, 17);
  auto want = (*resident)->Infer(request);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const Room& room : kRooms) {
    const Placing placing(0, room.bytes);
    const cuda::PlacedCounts before = cuda::PlacedTotals();
    auto cached = LoadCached(dir, **resident, 0.1, options);
    ASSERT_TRUE(cached.ok()) << cached.status().ToString();
    for (int round = 0; round < 3; ++round) {
      auto got = (*cached)->Infer(request);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      testing::ExpectIdenticalOutputs(*got, *want, std::string(room.what) + ", round " + std::to_string(round));
      ASSERT_TRUE((*cached)->cache_keeper()->Flush().ok());
    }
    EXPECT_GT(cuda::PlacedTotals().ids, before.ids) << room.what;
  }
}

// An id out of range fails its own request with the usual error, cached table or not, its ids
// placed or not, and the next request scores.
TEST(PlacedIds, AnIdOutOfRangeFailsOnlyItsRequest) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok());
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  int64_t rows = 0;  // past every table's end, and far past it
  for (const TableInfo& t : (*resident)->tables()) rows = std::max(rows, t.rows());
  for (int64_t placed_from : {int64_t{-1}, int64_t{0}}) {
    const Placing placing(placed_from, size_t{1} << 20);
    auto cached = LoadCached(dir, **resident, 0.01, options);
    ASSERT_TRUE(cached.ok()) << cached.status().ToString();
    for (int64_t bad_id : {rows, int64_t{1} << 40}) {
      const std::string what = "id " + std::to_string(bad_id) + (placed_from < 0 ? "" : ", placed");
      InferRequest bad = requests[0];
      for (InferInput& in : bad.inputs) {
        if (in.data.dtype() == DType::kI64 && in.data.size() > 0) {
          in.data.data<int64_t>()[0] = bad_id;
          break;
        }
      }
      auto refused = (*cached)->Infer(bad);
      ASSERT_FALSE(refused.ok()) << what;
      EXPECT_NE(refused.status().message().find("out of range"), std::string::npos) << refused.status().ToString();
      auto want = (*resident)->Infer(requests[1]);
      auto got = (*cached)->Infer(requests[1]);
      ASSERT_TRUE(want.ok() && got.ok()) << what;
      testing::ExpectIdenticalOutputs(*got, *want, what + ", after the refusal");
    }
  }
}

}  // namespace
}  // namespace rankd
#endif  // RANKD_HAVE_CUDA

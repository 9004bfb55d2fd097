// Rows of tables in host memory gathered on the device (backend/cuda/host_row_gather.h): the gather
// itself against what the host computes (every id rewritten to a place holding its row, each
// distinct row placed once, empty slots and ids past the table kept as the lookup reads them, rows
// past the room left as ids), and every zoo model with its tables in host memory scoring exactly as
// with the rows read in place, with room for every row, for a few and for none, in small and
// large launches and beside cached tables, an id out of range failing only its request.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <set>

#include "embedding/cache_keeper.h"
#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/device.h"
#include "backend/cuda/host_row_gather.h"
#include "runtime/cuda/placed_ids.h"

namespace rankd {
namespace {

// Sets how ids are placed and gathered for the models loaded while it lives.
class Gathering {
 public:
  Gathering(int64_t from, size_t room_bytes) : from_(cuda::PlacedIdsFrom()), room_(cuda::GatheredRowsBytes()) {
    cuda::SetPlacedIdsFrom(from);
    cuda::SetGatheredRowsBytes(room_bytes);
  }
  ~Gathering() {
    cuda::SetPlacedIdsFrom(from_);
    cuda::SetGatheredRowsBytes(room_);
  }
  Gathering(const Gathering&) = delete;
  Gathering& operator=(const Gathering&) = delete;

 private:
  int64_t from_;
  size_t room_;
};

struct Room {
  size_t bytes;
  const char* what;
};
// Room for every row, for a few (256 bytes: four 64-byte rows of the zoo's DLRMs), none.
constexpr Room kRooms[] = {{size_t{64} << 20, "room for every row"}, {256, "room for a few rows"}, {0, "no room"}};

// Device memory freed when it goes.
struct DeviceBytes {
  void* at = nullptr;
  explicit DeviceBytes(size_t bytes) { EXPECT_EQ(cudaMalloc(&at, std::max<size_t>(bytes, 16)), cudaSuccess); }
  ~DeviceBytes() { cudaFree(at); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
};

// Two tables in mapped host memory, three inputs (two of them reading the second table, one of
// INT32 ids), with repeated rows, empty slots (-1 and -5) and ids past the table: after the
// gather every id that names a row is -2 - a place holding that row while the room lasts, each
// distinct row has one place, and the rest read as the lookup reads them.
TEST(HostRowGather, EveryIdNamesAPlaceHoldingItsRowWhileTheRoomLasts) {
  if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kRowsA = 1000, kRowsB = 300, kBytesA = 32, kBytesB = 64;
  uint8_t *host_a = nullptr, *host_b = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host_a), kRowsA * kBytesA, cudaHostAllocMapped), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host_b), kRowsB * kBytesB, cudaHostAllocMapped), cudaSuccess);
  std::mt19937_64 rng(5);
  for (int64_t i = 0; i < kRowsA * kBytesA; ++i) host_a[i] = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < kRowsB * kBytesB; ++i) host_b[i] = static_cast<uint8_t>(rng());
  void *table_a = nullptr, *table_b = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&table_a, host_a, 0), cudaSuccess);
  ASSERT_EQ(cudaHostGetDevicePointer(&table_b, host_b, 0), cudaSuccess);
  struct Ids {
    std::vector<int64_t> values;
    bool wide;
    const void* table;
    int64_t rows, row_bytes;
    const uint8_t* host;
  };
  auto random_ids = [&](size_t n, int64_t rows, int64_t hot) {
    std::vector<int64_t> v(n);
    std::uniform_int_distribution<int64_t> any(0, rows - 1), few(0, hot - 1), kind(0, 19);
    for (int64_t& id : v) {
      const int64_t k = kind(rng);
      id = k == 0 ? -1 : k == 1 ? -5 : k == 2 ? rows + k : k < 12 ? few(rng) : any(rng);
    }
    return v;
  };
  std::vector<Ids> inputs = {{random_ids(5000, kRowsA, 20), true, table_a, kRowsA, kBytesA, host_a},
                             {random_ids(3000, kRowsB, 10), false, table_b, kRowsB, kBytesB, host_b},
                             {random_ids(700, kRowsB, 10), true, table_b, kRowsB, kBytesB, host_b}};
  for (size_t room_units : {size_t{1} << 20, size_t{200}, size_t{0}}) {
    SCOPED_TRACE("room of " + std::to_string(room_units) + " units");
    std::vector<std::unique_ptr<DeviceBytes>> ids;
    std::vector<cuda::GatheredInput> gathered;
    for (const Ids& in : inputs) {
      const size_t width = in.wide ? 8 : 4;
      ids.push_back(std::make_unique<DeviceBytes>(in.values.size() * width));
      std::vector<int32_t> narrow(in.values.begin(), in.values.end());
      const void* from = in.wide ? static_cast<const void*>(in.values.data()) : narrow.data();
      ASSERT_EQ(cudaMemcpy(ids.back()->at, from, in.values.size() * width, cudaMemcpyHostToDevice), cudaSuccess);
      gathered.push_back(
          {ids.back()->at, static_cast<int64_t>(in.values.size()), in.wide, in.table, in.rows, in.row_bytes});
    }
    const size_t scratch_bytes = cuda::HostRowGatherScratchBytes(gathered);
    ASSERT_GT(scratch_bytes, 0u);
    DeviceBytes scratch(scratch_bytes), rows(room_units * kStagedUnitBytes);
    ASSERT_TRUE(cuda::GatherHostRows(gathered, scratch.at, scratch_bytes, rows.at, room_units, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> placed_rows(room_units * kStagedUnitBytes);
    if (room_units > 0) {
      ASSERT_EQ(cudaMemcpy(placed_rows.data(), rows.at, placed_rows.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    std::map<std::pair<const void*, int64_t>, int64_t> place_of;  // (table, row) -> its place
    std::set<int64_t> places;
    size_t left_as_ids = 0, rewritten = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Ids& in = inputs[k];
      std::vector<int64_t> got(in.values.size());
      if (in.wide) {
        ASSERT_EQ(cudaMemcpy(got.data(), ids[k]->at, got.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
      } else {
        std::vector<int32_t> narrow(got.size());
        ASSERT_EQ(cudaMemcpy(narrow.data(), ids[k]->at, narrow.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        got.assign(narrow.begin(), narrow.end());
      }
      for (size_t j = 0; j < got.size(); ++j) {
        const int64_t id = in.values[j];
        const std::string what =
            "input " + std::to_string(k) + ", id " + std::to_string(j) + " = " + std::to_string(id);
        if (id < 0) {
          ASSERT_EQ(got[j], -1) << what;
        } else if (id >= in.rows) {
          ASSERT_EQ(got[j], in.rows) << what;
        } else if (got[j] == id) {
          ++left_as_ids;  // past the room
        } else {
          ASSERT_LT(got[j], -1) << what;
          const int64_t unit = -2 - got[j];
          ASSERT_LE((unit * static_cast<int64_t>(kStagedUnitBytes) + in.row_bytes),
                    static_cast<int64_t>(placed_rows.size()))
              << what;
          ASSERT_EQ(std::memcmp(placed_rows.data() + unit * kStagedUnitBytes, in.host + id * in.row_bytes,
                                static_cast<size_t>(in.row_bytes)),
                    0)
              << what;
          auto [it, fresh] = place_of.emplace(std::make_pair(in.table, id), unit);
          ASSERT_EQ(it->second, unit) << what << ": one place per distinct row";
          if (fresh) {
            ASSERT_TRUE(places.insert(unit).second) << what << ": two rows at one place";
          }
          ++rewritten;
        }
      }
    }
    if (room_units == 0) {
      EXPECT_EQ(rewritten, 0u);
    } else if (room_units >= (size_t{1} << 20)) {
      EXPECT_EQ(left_as_ids, 0u);
      EXPECT_GT(rewritten, 0u);
    } else {
      EXPECT_GT(rewritten, 0u);
      EXPECT_GT(left_as_ids, 0u);
    }
  }
  cudaFreeHost(host_a);
  cudaFreeHost(host_b);
}

class HostRowGatherZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(HostRowGatherZooModel, ScoresAsWithRowsReadInPlace) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string name = GetParam(), dir = testing::SourcePath("models/zoo/" + name);
  ModelOptions options;
  options.backend = cuda;
  options.batching = 0;  // scores compared exactly
  options.table_gpu_budget_mb = 0;
  const std::vector<InferRequest> requests = testing::ZooRequests(name);
  std::vector<std::vector<InferOutput>> want;
  {
    const Gathering in_place(-1, size_t{64} << 20);
    auto host = Model::Load(dir, -1, options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    for (const InferRequest& r : requests) {
      auto out = (*host)->Infer(r);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      want.push_back(std::move(*out));
    }
  }
  for (const Room& room : kRooms) {
    const std::string what = name + ", " + room.what;
    const Gathering gathering(0, room.bytes);
    const uint64_t before = cuda::GatheredIdsTotal();
    auto host = Model::Load(dir, -1, options);
    ASSERT_TRUE(host.ok()) << what << ": " << host.status().ToString();
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < requests.size(); ++i) {
        auto got = (*host)->Infer(requests[i]);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
        testing::ExpectIdenticalOutputs(*got, want[i], what + ", round " + std::to_string(round));
      }
    }
    const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(**host, requests, want, 4, 30);
    EXPECT_EQ(at_once.failed, 0) << what;
    EXPECT_EQ(at_once.wrong, 0) << what;
    if (room.bytes == 0) {  // no room: nothing gathered
      EXPECT_EQ(cuda::GatheredIdsTotal(), before) << what;
    } else if (name == "dlrm_dcnv2" || name == "dlrm") {  // bags of one table per input: gathered
      EXPECT_GT(cuda::GatheredIdsTotal(), before) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, HostRowGatherZooModel, ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "mmoe"));

// W1 with half its tables cached (1% of their rows, the misses of a large run staged by the host)
// and the others held only in host memory (their rows gathered on the device): one run does both,
// and scores exactly as the same placement with every row read in place, while the keeper moves
// rows between rounds.
TEST(HostRowGather, RowsGatheredBesideMissesStagedByTheHost) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.batching = 0;
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const std::vector<TableInfo>& tables = (*resident)->tables();
  for (size_t i = 0; i < tables.size(); ++i) {
    if (!tables[i].lookups_only) continue;
    if (i % 2 == 0)
      config->table_tiers[tables[i].name] = "host";
    else
      config->table_cache_rows[tables[i].name] = std::max<int64_t>(1, tables[i].rows() / 100);
  }
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  std::vector<std::vector<InferOutput>> want;
  {
    const Gathering in_place(-1, 0);
    auto mixed = Model::LoadFile(dir + "/1/model.onnx", *config, options);
    ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
    for (const InferRequest& r : requests) {
      auto out = (*mixed)->Infer(r);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      want.push_back(std::move(*out));
    }
  }
  const Gathering gathering(0, size_t{64} << 20);
  const uint64_t gathered = cuda::GatheredIdsTotal();
  const cuda::PlacedCounts placed = cuda::PlacedTotals();
  auto mixed = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_NE((*mixed)->cache_keeper(), nullptr);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < requests.size(); ++i) {
      auto got = (*mixed)->Infer(requests[i]);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      testing::ExpectIdenticalOutputs(*got, want[i], "round " + std::to_string(round));
      ASSERT_TRUE((*mixed)->cache_keeper()->Flush().ok());
    }
  }
  EXPECT_GT(cuda::GatheredIdsTotal(), gathered);
  EXPECT_GT(cuda::PlacedTotals().ids, placed.ids);
}

// A W1 request of 700 rows (the large launch) whose ids come from 40 rows of each table: most repeat.
TEST(HostRowGather, ALargeLaunchOfRepeatedRowsScoresAsWithRowsReadInPlace) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.batching = 0;
  options.table_gpu_budget_mb = 0;
  StatusOr<std::vector<InferOutput>> want = Unavailable("not scored");
  InferRequest request;
  {
    const Gathering in_place(-1, 0);
    auto host = Model::Load(dir, -1, options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    int64_t rows = INT64_MAX;
    for (const TableInfo& t : (*host)->tables()) {
      if (t.lookups_only) rows = std::min(rows, t.rows());
    }
    request = testing::LargeW1Request(std::min<int64_t>(rows, 40), 23);
    want = (*host)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
  }
  for (const Room& room : kRooms) {
    const Gathering gathering(0, room.bytes);
    const uint64_t before = cuda::GatheredIdsTotal();
    auto host = Model::Load(dir, -1, options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    for (int round = 0; round < 3; ++round) {
      auto got = (*host)->Infer(request);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      testing::ExpectIdenticalOutputs(*got, *want, std::string(room.what) + ", round " + std::to_string(round));
    }
    if (room.bytes > 0) {
      EXPECT_GT(cuda::GatheredIdsTotal(), before) << room.what;
    }
  }
}

// An id out of range fails its own request with the usual error, gathered or not, and the next
// request scores as before.
TEST(HostRowGather, AnIdOutOfRangeFailsOnlyItsRequest) {
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
  options.table_gpu_budget_mb = 0;
  for (int64_t from : {int64_t{-1}, int64_t{0}}) {
    const Gathering gathering(from, size_t{1} << 20);
    auto host = Model::Load(dir, -1, options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    for (int64_t bad_id : {rows, int64_t{1} << 40}) {
      const std::string what = "id " + std::to_string(bad_id) + (from < 0 ? "" : ", gathered");
      InferRequest bad = requests[0];
      for (InferInput& in : bad.inputs) {
        if (in.data.dtype() == DType::kI64 && in.data.size() > 0) {
          in.data.data<int64_t>()[0] = bad_id;
          break;
        }
      }
      auto refused = (*host)->Infer(bad);
      ASSERT_FALSE(refused.ok()) << what;
      EXPECT_NE(refused.status().message().find("out of range"), std::string::npos) << refused.status().ToString();
      auto want = (*resident)->Infer(requests[1]);
      auto got = (*host)->Infer(requests[1]);
      ASSERT_TRUE(want.ok() && got.ok()) << what;
      testing::ExpectIdenticalOutputs(*got, *want, what + ", after the refusal");
    }
  }
}

}  // namespace
}  // namespace rankd
#endif  // RANKD_HAVE_CUDA

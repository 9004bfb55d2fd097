// How a CUDA run's inputs reach the device and its outputs come back (cuda_executor.h): a small
// run's moved by kernels through the pinned staging buffers' mapped addresses, or by copies; the
// error word cleared on the way in and brought back with the outputs in one copy. Both ways must
// score alike, uncaptured and replayed, and report a bad id in that run only. The input kernel
// reads each input where it lies (a tensor of the pinned pool) or from the staging buffer where
// the host packed it (heap memory, or an address not 16-byte aligned); a run with few bytes of
// floats gathers its ids by a second kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <span>
#include <string>

#include "compile/plan.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/mapped_copy.h"
#include "backend/cuda/pinned_pool.h"
#include "common/deferred_merge.h"
#include "common/host_allocator.h"
#include "frontend/shared_memory_regions.h"
#include "runtime/backends.h"
#include "runtime/cuda/cuda_executor.h"
#endif

namespace rankd {
namespace {

using testing::GraphBuilder;

#if RANKD_HAVE_CUDA

constexpr int64_t kRows = 8, kIds = 20, kTableRows = 50, kWidth = 16;

// Eight bags of a table, plus a dense input, through a product. Outputs: the product, the sum
// before it (unless `sum_out` is false), and the dense input itself (an output that is an input
// comes back in a copy of its own). The sum, an output the product reads back, keeps the outputs
// on the device until an output copy; without it, the product is written straight into pinned
// memory (Binding::outputs_pinned).
struct BagsAndProduct {
  GraphBuilder g;
  std::vector<TensorMeta> metas{
      {DType::kI64, {kIds}, nullptr}, {DType::kI64, {kRows + 1}, nullptr}, {DType::kF32, {kRows, kWidth}, nullptr}};
  explicit BagsAndProduct(bool sum_out = true) {
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> table(kTableRows * kWidth), w(kWidth * 4);
    for (float& v : table) v = u(rng);
    for (float& v : w) v = u(rng);
    int t = g.Const("table", testing::MakeF32({kTableRows, kWidth}, table));
    int weight = g.Const("w", testing::MakeF32({kWidth, 4}, w));
    int ids = g.Input("ids", DType::kI64, {kIds});
    int offsets = g.Input("offsets", DType::kI64, {kRows + 1});
    int x = g.Input("x", DType::kF32, {kRows, kWidth});
    int sum = g.Op("Add", {g.Op("EmbeddingBag", {t, ids, offsets}), x});
    g.Output(g.Op("MatMul", {sum, weight}));
    if (sum_out) g.Output(sum);
    g.Output(x);
  }
};

std::vector<Tensor> RandomInputs(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> id(-1, kTableRows - 1);
  std::uniform_int_distribution<int64_t> cut(0, kIds);
  std::vector<int64_t> ids(kIds), offsets(kRows + 1);
  for (int64_t& v : ids) v = id(rng);
  for (int64_t r = 1; r < kRows; ++r) offsets[static_cast<size_t>(r)] = cut(rng);
  std::sort(offsets.begin(), offsets.end());
  offsets.back() = kIds;
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(kRows * kWidth);
  for (float& v : x) v = u(rng);
  return {testing::MakeI64({kIds}, ids), testing::MakeI64({kRows + 1}, offsets), testing::MakeF32({kRows, kWidth}, x)};
}

class CudaInputsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
    cuda::SetCopyKernels(GetParam());
    const Backend* cuda = testing::CudaOrNull();
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(m_.g.graph(), m_.metas, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
    auto resources = cuda->PrepareModel(m_.g.graph(), Precision::kFp32);
    ASSERT_TRUE(resources.ok()) << resources.status().ToString();
    auto executor = NewExecutor(*cuda, *resources);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    executor_ = std::move(*executor);
  }
  void TearDown() override { cuda::SetCopyKernels(true); }

  BagsAndProduct m_;
  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<Executor> executor_;  // made after SetCopyKernels: its bindings follow it
};

TEST_P(CudaInputsTest, ScoresAsTheCpuUncapturedAndReplayedAndABadIdFailsOneRunOnly) {
  std::mt19937_64 rng(17);
  auto expect_scores = [&](const char* when) {
    std::vector<Tensor> in = RandomInputs(rng);
    auto want = testing::RunGraph(m_.g.graph(), in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = executor_->Run(*plan_, in);
    ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), 3u);
    EXPECT_LE(testing::RelativeError((*got)[0], (*want)[0]), 1e-5) << when;
    EXPECT_LE(testing::RelativeError((*got)[1], (*want)[1]), 1e-6) << when;
    EXPECT_EQ(testing::RelativeError((*got)[2], in[2]), 0.0) << when;
  };
  auto expect_bad_id = [&](const char* when) {
    std::vector<Tensor> in = RandomInputs(rng);
    in[0].data<int64_t>()[kIds - 1] = kTableRows;  // in the last bag, one past the table
    auto failed = executor_->Run(*plan_, in);
    ASSERT_FALSE(failed.ok()) << when << ": an id past the table was read";
    EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
  };
  expect_scores("uncaptured");
  expect_bad_id("uncaptured");
  expect_scores("uncaptured, after the bad id");
  ASSERT_TRUE(executor_->Capture(*plan_).ok());
  ASSERT_TRUE(executor_->Captured(*plan_));
  for (int i = 0; i < 3; ++i) expect_scores("replayed");
  expect_bad_id("replayed");
  expect_scores("replayed, after the bad id");
  expect_bad_id("replayed, again");
  expect_scores("replayed, after the second bad id");
}

// Where a test puts an input's bytes: a tensor of the pinned pool, heap memory, or pinned memory
// 8 bytes past a 16-byte boundary.
enum class Lies { kPooled, kHeap, kMisaligned };

struct PlacedInputs {
  std::vector<Tensor> tensors;
  std::vector<Tensor> rooms;               // pooled memory misaligned views point into
  std::vector<std::vector<int64_t>> heap;  // what heap views point at
};

PlacedInputs Place(const std::vector<Tensor>& in, Lies lies) {
  RequestTensorScope request_tensors;  // tensors made here are pooled
  PlacedInputs p;
  for (const Tensor& t : in) {
    const size_t words = (t.bytes() + 7) / 8 + 2;
    if (lies == Lies::kPooled) {
      p.tensors.push_back(t.Clone());
    } else if (lies == Lies::kHeap) {
      p.heap.emplace_back(words);
      std::memcpy(p.heap.back().data(), t.raw(), t.bytes());
      p.tensors.push_back(Tensor::View(t.dtype(), t.shape(), p.heap.back().data()));
    } else {
      p.rooms.push_back(Tensor::Empty(DType::kI64, {static_cast<int64_t>(words)}));
      std::memcpy(p.rooms.back().data<int64_t>() + 1, t.raw(), t.bytes());
      p.tensors.push_back(
          Tensor::View(t.dtype(), t.shape(), p.rooms.back().data<int64_t>() + 1, p.rooms.back().location()));
    }
  }
  return p;
}

TEST(PinnedPool, HandsOutAlignedBlocksItHoldsAndTakesFreedOnesBack) {
  if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
  cuda::PinnedPool& pool = cuda::PinnedPool::Shared();
  if (CurrentHostAllocator() != &pool) GTEST_SKIP() << "the pool is off (--cuda pinned_pool_mb=0)";
  void* small = pool.Allocate(300);  // a 512-byte block
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 256, 0u);
  EXPECT_TRUE(pool.Holds(small, 512));
  pool.Free(small, 300);
  EXPECT_EQ(pool.Allocate(400), small) << "a freed block of the same size comes back first";
  pool.Free(small, 400);
  void* large = pool.Allocate(size_t{3} << 20);  // a slab of its own (4 MiB)
  ASSERT_NE(large, nullptr);
  EXPECT_TRUE(pool.Holds(large, size_t{4} << 20));
  EXPECT_FALSE(pool.Holds(static_cast<uint8_t*>(large) + (size_t{4} << 20) - 8, 16)) << "past the slab's end";
  pool.Free(large, size_t{3} << 20);
  EXPECT_EQ(pool.Allocate(size_t{1} << 27), nullptr) << "blocks over 64 MiB come from the heap";
  int on_the_stack = 0;
  EXPECT_FALSE(pool.Holds(&on_the_stack, sizeof(on_the_stack)));
  // The CUDA backend installed the pool: request tensors are pinned (a kernel reads them in
  // place), others are not.
  Tensor weight = Tensor::Zeros(DType::kF32, {1000});
  EXPECT_FALSE(pool.Holds(weight.raw(), 4000));
  EXPECT_EQ(weight.location(), MemoryLocation::Host());
  RequestTensorScope request_tensors;
  Tensor t = Tensor::Zeros(DType::kF32, {1000});
  EXPECT_TRUE(pool.Holds(t.raw(), t.bytes()));
  EXPECT_EQ(t.location(), MemoryLocation::Pinned()) << "executors read a tensor in place by its location";
}

// Pooled, heap and misaligned inputs in turn (RandomInputs' own tensors, made outside a request
// scope, are on the heap), uncaptured and replayed, with ids shorter than the
// plan's (the kernel or the host fills the tail with -1) and ids past INT32's range (clamped
// where narrowed, never wrapped to a valid id: one past the table fails the run, a negative one
// is skipped as the CPU skips it).
TEST_P(CudaInputsTest, ReadsInputsWhereverTheyLie) {
  std::mt19937_64 rng(23);
  if (CurrentHostAllocator() == &cuda::PinnedPool::Shared()) {  // else (pinned_pool_mb=0) every input is packed
    RequestTensorScope request_tensors;
    ASSERT_TRUE(cuda::PinnedPool::Shared().Holds(Tensor::Empty(DType::kI64, {kIds}).raw(), kIds * 8))
        << "request tensors made after the CUDA backend are pinned";
  }
  auto run = [&](std::vector<Tensor> in, Lies lies) {
    PlacedInputs placed = Place(in, lies);
    return executor_->Run(*plan_, placed.tensors);
  };
  auto expect_scores = [&](Lies lies, bool short_ids, const std::string& when, int64_t id = 0) {
    std::vector<Tensor> in = RandomInputs(rng);
    if (id != 0) in[0].data<int64_t>()[3] = id;
    if (short_ids) {  // the last 7 ids dropped: the last bags lose them
      constexpr int64_t kKept = kIds - 7;
      std::vector<int64_t> ids(in[0].data<int64_t>(), in[0].data<int64_t>() + kKept);
      in[0] = testing::MakeI64({kKept}, ids);
      for (int64_t r = 0; r <= kRows; ++r) in[1].data<int64_t>()[r] = std::min(in[1].data<int64_t>()[r], kKept);
    }
    auto want = testing::RunGraph(m_.g.graph(), in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = run(in, lies);
    ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
    EXPECT_LE(testing::RelativeError((*got)[1], (*want)[1]), 1e-6) << when;
    EXPECT_EQ(testing::RelativeError((*got)[2], in[2]), 0.0) << when;
  };
  auto expect_bad = [&](Lies lies, int64_t id, const std::string& when) {
    std::vector<Tensor> in = RandomInputs(rng);
    in[0].data<int64_t>()[3] = id;
    auto failed = run(in, lies);
    ASSERT_FALSE(failed.ok()) << when << ": id " << id << " was read";
    EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
  };
  for (bool replayed : {false, true}) {
    if (replayed) {
      ASSERT_TRUE(executor_->Capture(*plan_).ok());
    }
    for (Lies lies : {Lies::kPooled, Lies::kHeap, Lies::kMisaligned, Lies::kPooled}) {
      const std::string when = std::string(replayed ? "replayed" : "uncaptured") + ", inputs " +
                               (lies == Lies::kPooled ? "pooled"
                                : lies == Lies::kHeap ? "on the heap"
                                                      : "misaligned");
      expect_scores(lies, false, when);
      expect_scores(lies, true, when + ", short ids");
      expect_scores(lies, false, when + ", after short ids");
      expect_bad(lies, int64_t{1} << 40, when);
      expect_bad(lies, (int64_t{1} << 32) + 1, when);                                         // wraps to 1 if truncated
      expect_scores(lies, false, when + ", a negative id skipped", -(int64_t{1} << 32) + 5);  // 5 if truncated
      expect_scores(lies, false, when + ", after bad ids");
    }
  }
}

// Inputs in a client's system shared memory region: page-locked for the GPUs as the server
// registers it (SetPinning through the CUDA backend), its views are located pinned and the input
// kernel reads them in place, so a run scores what the client's bytes hold when it runs; a region
// registered unlocked is located in shared memory and packed like heap memory. Both score as the
// CPU, uncaptured and replayed.
TEST_P(CudaInputsTest, ReadsSharedMemoryRegionsInPlaceWhereTheyArePageLocked) {
  constexpr size_t kBytes = 64 * 1024;
  const std::string key = "/rankd-cuda-io-" + std::to_string(getpid());
  const int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kBytes), 0);
  auto* client = static_cast<uint8_t*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(client, MAP_FAILED);
  close(fd);
  SharedMemoryRegions locked, unlocked;
  locked.SetPinning(testing::CudaOrNull(), kBytes);
  ASSERT_TRUE(locked.Register("in", key, 0, kBytes).ok());
  ASSERT_TRUE(unlocked.Register("in", key, 0, kBytes).ok());
  EXPECT_EQ(locked.pinned_bytes(), kBytes) << "the driver did not page-lock the region";
  std::mt19937_64 rng(29);
  for (bool replayed : {false, true}) {
    if (replayed) {
      ASSERT_TRUE(executor_->Capture(*plan_).ok());
    }
    for (SharedMemoryRegions* regions : {&locked, &unlocked, &locked}) {
      const bool pinned = regions == &locked;
      const std::string when = std::string(replayed ? "replayed" : "uncaptured") + (pinned ? ", locked" : ", unlocked");
      std::vector<Tensor> in = RandomInputs(rng);
      std::vector<Tensor> views;
      size_t at = 4096;
      for (const Tensor& t : in) {  // each input 64-byte aligned in the region, as a client may lay them
        std::memcpy(client + at, t.raw(), t.bytes());
        views.push_back(regions->Find("in", at, t.bytes())->View(t.dtype(), t.shape()));
        ASSERT_TRUE(views.back().defined()) << when;
        EXPECT_EQ(views.back().location(), pinned ? MemoryLocation::Pinned() : MemoryLocation::SharedMemory()) << when;
        at += (t.bytes() + 63) / 64 * 64;
      }
      auto want = testing::RunGraph(m_.g.graph(), in);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      auto got = executor_->Run(*plan_, views);
      ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
      EXPECT_LE(testing::RelativeError((*got)[1], (*want)[1]), 1e-6) << when;
      EXPECT_EQ(testing::RelativeError((*got)[2], in[2]), 0.0) << when;
      // The client rewrites its ids where they lie: the next run reads the new ones.
      std::vector<Tensor> rewritten = RandomInputs(rng);
      rewritten[1] = in[1];
      rewritten[2] = in[2];
      std::memcpy(client + 4096, rewritten[0].raw(), rewritten[0].bytes());
      auto want_rewritten = testing::RunGraph(m_.g.graph(), rewritten);
      ASSERT_TRUE(want_rewritten.ok());
      auto got_rewritten = executor_->Run(*plan_, views);
      ASSERT_TRUE(got_rewritten.ok()) << when << ": " << got_rewritten.status().ToString();
      EXPECT_LE(testing::RelativeError((*got_rewritten)[1], (*want_rewritten)[1]), 1e-6) << when << ", ids rewritten";
    }
  }
  ASSERT_TRUE(locked.Unregister(SharedMemoryRegions::Kind::kSystem, "").ok());
  EXPECT_EQ(locked.pinned_bytes(), 0u);
  munmap(client, kBytes);
  shm_unlink(key.c_str());
}

// The copies a run puts on the device: the inputs in one, the error word and both computed
// outputs back in one (copy nodes, or kernels counted as copies), the output that is an input in
// another. No memsets: the error word is cleared on the way in.
// A merged batch's ids left as its requests' tensors (common/deferred_merge.h): with copy kernels
// the input kernel reads each part where it lies, narrowed to the slot's INT32 where the plan
// narrows, at whatever four-byte boundary it starts; with copy nodes the host packs each part into
// the staging buffer. Either way the merged tensor is never written (unless merged_gather is off),
// and the run scores the parts' concatenation, uncaptured and replayed, with short ids (a tail of
// -1) and parts of no ids.
TEST_P(CudaInputsTest, GathersAMergedBatchsIdsFromItsRequests) {
  std::mt19937_64 rng(31);
  auto expect_scores = [&](const std::string& when, int64_t ids_sent) {
    std::vector<Tensor> in = RandomInputs(rng);
    std::vector<int64_t> ids(in[0].data<int64_t>(), in[0].data<int64_t>() + ids_sent);
    in[0] = testing::MakeI64({ids_sent}, ids);
    for (int64_t r = 0; r <= kRows; ++r) in[1].data<int64_t>()[r] = std::min(in[1].data<int64_t>()[r], ids_sent);
    auto want = testing::RunGraph(m_.g.graph(), in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    RequestTensorScope request_tensors;  // pooled, as the requests' tensors are
    std::vector<Tensor> parts;
    for (int64_t at = 0; at < ids_sent;) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(rng() % 6), ids_sent - at);  // 0 to 5 ids
      parts.push_back(in[0].Rows(at, n).Clone());
      at += n;
    }
    Tensor merged = Tensor::Empty(DType::kI64, {ids_sent});
    std::memset(merged.raw(), 0x5a, merged.bytes());  // what it holds unless written
    DeferredMerge deferred;
    deferred.Add(merged, parts);
    std::vector<Tensor> inputs = {merged, in[1].Clone(), in[2].Clone()};
    std::vector<Tensor> outputs = Executor::OutputsFor(*plan_);
    Status ran = executor_->RunMergedInto(*plan_, inputs, deferred, outputs);
    ASSERT_TRUE(ran.ok()) << when << ": " << ran.ToString();
    EXPECT_LE(testing::RelativeError(outputs[1], (*want)[1]), 1e-6) << when;
    EXPECT_EQ(testing::RelativeError(outputs[2], in[2]), 0.0) << when;
    const bool gathered =
        cuda::MergedGather() && (!GetParam() || CurrentHostAllocator() == &cuda::PinnedPool::Shared());
    EXPECT_EQ(static_cast<const uint8_t*>(merged.raw())[0] == 0x5a, gathered && ids_sent > 0)
        << when << ": the merged ids are written only where neither the kernel nor the packing takes their parts";
  };
  for (bool replayed : {false, true}) {
    if (replayed) {
      ASSERT_TRUE(executor_->Capture(*plan_).ok());
    }
    for (int round = 0; round < 4; ++round) {
      const std::string when = std::string(replayed ? "replayed" : "uncaptured") + ", round " + std::to_string(round);
      expect_scores(when, kIds);
      expect_scores(when + ", short ids", kIds - 1 - round * 3);
    }
  }
  cuda::SetMergedGather(false);  // the host writes the merged ids
  expect_scores("replayed, merged_gather off", kIds);
  cuda::SetMergedGather(true);
}

// The input kernel's gather from sources that start anywhere on a four-byte boundary (the later
// parts of a merged slot), copied or narrowed, against the bytes the host expects: each slot its
// parts' bytes in order, then -1 to its end.
TEST(CudaGather, PartsStartingOnAnyFourByteBoundaryLandInPlace) {
  if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(41);
  constexpr size_t kSlotRoom = 1024, kSlots = 6, kMaxSources = 200;
  cuda::PinnedBuffer table_room, from_room;
  ASSERT_TRUE(table_room.Reserve(sizeof(cuda::GatherTable) + kMaxSources * sizeof(cuda::InputSource)).ok());
  ASSERT_TRUE(from_room.Reserve(size_t{1} << 20).ok());
  cuda::DeviceBuffer to;
  ASSERT_TRUE(to.Reserve(kSlots * kSlotRoom).ok());
  for (int round = 0; round < 20; ++round) {
    auto* table = static_cast<cuda::GatherTable*>(table_room.get());
    cuda::InputSource* sources = cuda::SourcesOf(table);
    auto* from = static_cast<uint8_t*>(from_room.get());
    auto* from_device = static_cast<uint8_t*>(from_room.device());
    size_t used = 0;
    uint32_t count = 0;
    std::vector<uint8_t> want(kSlots * kSlotRoom, 0);
    for (size_t slot = 0; slot < kSlots; ++slot) {
      const bool narrow = slot % 3 == 1, wide = slot % 3 == 2;  // INT64 to INT32, INT64 copied, INT32 copied
      const size_t item = narrow || wide ? 8 : 4, placed = narrow ? 4 : item;
      const size_t slot_bytes = (kSlotRoom - 64 - rng() % 256) / placed * placed;
      size_t at = slot * kSlotRoom, filled = 0;
      const uint32_t first = count;
      while (filled + 40 * placed < slot_bytes) {
        const size_t n = rng() % 12;  // elements in this part, 0 to 11
        if (n == 0) continue;
        std::vector<int64_t> values(n);
        for (int64_t& v : values) v = static_cast<int64_t>(rng() % 2000) - (slot == 1 ? 1000 : 0);
        if (narrow && rng() % 4 == 0) values[0] = int64_t{1} << 40;  // clamped to INT32's largest
        uint8_t* part = from + used;
        for (size_t e = 0; e < n; ++e) {
          const int64_t v = values[e];
          if (item == 8) {
            std::memcpy(part + e * 8, &v, 8);
          } else {
            const auto w = static_cast<int32_t>(v);
            std::memcpy(part + e * 4, &w, 4);
          }
          const auto placed_value = static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
          if (placed == 8) {
            std::memcpy(&want[at + filled + e * 8], &v, 8);
          } else {
            std::memcpy(&want[at + filled + e * 4], item == 8 ? static_cast<const void*>(&placed_value) : part + e * 4,
                        4);
          }
        }
        sources[count++] = {from_device + used, n * item, at + filled, n * placed, narrow ? 1u : 0u, 0};
        used += (n * item + 15) / 16 * 16;
        filled += n * placed;
      }
      ASSERT_GT(count, first);
      sources[count - 1].to_bytes = at + slot_bytes - sources[count - 1].to;  // -1 after the last part
      std::memset(&want[at + filled], 0xff, slot_bytes - filled);
    }
    table->count = count;
    table->late = static_cast<uint32_t>(round % 2 == 0 ? count : 0);
    while (table->late < count && sources[table->late].to < 3 * kSlotRoom) ++table->late;
    ASSERT_LE(count, kMaxSources);
    ASSERT_EQ(cudaMemset(to.get(), 0, kSlots * kSlotRoom), cudaSuccess);
    const auto* device_table = static_cast<const cuda::GatherTable*>(table_room.device());
    if (round % 2 == 0) {
      ASSERT_TRUE(cuda::GatherByKernel(device_table, cuda::GatherPart::kAll, kMaxSources, to.get(), 0,
                                       kSlots * kSlotRoom, nullptr, nullptr)
                      .ok());
    } else {  // the floats' gather, then the ids', split after the third slot
      ASSERT_TRUE(cuda::GatherByKernel(device_table, cuda::GatherPart::kFloats, kMaxSources, to.get(), 0, 3 * kSlotRoom,
                                       nullptr, nullptr)
                      .ok());
      ASSERT_TRUE(cuda::GatherByKernel(device_table, cuda::GatherPart::kIds, kMaxSources, to.get(), 3 * kSlotRoom,
                                       kSlots * kSlotRoom, nullptr, nullptr)
                      .ok());
    }
    std::vector<uint8_t> got(kSlots * kSlotRoom);
    ASSERT_EQ(cudaMemcpy(got.data(), to.get(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t slot = 0; slot < kSlots; ++slot) {
      const size_t at = slot * kSlotRoom;
      size_t end = at;
      for (uint32_t k = 0; k < count; ++k) {
        if (sources[k].to >= at && sources[k].to < at + kSlotRoom) end = sources[k].to + sources[k].to_bytes;
      }
      for (size_t b = at; b < end; ++b) {
        ASSERT_EQ(got[b], want[b]) << "round " << round << ", slot " << slot << ", byte " << b - at;
      }
    }
  }
}

TEST_P(CudaInputsTest, CopiesPerRun) {
  auto launches = executor_->CountLaunches(*plan_);
  ASSERT_TRUE(launches.ok()) << launches.status().ToString();
  EXPECT_EQ(launches->copies, 3);
  EXPECT_EQ(launches->memsets, 0);
}

// Outputs no step reads back, with copy kernels, are written by their steps straight into the
// pinned output buffer, and the error word with them (cleared by the host before each run): no
// output copy. The scores are the CPU's, uncaptured and replayed, and a bad id fails its run
// only, however many runs came before it, however the host waits. With copy
// nodes the outputs come back in a copy.
TEST(CudaOutputsPinned, StepsWriteTheOutputsAndTheErrorWordWhereTheHostReadsThem) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  BagsAndProduct m(false);
  for (bool kernels : {true, false}) {
    cuda::SetCopyKernels(kernels);
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(m.g.graph(), m.metas, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto resources = cuda->PrepareModel(m.g.graph(), Precision::kFp32);
    ASSERT_TRUE(resources.ok()) << resources.status().ToString();
    auto executor = NewExecutor(*cuda, *resources);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    auto launches = (*executor)->CountLaunches(**plan);
    ASSERT_TRUE(launches.ok()) << launches.status().ToString();
    // In: one kernel or copy. Out: the product's copy only with copy nodes; x's copy either way.
    EXPECT_EQ(launches->copies, kernels ? 2 : 3) << (kernels ? "copy kernels" : "copy nodes");
    std::mt19937_64 rng(41);
    for (bool replayed : {false, true}) {
      if (replayed) {
        ASSERT_TRUE((*executor)->Capture(**plan).ok());
      }
      const std::string when =
          std::string(kernels ? "copy kernels, " : "copy nodes, ") + (replayed ? "replayed" : "uncaptured");
      for (int run = 0; run < 8; ++run) {
        // The host waits napping, spinning, blocked and on the poller in turn: the same answers.
        cuda::SetDeviceWait(std::array{cuda::DeviceWait::kNap, cuda::DeviceWait::kSpin, cuda::DeviceWait::kBlock,
                                       cuda::DeviceWait::kPoller}[run % 4]);
        RequestTensorScope request_tensors;  // pinned, as a request's are
        std::vector<Tensor> in = RandomInputs(rng);
        const bool bad = run % 3 == 1;
        if (bad) in[0].data<int64_t>()[kIds / 2] = kTableRows;
        auto got = (*executor)->Run(**plan, in);
        if (bad) {
          ASSERT_FALSE(got.ok()) << when << ", run " << run << ": an id past the table was read";
          EXPECT_NE(got.status().message().find("out of range"), std::string::npos) << got.status().ToString();
          continue;
        }
        ASSERT_TRUE(got.ok()) << when << ", run " << run << ": " << got.status().ToString();
        auto want = testing::RunGraph(m.g.graph(), in);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        ASSERT_EQ(got->size(), 2u);
        EXPECT_LE(testing::RelativeError((*got)[0], (*want)[0]), 1e-5) << when << ", run " << run;
        EXPECT_EQ(testing::RelativeError((*got)[1], in[2]), 0.0) << when << ", run " << run;
      }
    }
  }
  cuda::SetCopyKernels(true);
  cuda::SetDeviceWait(cuda::DeviceWait::kPoller);  // the default
}

// A few bytes of floats through a product of their own, and many ids through a bag: the ids come
// over by a second input kernel, scheduled beside the floats' product (Binding::late_gather), or
// after the floats' gather on one lane. Either way the scores are the CPU's, uncaptured and
// replayed, and a bad id fails its run only (the host clears the error word in pinned memory).
// The ids (320 KB) are more 16-byte pieces than the gather's blocks take in one pass.
TEST(CudaLateGather, ScoresAsTheCpuOnLanesOrOneStream) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kBagRows = 32, kBagIds = 40960;
  GraphBuilder g;
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> table(kTableRows * kWidth), w(kWidth * kWidth);
  for (float& v : table) v = u(rng);
  for (float& v : w) v = u(rng);
  int t = g.Const("table", testing::MakeF32({kTableRows, kWidth}, table));
  int weight = g.Const("w", testing::MakeF32({kWidth, kWidth}, w));
  int x = g.Input("x", DType::kF32, {kBagRows, kWidth});
  int ids = g.Input("ids", DType::kI64, {kBagIds});
  int offsets = g.Input("offsets", DType::kI64, {kBagRows + 1});
  int dense = g.Op("Relu", {g.Op("MatMul", {x, weight})});
  g.Output(g.Op("Add", {g.Op("EmbeddingBag", {t, ids, offsets}), dense}));
  std::vector<TensorMeta> metas{{DType::kF32, {kBagRows, kWidth}, nullptr},
                                {DType::kI64, {kBagIds}, nullptr},
                                {DType::kI64, {kBagRows + 1}, nullptr}};
  auto inputs = [&](bool bad) {
    std::uniform_int_distribution<int64_t> id(-1, kTableRows - 1);
    std::vector<int64_t> id_values(kBagIds), offset_values(kBagRows + 1);
    for (int64_t& v : id_values) v = id(rng);
    if (bad) id_values[kBagIds / 2] = kTableRows;
    for (int64_t r = 0; r <= kBagRows; ++r) offset_values[static_cast<size_t>(r)] = r * (kBagIds / kBagRows);
    std::vector<float> xs(kBagRows * kWidth);
    for (float& v : xs) v = u(rng);
    RequestTensorScope request_tensors;  // pinned, as a request's are
    return std::vector<Tensor>{testing::MakeF32({kBagRows, kWidth}, xs), testing::MakeI64({kBagIds}, id_values),
                               testing::MakeI64({kBagRows + 1}, offset_values)};
  };
  for (int lanes : {4, 1}) {
    cuda::SetGraphLanes(lanes);
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(g.graph(), metas, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
    ASSERT_TRUE(resources.ok()) << resources.status().ToString();
    auto executor = NewExecutor(*cuda, *resources);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    auto launches = (*executor)->CountLaunches(**plan);
    ASSERT_TRUE(launches.ok()) << launches.status().ToString();
    EXPECT_EQ(launches->copies, 2) << "two input kernels; the output written straight into pinned memory";
    for (bool replayed : {false, true}) {
      if (replayed) {
        ASSERT_TRUE((*executor)->Capture(**plan).ok());
      }
      const std::string when = std::to_string(lanes) + " lanes, " + (replayed ? "replayed" : "uncaptured");
      for (int i = 0; i < 3; ++i) {
        std::vector<Tensor> in = inputs(false);
        auto want = testing::RunGraph(g.graph(), in);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        auto got = (*executor)->Run(**plan, in);
        ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
        EXPECT_LE(testing::RelativeError((*got)[0], (*want)[0]), 1e-5) << when;
        auto failed = (*executor)->Run(**plan, inputs(true));
        ASSERT_FALSE(failed.ok()) << when << ": an id past the table was read";
        EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
      }
    }
  }
  cuda::SetGraphLanes(4);
}

INSTANTIATE_TEST_SUITE_P(SmallInputs, CudaInputsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "KernelCopies" : "CopyNodes";
                         });

#endif  // RANKD_HAVE_CUDA

}  // namespace
}  // namespace rankd

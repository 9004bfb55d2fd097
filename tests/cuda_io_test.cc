// How a CUDA run's inputs reach the device and its outputs come back (cuda_executor.h): a small
// run's moved by kernels through the pinned staging buffers' mapped addresses (launched before
// the packing, its input kernel waiting on gates, or after it), or by copies; the error word
// cleared on the way in and brought back with the outputs in one copy. Every way must score
// alike, uncaptured and replayed, with inputs shorter than the plan's and larger than one gate,
// and report a bad id in that run only. The gates themselves: a pull waits for them, and one
// left shut fails its run instead of hanging it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "compile/plan.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_executor.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/mapped_copy.h"
#endif

namespace rankd {
namespace {

using testing::GraphBuilder;

#if RANKD_HAVE_CUDA

constexpr int64_t kRows = 8, kTableRows = 50, kWidth = 16;

// How the inputs travel, and how many ids a run's plan has room for: 20, or 120,000 (960 KB as
// INT64, 480 KB narrowed: 15 gates, packed with the helpers; runs then send fewer, the rest of
// the slot filled with -1).
enum class Mode { kCopyNodes, kKernelCopies, kGatedPulls };
struct IoCase {
  Mode mode;
  int64_t ids;
};

// Eight bags of a table, plus a dense input, through a product. Outputs: the product, the sum
// before it, and the dense input itself (an output that is an input comes back in a copy of its own).
struct BagsAndProduct {
  GraphBuilder g;
  std::vector<TensorMeta> metas;
  explicit BagsAndProduct(int64_t ids_room)
      : metas{{DType::kI64, {ids_room}, nullptr}, {DType::kI64, {kRows + 1}, nullptr}, {DType::kF32, {kRows, kWidth}, nullptr}} {
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> table(kTableRows * kWidth), w(kWidth * 4);
    for (float& v : table) v = u(rng);
    for (float& v : w) v = u(rng);
    int t = g.Const("table", testing::MakeF32({kTableRows, kWidth}, table));
    int weight = g.Const("w", testing::MakeF32({kWidth, 4}, w));
    int ids = g.Input("ids", DType::kI64, {ids_room});
    int offsets = g.Input("offsets", DType::kI64, {kRows + 1});
    int x = g.Input("x", DType::kF32, {kRows, kWidth});
    int sum = g.Op("Add", {g.Op("EmbeddingBag", {t, ids, offsets}), x});
    g.Output(g.Op("MatMul", {sum, weight}));
    g.Output(sum);
    g.Output(x);
  }
};

// `count` ids in eight bags (ids of -1 skipped).
std::vector<Tensor> RandomInputs(std::mt19937_64& rng, int64_t count) {
  std::uniform_int_distribution<int64_t> id(-1, kTableRows - 1);
  std::uniform_int_distribution<int64_t> cut(0, count);
  std::vector<int64_t> ids(static_cast<size_t>(count)), offsets(kRows + 1);
  for (int64_t& v : ids) v = id(rng);
  for (int64_t r = 1; r < kRows; ++r) offsets[static_cast<size_t>(r)] = cut(rng);
  std::sort(offsets.begin(), offsets.end());
  offsets.back() = count;
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(kRows * kWidth);
  for (float& v : x) v = u(rng);
  return {testing::MakeI64({count}, ids), testing::MakeI64({kRows + 1}, offsets), testing::MakeF32({kRows, kWidth}, x)};
}

class CudaInputsTest : public ::testing::TestWithParam<IoCase> {
 protected:
  void SetUp() override {
    if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
    cuda::SetCopyKernels(GetParam().mode != Mode::kCopyNodes);
    cuda::SetGatedPulls(GetParam().mode == Mode::kGatedPulls);
    const Backend* cuda = testing::CudaOrNull();
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(m_.g.graph(), m_.metas, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
    auto resources = cuda->PrepareModel(m_.g.graph(), Precision::kFp32);
    ASSERT_TRUE(resources.ok()) << resources.status().ToString();
    auto executor = cuda->NewExecutor(*resources);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    executor_ = std::move(*executor);
  }
  void TearDown() override {
    cuda::SetCopyKernels(true);
    cuda::SetGatedPulls(true);
  }
  // A run's ids: as many as the plan has room for, or (large plans) a little fewer.
  int64_t RunIds(std::mt19937_64& rng) const {
    const int64_t room = GetParam().ids;
    return room < 1000 ? room : room - std::uniform_int_distribution<int64_t>(0, 40000)(rng);
  }

  BagsAndProduct m_{GetParam().ids};
  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<Executor> executor_;  // made after the switches: its bindings follow them
};

TEST_P(CudaInputsTest, ScoresAsTheCpuUncapturedAndReplayedAndABadIdFailsOneRunOnly) {
  std::mt19937_64 rng(17);
  auto expect_scores = [&](const char* when) {
    std::vector<Tensor> in = RandomInputs(rng, RunIds(rng));
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
    std::vector<Tensor> in = RandomInputs(rng, RunIds(rng));
    in[0].data<int64_t>()[in[0].size() - 1] = kTableRows;  // in the last bag, one past the table
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

// The copies a run puts on the device: the inputs in one, the error word and both computed
// outputs back in one (copy nodes, or kernels counted as copies), the output that is an input in
// another. No memsets: the error word is cleared on the way in.
TEST_P(CudaInputsTest, CopiesPerRun) {
  auto launches = executor_->CountLaunches(*plan_);
  ASSERT_TRUE(launches.ok()) << launches.status().ToString();
  EXPECT_EQ(launches->copies, 3);
  EXPECT_EQ(launches->memsets, 0);
}

std::string IoCaseName(const ::testing::TestParamInfo<IoCase>& info) {
  static const char* const kModes[] = {"CopyNodes", "KernelCopies", "GatedPulls"};
  return std::string(kModes[static_cast<int>(info.param.mode)]) + "_" + std::to_string(info.param.ids) + "Ids";
}

INSTANTIATE_TEST_SUITE_P(Inputs, CudaInputsTest,
                         ::testing::Values(IoCase{Mode::kCopyNodes, 20}, IoCase{Mode::kKernelCopies, 20},
                                           IoCase{Mode::kGatedPulls, 20}, IoCase{Mode::kCopyNodes, 120000},
                                           IoCase{Mode::kKernelCopies, 120000}, IoCase{Mode::kGatedPulls, 120000}),
                         IoCaseName);

// A gated pull of three parts, launched before the host writes them: each part must arrive as
// written after the launch (the bytes before the first gate, written before, go with it).
TEST(GatedPull, WaitsForEachGateAndCopiesWhatWasWrittenAfterTheLaunch) {
  if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
  constexpr size_t kUngated = 4096, kPart = 15360, kBytes = kUngated + 3 * kPart;
  cuda::PinnedBuffer from, words;
  cuda::DeviceBuffer to;
  ASSERT_TRUE(from.Reserve(kBytes).ok());
  ASSERT_TRUE(words.Reserve(4096).ok());
  ASSERT_TRUE(to.Reserve(kBytes + 16).ok());
  auto* host = static_cast<uint8_t*>(from.get());
  auto* ready = static_cast<uint32_t*>(words.get());
  std::memset(host, 0, kBytes);
  std::memset(host, 7, kUngated);
  cuda::InputGates gates;
  gates.ready = static_cast<const uint32_t*>(words.device());
  gates.count = 3;
  for (int g = 0; g < 3; ++g) {
    gates.begin[g] = static_cast<uint32_t>(kUngated + static_cast<size_t>(g) * kPart);
    ready[g] = 0;
  }
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  int* error = reinterpret_cast<int*>(static_cast<uint8_t*>(to.get()) + kBytes);
  ASSERT_EQ(cudaMemsetAsync(error, 0x55, sizeof(int), stream), cudaSuccess);
  ASSERT_TRUE(cuda::CopyByKernel(from.device(), to.get(), kBytes, error, stream, &gates).ok());
  for (int g = 2; g >= 0; --g) {  // the last gate first: a block waits for its own parts only
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the pull ended with gate " << g << " shut";
    const size_t begin = gates.begin[g], end = g == 2 ? kBytes : gates.begin[g + 1];
    std::memset(host + begin, 10 + g, end - begin);
    std::atomic_ref<uint32_t>(ready[g]).store(1, std::memory_order_release);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<uint8_t> back(kBytes + sizeof(int));
  ASSERT_EQ(cudaMemcpy(back.data(), to.get(), back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < kBytes; ++i) {
    const int g = i < kUngated ? -1 : static_cast<int>((i - kUngated) / kPart);
    ASSERT_EQ(back[i], g < 0 ? 7 : 10 + g) << "byte " << i;
  }
  int cleared;
  std::memcpy(&cleared, back.data() + kBytes, sizeof(int));
  EXPECT_EQ(cleared, 0);
  cudaStreamDestroy(stream);
}

// A gate the host never opens: the pull gives up after its timeout and says so in the error word.
TEST(GatedPull, AGateLeftShutFailsTheRunInsteadOfHangingIt) {
  if (!testing::CudaOrNull()) GTEST_SKIP() << "no CUDA device";
  cuda::PinnedBuffer from, words;
  cuda::DeviceBuffer to;
  ASSERT_TRUE(from.Reserve(8192).ok());
  ASSERT_TRUE(words.Reserve(4096).ok());
  ASSERT_TRUE(to.Reserve(8192 + 16).ok());
  static_cast<uint32_t*>(words.get())[0] = 0;
  cuda::InputGates gates;
  gates.ready = static_cast<const uint32_t*>(words.device());
  gates.count = 1;
  int* error = reinterpret_cast<int*>(static_cast<uint8_t*>(to.get()) + 8192);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cuda::CopyByKernel(from.device(), to.get(), 8192, error, nullptr, &gates).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::nanoseconds(cuda::kGateTimeoutNs));
  int code = 0;
  ASSERT_EQ(cudaMemcpy(&code, error, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(code, cuda::kInputsLate);
}

#endif  // RANKD_HAVE_CUDA

}  // namespace
}  // namespace rankd

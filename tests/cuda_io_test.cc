// How a CUDA run's inputs reach the device and its outputs come back (cuda_executor.h): a small
// run's moved by kernels through the pinned staging buffers' mapped addresses, or by copies; the
// error word cleared on the way in and brought back with the outputs in one copy. Both ways must
// score alike, uncaptured and replayed, and report a bad id in that run only.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "compile/plan.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_executor.h"
#endif

namespace rankd {
namespace {

using testing::GraphBuilder;

#if RANKD_HAVE_CUDA

constexpr int64_t kRows = 8, kIds = 20, kTableRows = 50, kWidth = 16;

// Eight bags of a table, plus a dense input, through a product. Outputs: the product, the sum
// before it, and the dense input itself (an output that is an input comes back in a copy of its own).
struct BagsAndProduct {
  GraphBuilder g;
  std::vector<TensorMeta> metas{{DType::kI64, {kIds}, nullptr}, {DType::kI64, {kRows + 1}, nullptr},
                                {DType::kF32, {kRows, kWidth}, nullptr}};
  BagsAndProduct() {
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
    g.Output(sum);
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
    auto executor = cuda->NewExecutor(*resources);
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

// The copies a run puts on the device: the inputs in one, the error word and both computed
// outputs back in one (copy nodes, or kernels counted as copies), the output that is an input in
// another. No memsets: the error word is cleared on the way in.
TEST_P(CudaInputsTest, CopiesPerRun) {
  auto launches = executor_->CountLaunches(*plan_);
  ASSERT_TRUE(launches.ok()) << launches.status().ToString();
  EXPECT_EQ(launches->copies, 3);
  EXPECT_EQ(launches->memsets, 0);
}

INSTANTIATE_TEST_SUITE_P(SmallInputs, CudaInputsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "KernelCopies" : "CopyNodes"; });

#endif  // RANKD_HAVE_CUDA

}  // namespace
}  // namespace rankd

// Executors write a run's outputs into memory the caller provides (Executor::RunInto): the plan's
// shapes or fewer rows, which then get the first rows and leave the caller's bytes past them as
// they were; outputs that cannot take the plan's are refused before anything runs. On the CPU and,
// where there is one, the GPU (uncaptured and replayed).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compile/plan.h"
#include "runtime/backends.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

constexpr int64_t kRows = 8, kWidth = 16, kColumns = 4;

// x [8, 16] · w [16, 4], and x + x.
struct ProductAndSum {
  GraphBuilder g;
  std::vector<TensorMeta> metas{{DType::kF32, {kRows, kWidth}, nullptr}};
  ProductAndSum() {
    std::mt19937_64 rng(3);
    int w = g.Const("w", testing::RandomF32({kWidth, kColumns}, rng));
    int x = g.Input("x", DType::kF32, {kRows, kWidth});
    g.Output(g.Op("MatMul", {x, w}));
    g.Output(g.Op("Add", {x, x}));
  }
};

// A caller's buffer of floats with a sentinel after the rows it lends out.
struct Room {
  std::vector<float> floats;
  Tensor view;
  Room(int64_t rows, int64_t columns) : floats(static_cast<size_t>((rows + 4) * columns), -7.0f) {
    view = Tensor::View(DType::kF32, {rows, columns}, floats.data());
  }
  bool SentinelIntact(int64_t rows, int64_t columns) const {
    for (size_t i = static_cast<size_t>(rows * columns); i < floats.size(); ++i) {
      if (floats[i] != -7.0f) return false;
    }
    return true;
  }
};

class ExecutorOutputsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = GetParam() == "cuda" ? testing::CudaOrNull() : &CpuBackend();
    if (!backend_) GTEST_SKIP() << "no CUDA device";
    PlanOptions options;
    options.backend = backend_;
    auto plan = Plan::Build(m_.g.graph(), m_.metas, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
    auto resources = backend_->PrepareModel(m_.g.graph(), Precision::kFp32);
    ASSERT_TRUE(resources.ok()) << resources.status().ToString();
    auto executor = NewExecutor(*backend_, *resources);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    executor_ = std::move(*executor);
  }

  // Runs into rooms of `rows` rows and expects the first rows of a plain Run's outputs there.
  void ExpectFirstRows(const std::vector<Tensor>& in, int64_t rows, const std::string& when) {
    auto whole = executor_->Run(*plan_, in);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    ASSERT_EQ(whole->size(), 2u);
    Room product(rows, kColumns), sum(rows, kWidth);
    std::vector<Tensor> outputs = {product.view, sum.view};
    Status ran = executor_->RunInto(*plan_, in, outputs);
    ASSERT_TRUE(ran.ok()) << when << ": " << ran.ToString();
    EXPECT_EQ(std::memcmp(product.floats.data(), (*whole)[0].raw(), static_cast<size_t>(rows * kColumns) * 4), 0)
        << when;
    EXPECT_EQ(std::memcmp(sum.floats.data(), (*whole)[1].raw(), static_cast<size_t>(rows * kWidth) * 4), 0) << when;
    EXPECT_TRUE(product.SentinelIntact(rows, kColumns)) << when << ": written past the rows asked for";
    EXPECT_TRUE(sum.SentinelIntact(rows, kWidth)) << when << ": written past the rows asked for";
    // And the sum's rows are x + x: the outputs are this run's, not a stale buffer's.
    for (int64_t i = 0; i < rows * kWidth; ++i)
      ASSERT_EQ(sum.floats[static_cast<size_t>(i)], 2 * in[0].data<float>()[i]);
  }

  const Backend* backend_ = nullptr;
  ProductAndSum m_;
  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<Executor> executor_;
};

TEST_P(ExecutorOutputsTest, WritesTheRowsAskedForIntoTheCallersMemory) {
  std::mt19937_64 rng(11);
  for (int64_t rows : {kRows, int64_t{3}, int64_t{1}, int64_t{0}}) {
    ExpectFirstRows({testing::RandomF32({kRows, kWidth}, rng)}, rows, "uncaptured, " + std::to_string(rows) + " rows");
  }
  auto captured = executor_->Capture(*plan_);
  if (!captured.ok()) {
    EXPECT_EQ(captured.status().code(), StatusCode::kUnimplemented) << captured.status().ToString();
    return;  // the CPU
  }
  ASSERT_TRUE(executor_->Captured(*plan_));
  for (int64_t rows : {kRows, int64_t{5}}) {
    ExpectFirstRows({testing::RandomF32({kRows, kWidth}, rng)}, rows, "replayed, " + std::to_string(rows) + " rows");
  }
}

TEST_P(ExecutorOutputsTest, RefusesOutputsThatCannotTakeThePlansAndRunsOn) {
  std::mt19937_64 rng(12);
  std::vector<Tensor> in = {testing::RandomF32({kRows, kWidth}, rng)};
  auto refused = [&](std::vector<Tensor> outputs, const std::string& words) {
    Status ran = executor_->RunInto(*plan_, in, outputs);
    EXPECT_EQ(ran.code(), StatusCode::kInvalidArgument) << words << ": " << ran.ToString();
    EXPECT_NE(ran.message().find(words), std::string::npos) << ran.ToString();
  };
  Tensor product = Tensor::Empty(DType::kF32, {kRows, kColumns}), sum = Tensor::Empty(DType::kF32, {kRows, kWidth});
  refused({product}, "the plan has 2 outputs; 1 were provided");
  refused({product, sum, sum}, "the plan has 2 outputs; 3 were provided");
  refused({Tensor::Empty(DType::kI32, {kRows, kColumns}), sum},
          "output 0 is INT32 [8, 4]; the plan writes FP32 [8, 4]");
  refused({product, Tensor::Empty(DType::kF32, {kRows + 1, kWidth})}, "output 1 is FP32 [9, 16]");
  refused({product, Tensor::Empty(DType::kF32, {kRows, kWidth - 1})}, "output 1 is FP32 [8, 15]");
  refused({Tensor::Empty(DType::kF32, {kRows * kColumns}), sum}, "output 0 is FP32 [32]");
  refused({Tensor::View(DType::kF32, {kRows, kColumns}, product.raw(), MemoryLocation::Device(0)), sum},
          "output 0 lies in GPU 0: outputs are written on the host");
  ExpectFirstRows(in, kRows, "after the refusals");
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecutorOutputsTest, ::testing::Values("cpu", "cuda"));

}  // namespace
}  // namespace rankd

// The CUDA backend against the CPU backend: every op on fresh random inputs and edge cases (odd
// sizes, broadcasts, empty bags, all -1, length-0 sequences; the cases in cuda_op_cases.h), bad ids,
// ragged tails and large inputs (the zoo models end to end: cuda_zoo_test.cc; which kernel takes a
// product: cuda_products_test.cc). Skipped where no CUDA device is present (CI); run on the GPU
// machine.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/device_health.h"
#endif
#include "compile/plan.h"
#include "cuda_op_cases.h"
#include "runtime/backends.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::BagInputs;
using testing::GraphBuilder;
using testing::OpCase;
using testing::Random;

class CudaOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpTest, MatchesCpuOnRandomInputs) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const OpCase& c = GetParam();
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int64_t> ragged;
    c.build(g, inputs, ragged, rng);
    auto want = testing::RunGraph(g.graph(), inputs, ragged, CpuBackend());
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = testing::RunGraph(g.graph(), inputs, ragged, *cuda);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      const Tensor &x = (*got)[i], &y = (*want)[i];
      ASSERT_EQ(x.dtype(), y.dtype());
      ASSERT_EQ(x.shape(), y.shape());
      double err = testing::RelativeError(x, y);
      bool all_zero = true;
      for (int64_t e = 0; e < y.size(); ++e) all_zero = all_zero && y.ScalarAsDouble(e) == 0.0;
      if (all_zero) {
        for (int64_t e = 0; e < x.size(); ++e) ASSERT_EQ(x.ScalarAsDouble(e), 0.0) << c.name << " element " << e;
      } else {
        EXPECT_LE(err, c.tolerance) << c.name << " seed " << seed;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTest, ::testing::ValuesIn(testing::CudaOpCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.name); });

#if RANKD_HAVE_CUDA
// Every op the CUDA backend has a kernel for is in some case above, so each kernel is compared with
// the CPU's on random inputs. The table is built without a device: this runs in CI too.
TEST(CudaBackend, EveryKernelHasACrossBackendCase) {
  std::set<std::string> covered;
  for (const OpCase& c : testing::CudaOpCases()) {
    std::mt19937_64 rng(1);
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int64_t> ragged;
    c.build(g, inputs, ragged, rng);
    for (const Node& n : g.graph().nodes) covered.insert(n.op);
  }
  covered.insert("FusedElementwise");  // made by a pass: elementwise_fusion_test.cc compares it on the GPU
  covered.insert("TargetAttention");   // likewise: attention_fusion_test.cc
  std::string missing;
  for (const auto& [op, kernel] : CudaKernels()) {
    if (!covered.count(op)) missing += " " + op;
  }
  EXPECT_TRUE(missing.empty()) << "CUDA kernels with no case in CudaOpCases():" << missing;
}

// Out of device memory is worth a retry (503); an error that poisons the context is named as such
// (and, noted, fails the backend's health: tests/gpu_faults_test.py); others are internal. No
// device needed: only the mapping is checked, nothing is noted.
TEST(CudaBackend, ErrorsMapToWhatTheClientCanDo) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorIllegalInstruction,
                        cudaErrorMisalignedAddress, cudaErrorAssert, cudaErrorECCUncorrectable}) {
    EXPECT_TRUE(cuda::IsStickyError(e)) << cudaGetErrorName(e);
  }
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorLaunchOutOfResources,
                        cudaErrorStreamCaptureInvalidated, cudaErrorNoDevice}) {
    EXPECT_FALSE(cuda::IsStickyError(e)) << cudaGetErrorName(e);
  }
  Status oom = cuda::Check(cudaErrorMemoryAllocation, "cudaMalloc");
  EXPECT_EQ(oom.code(), StatusCode::kUnavailable);
  EXPECT_NE(oom.message().find("out of device memory"), std::string::npos);
  Status bad = cuda::Check(cudaErrorInvalidValue, "cudaMemcpy");
  EXPECT_EQ(bad.code(), StatusCode::kInternal);
  EXPECT_NE(bad.message().find("cudaMemcpy"), std::string::npos);
}
#endif

// A concatenation of more than 16,384 bags (the large launch, a lane group per bag) with one id
// past its table, in the last bag: the run fails naming it, and with that id fixed the
// concatenation scores as the CPU's.
TEST(CudaBackend, IdOutOfRangeInALargeConcatenationFailsThatRunOnly) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(12);
  GraphBuilder g;
  std::vector<Tensor> in;
  std::vector<int> ins = BagInputs(g, in, rng, "0", 700, 128, 9000, 6, 0.1, 0.1, DType::kBF16, false);
  std::vector<int> more = BagInputs(g, in, rng, "1", 90, 32, 9000, 3, 0.1, 0.1, DType::kF32, false);
  ins.insert(ins.end(), more.begin(), more.end());
  g.Output(
      g.Op("ConcatEmbeddingBags", ins, {{"parts", std::vector<int64_t>{3, 3}}, {"modes", std::vector<int64_t>{0, 1}}}));
  Tensor& values = in[2];  // the second part's ids
  ASSERT_GT(values.size(), 0);
  const int64_t good = values.data<int64_t>()[values.size() - 1];
  values.data<int64_t>()[values.size() - 1] = 90;
  auto failed = testing::RunGraph(g.graph(), in, {}, *cuda);
  ASSERT_FALSE(failed.ok()) << "an id past the table was read";
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
  values.data<int64_t>()[values.size() - 1] = good;
  auto got = testing::RunGraph(g.graph(), in, {}, *cuda);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto want = testing::RunGraph(g.graph(), in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_LE(testing::RelativeError((*got)[0], (*want)[0]), 1e-3);
}

TEST(CudaBackend, IdOutOfRangeFailsThatRunOnly) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  GraphBuilder g;
  int table = g.Const("t", testing::MakeF32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  int ids = g.Input("ids", DType::kI64, {3});
  int offsets = g.Input("offsets", DType::kI64, {2});
  g.Output(g.Op("EmbeddingBag", {table, ids, offsets}));
  std::vector<TensorMeta> metas{{DType::kI64, {3}, nullptr}, {DType::kI64, {2}, nullptr}};
  PlanOptions options;
  options.backend = cuda;
  auto plan = Plan::Build(g.graph(), metas, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok());
  auto executor = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(executor.ok());
  // The ids go to the device in 32 bits (compile/narrowable_ids.h): ids beyond INT32's range must still be
  // out of range, never wrapped into the table.
  for (int64_t id : {int64_t{4}, (int64_t{1} << 32) + 1, int64_t{INT32_MAX} + 1, int64_t{1} << 62}) {
    std::vector<Tensor> bad{testing::MakeI64({3}, {0, id, 1}), testing::MakeI64({2}, {0, 3})};
    auto failed = (*executor)->Run(**plan, bad);
    ASSERT_FALSE(failed.ok()) << "id " << id << " was read as a row";
    EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
  }
  // The same executor then scores a good request correctly; a negative id beyond INT32's range
  // is an empty slot like any negative id.
  std::vector<Tensor> good{testing::MakeI64({3}, {0, 3, -(int64_t{1} << 40)}), testing::MakeI64({2}, {0, 3})};
  auto ok = (*executor)->Run(**plan, good);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].data<float>()[0], 8.0f);
  EXPECT_EQ((*ok)[0].data<float>()[1], 10.0f);
}

// A ragged input's ids may be shorter than the plan's (Executor::FillsRaggedTails): the slots
// after them read -1 whatever an earlier run of this or another plan left in the staging buffer,
// replayed captures included; only such inputs may be short, and none may be longer.
TEST(CudaBackend, ShortIdsReadAsMinusOneAfterThem) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  GraphBuilder g;
  int ids = g.Input("ids", DType::kI64, {-1});
  int x = g.Input("x", DType::kF32, {2});
  g.Output(g.Op("Neg", {ids}));  // shows every slot, the tail too
  g.Output(g.Op("Neg", {x}));
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok());
  auto executor = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->FillsRaggedTails());
  auto plan_for = [&](int64_t slots) {
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(g.graph(), {{DType::kI64, {slots}, nullptr}, {DType::kF32, {2}, nullptr}}, options);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return std::move(*plan);
  };
  std::shared_ptr<const Plan> eight = plan_for(8), sixteen = plan_for(16);
  // Runs `plan` on ids 10, 11, ... (`count` of them) and expects their negations, then 1 per slot.
  auto expect_run = [&](const Plan& plan, int64_t count, int64_t slots) {
    std::vector<int64_t> given(static_cast<size_t>(count)), want(static_cast<size_t>(slots), 1);
    for (int64_t i = 0; i < count; ++i) {
      given[static_cast<size_t>(i)] = 10 + i;
      want[static_cast<size_t>(i)] = -(10 + i);
    }
    std::vector<Tensor> in{testing::MakeI64({count}, given), testing::MakeF32({2}, {1, 2})};
    auto out = (*executor)->Run(plan, in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<int64_t> got((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + (*out)[0].size());
    EXPECT_EQ(got, want) << count << " ids in " << slots << " slots";
  };
  expect_run(*eight, 8, 8);
  expect_run(*eight, 3, 8);                        // the tail filled from 3
  expect_run(*eight, 6, 8);                        // ids over part of the old tail
  expect_run(*eight, 2, 8);                        // the tail filled from 2 up to 6 only
  expect_run(*sixteen, 16, 16);                    // another plan over the same staging bytes
  expect_run(*eight, 1, 8);                        // its leftovers are not taken for -1
  ASSERT_TRUE((*executor)->Capture(*eight).ok());  // staged zeros for its warm-up run
  ASSERT_TRUE((*executor)->Captured(*eight));
  expect_run(*eight, 4, 8);
  expect_run(*eight, 0, 8);

  auto refused = [&](std::vector<Tensor> in, const std::string& says) {
    auto out = (*executor)->Run(*eight, in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(says), std::string::npos) << out.status().ToString();
  };
  refused({testing::MakeI64({9}, std::vector<int64_t>(9, 1)), testing::MakeF32({2}, {1, 2})}, "has room for");
  refused({testing::MakeI64({8}, std::vector<int64_t>(8, 1)), testing::MakeF32({1}, {1})}, "not a ragged input's ids");
  refused({testing::MakeI64({8}, std::vector<int64_t>(8, 1))}, "takes 2 inputs");
  expect_run(*eight, 5, 8);  // and the executor still runs
}

// Inputs of tens of MB are packed and sent in chunks while the next chunk is packed
// (cuda_executor.cc): every byte must arrive, in every input, whatever the chunk edges; a small
// run between two large ones on the same executor still sends its inputs in one copy.
TEST(CudaBackend, LargeInputsSentInChunksArriveWhole) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  GraphBuilder g;
  int a = g.Input("a", DType::kF32, {-1});
  int b = g.Input("b", DType::kF32, {-1});
  int c = g.Input("c", DType::kI64, {-1});
  g.Output(g.Op("Add", {a, b}));
  g.Output(g.Op("Neg", {c}));
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok());
  auto executor = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(executor.ok());
  std::mt19937_64 rng(8);
  for (int64_t n : {int64_t{3'000'017}, int64_t{5}, int64_t{2'100'001}}) {  // 36 MB, bytes, 25 MB of inputs
    std::vector<Tensor> in{testing::RandomF32({n}, rng), testing::RandomF32({n}, rng), Tensor::Zeros(DType::kI64, {n})};
    for (int64_t i = 0; i < n; ++i) in[2].data<int64_t>()[i] = static_cast<int64_t>(rng() >> 20);
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(
        g.graph(), {{DType::kF32, {n}, nullptr}, {DType::kF32, {n}, nullptr}, {DType::kI64, {n}, nullptr}}, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto got = (*executor)->Run(**plan, in);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto want = testing::RunGraph(g.graph(), in);
    ASSERT_TRUE(want.ok());
    for (size_t o = 0; o < 2; ++o) {
      ASSERT_EQ((*got)[o].bytes(), (*want)[o].bytes());
      EXPECT_EQ(std::memcmp((*got)[o].raw(), (*want)[o].raw(), (*want)[o].bytes()), 0) << "n " << n << " output " << o;
    }
  }
}

// The products again with bf16 operands (weights rounded once at load, other operands rounded
// per product): within bf16's tolerance of the CPU, and not exact (the rounding is applied).
TEST(CudaBackend, ProductsWithBf16OperandsStayWithinTheirTolerance) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  int products = 0;
  for (const OpCase& c : testing::CudaOpCases()) {
    const std::string name = c.name;
    if (name.rfind("matmul", 0) != 0 && name.rfind("gemm", 0) != 0 && name.rfind("einsum", 0) != 0) continue;
    ++products;
    std::mt19937_64 rng(9);
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int64_t> ragged;
    c.build(g, inputs, ragged, rng);
    auto want = testing::RunGraph(g.graph(), inputs, ragged, CpuBackend());
    auto got = testing::RunGraph(g.graph(), inputs, ragged, *cuda, Precision::kBf16);
    ASSERT_TRUE(want.ok() && got.ok()) << name << ": " << got.status().ToString();
    double err = testing::RelativeError((*got)[0], (*want)[0]);
    EXPECT_LE(err, 3e-2) << name;
    EXPECT_GT(err, 0.0) << name << " rounds like fp32: are the operands rounded?";
  }
  EXPECT_GT(products, 10);
}

}  // namespace
}  // namespace rankd

// Matrix products on the CUDA backend: which kernel takes a product (the few-rows, few-columns
// and short-k kernels, padded k for cuBLASLt), each checked against the CPU, and cuBLASLt's
// algorithm timed once a process. Skipped where no CUDA device is present (CI); run on the GPU
// machine.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "compile/plan.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/gemm.h"
#include "runtime/backends.h"
#include "runtime/cuda/bf16_copies.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

// Kernels a bf16 run of `graph` (one FP32 input of `width` columns) launches at each of `rows`,
// each run checked against the CPU: within bf16's tolerance, and rounded.
std::vector<int> Bf16ProductLaunches(const Backend* cuda, const Graph& graph, int64_t width,
                                     std::initializer_list<int64_t> rows, std::mt19937_64& rng) {
  std::vector<int> kernels;
  auto resources = cuda->PrepareModel(graph, Precision::kBf16);
  EXPECT_TRUE(resources.ok()) << resources.status().ToString();
  if (!resources.ok()) return kernels;
  auto executor = NewExecutor(*cuda, *resources);
  EXPECT_TRUE(executor.ok());
  if (!executor.ok()) return kernels;
  for (int64_t r : rows) {
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(graph, {{DType::kF32, {r, width}, nullptr}}, options);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (!plan.ok()) return kernels;
    auto launches = (*executor)->CountLaunches(**plan);
    EXPECT_TRUE(launches.ok()) << launches.status().ToString();
    kernels.push_back(launches.ok() ? launches->kernels : -1);
    std::vector<Tensor> in{testing::RandomF32({r, width}, rng)};
    auto got = (*executor)->Run(**plan, in);
    auto want = testing::RunGraph(graph, in);
    EXPECT_TRUE(got.ok() && want.ok()) << got.status().ToString();
    if (!got.ok() || !want.ok()) return kernels;
    const double err = testing::RelativeError((*got)[0], (*want)[0]);
    EXPECT_LE(err, 2e-2) << r << " rows";
    EXPECT_GT(err, 0.0) << r << " rows: are the operands rounded?";
  }
  return kernels;
}

// A bf16 product of a few rows with a weight matrix is one kernel: no conversion of A, no split-K
// reduction (small_rows_gemm.h); nine rows take cuBLASLt and the conversion of A.
TEST(CudaBackend, FewRowProductsAreOneKernel) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(3);
  GraphBuilder g;
  int x = g.Input("x", DType::kF32, {-1, 3456});
  g.Output(g.Op("MatMul", {x, g.Const("w", testing::RandomF32({3456, 512}, rng))}));
  std::vector<int> kernels = Bf16ProductLaunches(cuda, g.graph(), 3456, {1, 8, 9}, rng);
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[0], 1) << "1 row";
  EXPECT_EQ(kernels[1], 1) << "8 rows";
  EXPECT_GE(kernels[2], 2) << "9 rows";
}

// A product's algorithm is timed once a process: the first executor to meet it times the
// candidates, the next takes that choice, and so both compute it bit for bit alike.
TEST(CudaBackend, ExecutorsShareTheTimedChoiceOfAProduct) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(17);
  GraphBuilder g;
  int x = g.Input("x", DType::kF32, {-1, 328});  // a shape no other test runs, so timed here first
  g.Output(g.Op("MatMul", {x, g.Const("w", testing::RandomF32({328, 584}, rng))}));
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  PlanOptions options;
  options.backend = cuda;
  auto plan = Plan::Build(g.graph(), {{DType::kF32, {1531, 328}, nullptr}}, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<Tensor> in{testing::RandomF32({1531, 328}, rng)};
  auto first = NewExecutor(*cuda, *resources), second = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(first.ok() && second.ok());
  const cuda::GemmTunings before = cuda::CountGemmTunings();
  auto got_first = (*first)->Run(**plan, in);
  ASSERT_TRUE(got_first.ok()) << got_first.status().ToString();
  const cuda::GemmTunings after_first = cuda::CountGemmTunings();
  if (after_first.timed == before.timed)
    GTEST_SKIP() << "nothing timed: cuBLASLt offered one algorithm, or tuning is off";
  EXPECT_EQ(after_first.timed, before.timed + 1);
  auto got_second = (*second)->Run(**plan, in);
  ASSERT_TRUE(got_second.ok()) << got_second.status().ToString();
  const cuda::GemmTunings after_second = cuda::CountGemmTunings();
  EXPECT_EQ(after_second.timed, after_first.timed) << "the second executor timed the product again";
  EXPECT_EQ(after_second.reused, after_first.reused + 1);
  ASSERT_EQ((*got_first)[0].bytes(), (*got_second)[0].bytes());
  EXPECT_EQ(std::memcmp((*got_first)[0].raw(), (*got_second)[0].raw(), (*got_first)[0].bytes()), 0);
  auto want = testing::RunGraph(g.graph(), in);
  ASSERT_TRUE(want.ok());
  EXPECT_LE(testing::RelativeError((*got_first)[0], (*want)[0]), 1e-5);
}

// So is a bf16 product of many rows with a few columns, taken transposed: a score's last layer with
// its bias and sigmoid is one kernel, where cuBLASLt took the bias's broadcast, the product and
// the sigmoid.
TEST(CudaBackend, FewColumnProductsAreOneKernel) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(4);
  GraphBuilder g;
  int x = g.Input("x", DType::kF32, {-1, 256});
  g.Output(g.Op("Gemm",
                {x, g.Const("w", testing::RandomF32({1, 256}, rng)), g.Const("c", testing::RandomF32({1}, rng))},
                {{"transB", int64_t{1}}, {"activation", std::string("Sigmoid")}}));
  EXPECT_EQ(Bf16ProductLaunches(cuda, g.graph(), 256, {9, 512}, rng), (std::vector<int>{1, 1}));
}

// A bf16 product over a short k of up to 512 rows is one kernel, where cuBLASLt converted A and
// often reduced split-K parts: W1's first bottom layer (13 features, bias, ReLU), rounded as any
// bf16 product; more rows take cuBLASLt. A short-k product whose A its producer wrote in bf16
// alone (a hidden layer of eight, read only by the next product) reads that copy.
TEST(CudaBackend, ShortKProductsAreOneKernel) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(5);
  {
    GraphBuilder g;
    int x = g.Input("x", DType::kF32, {-1, 13});
    g.Output(g.Op("MatMul",
                  {x, g.Const("w", testing::RandomF32({13, 512}, rng)), g.Const("b", testing::RandomF32({512}, rng))},
                  {{"activation", std::string("Relu")}}));
    std::vector<int> kernels = Bf16ProductLaunches(cuda, g.graph(), 13, {1, 9, 64, 512, 513}, rng);
    ASSERT_EQ(kernels.size(), 5u);
    EXPECT_EQ(std::vector<int>(kernels.begin(), kernels.begin() + 4), (std::vector<int>{1, 1, 1, 1}));
    EXPECT_GE(kernels[4], 2) << "513 rows take cuBLASLt";
  }
  // The weight as [N, K] (Gemm with transB), an even and an odd number of columns.
  for (int64_t n : {36, 37}) {
    GraphBuilder g;
    int x = g.Input("x", DType::kF32, {-1, 13});
    g.Output(g.Op("Gemm",
                  {x, g.Const("w", testing::RandomF32({n, 13}, rng)), g.Const("c", testing::RandomF32({n}, rng))},
                  {{"transB", int64_t{1}}, {"activation", std::string("Relu")}}));
    EXPECT_EQ(Bf16ProductLaunches(cuda, g.graph(), 13, {1, 300}, rng), (std::vector<int>{1, 1})) << n << " columns";
  }
  GraphBuilder g;
  int x = g.Input("x", DType::kF32, {-1, 64});
  int hidden = g.Op("MatMul", {x, g.Const("w1", testing::RandomF32({64, 8}, rng))});
  g.Output(g.Op("MatMul", {hidden, g.Const("w2", testing::RandomF32({8, 40}, rng))}));
  PlanOptions options;
  options.backend = cuda;
  auto plan = Plan::Build(g.graph(), {{DType::kF32, {70, 64}, nullptr}}, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const cuda::Bf16Copies copies = cuda::PlanBf16Copies(**plan);
  ASSERT_EQ(copies.read.size(), 2u);
  EXPECT_GE(copies.read[1], 0) << "the second product reads the first's bf16 copy";
  std::vector<int> kernels = Bf16ProductLaunches(cuda, g.graph(), 64, {70}, rng);
  EXPECT_EQ(kernels, (std::vector<int>{2}));
}

// A bf16 product of many rows over a k that is not a multiple of 8 pads both operands' rows with
// zeros (gemm.cc), so that cuBLASLt's Hopper kernels take it: the weight as [N, K] (Gemm with
// transB) and as [K, N] (MatMul), short and longer k, each against the CPU.
TEST(CudaBackend, ProductsOverAnUnalignedKPadIt) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(6);
  for (int64_t k : {13, 20, 3}) {
    GraphBuilder g;
    int x = g.Input("x", DType::kF32, {-1, k});
    g.Output(g.Op("Gemm",
                  {x, g.Const("w", testing::RandomF32({96, k}, rng)), g.Const("c", testing::RandomF32({96}, rng))},
                  {{"transB", int64_t{1}}, {"activation", std::string("Relu")}}));
    EXPECT_EQ(Bf16ProductLaunches(cuda, g.graph(), k, {600, 3001}, rng).size(), 2u) << "k " << k;
    GraphBuilder m;
    int y = m.Input("x", DType::kF32, {-1, k});
    m.Output(m.Op("MatMul", {y, m.Const("w", testing::RandomF32({k, 40}, rng))}));
    EXPECT_EQ(Bf16ProductLaunches(cuda, m.graph(), k, {777}, rng).size(), 1u) << "k " << k;
  }
  // One weight read as [K, N] by one product and as [N, K] by another gets no padded copy: one
  // copy's layout would be wrong for the other product.
  GraphBuilder g;
  int x = g.Input("x", DType::kF32, {-1, 13});
  int w = g.Const("w", testing::RandomF32({13, 13}, rng));
  g.Output(g.Op("Add", {g.Op("MatMul", {x, w}), g.Op("Gemm", {x, w}, {{"transB", int64_t{1}}})}));
  EXPECT_EQ(Bf16ProductLaunches(cuda, g.graph(), 13, {600}, rng).size(), 1u);
}

}  // namespace
}  // namespace rankd
#endif  // RANKD_HAVE_CUDA

// The split-k product kernel (backend/cuda/split_k_gemm.h) through the CUDA backend: bf16
// products writing their bf16 copy alone (read by the next product) or the graph's fp32 output,
// against the CPU and against cuBLASLt, uncaptured and in a captured graph, and which products it
// takes; and a cross network whose kernels start early (dependent_launch.cuh), replayed.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "compile/passes.h"
#include "compile/plan.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/product_muladd.h"
#include "backend/cuda/split_k_gemm.h"
#include "runtime/backends.h"
#include "runtime/cuda/bf16_copies.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::RandomF32;

struct Case {
  int64_t rows, k, n;      // the first product: [rows, k] · [k, n]
  const char* activation;  // its epilogue, with a bias ("" for none, and no bias)
  int64_t second_n;        // the second product, [rows, n] · [n, second_n] (no bias), or 0: none
  bool taken;              // whether the kernel takes the first on a Hopper device
};

// x → Gemm(w1ᵀ, bias, activation) (→ MatMul(w2), which no kernel of this kind takes: k = n is
// short): W1's down-projection and top MLP's first layer at few rows, the fewest rows it takes
// (9: eight take the few-rows kernel), rows that leave a tile part empty, the shortest k it takes
// (32 steps of 64, four a block) and one step less, a product with an fp32 output (the graph's),
// and one of too many tiles.
const Case kCases[] = {
    {9, 3456, 512, "", 128, true},          {64, 3456, 1024, "Relu", 256, true},
    {130, 3456, 256, "Sigmoid", 128, true}, {100, 2048, 512, "GeluTanh", 256, true},
    {64, 1984, 512, "Relu", 128, false},    {200, 2048, 384, "Relu", 0, true},
    {512, 3456, 1024, "Relu", 128, false},
};

std::string Name(const Case& c) {
  return std::to_string(c.rows) + " rows, k " + std::to_string(c.k) + ", n " + std::to_string(c.n) + " " + c.activation;
}

Graph Products(const Case& c, std::mt19937_64& rng) {
  GraphBuilder g;
  int x = g.Input("x", DType::kF32, {-1, c.k});
  std::vector<int> first = {x, g.Const("w1", RandomF32({c.n, c.k}, rng, -0.05, 0.05))};
  std::map<std::string, AttributeValue> attrs{{"transB", int64_t{1}}};
  if (*c.activation) {
    first.push_back(g.Const("b1", RandomF32({c.n}, rng, -0.5, 0.5)));
    attrs["activation"] = std::string(c.activation);
  }
  int hidden = g.Op("Gemm", first, attrs);
  g.Output(c.second_n ? g.Op("MatMul", {hidden, g.Const("w2", RandomF32({c.n, c.second_n}, rng, -0.1, 0.1))}) : hidden);
  return g.graph();
}

// An executor of `graph` at `precision` and its plan for one FP32 input of [rows, width].
struct Bound {
  std::unique_ptr<Executor> executor;
  std::shared_ptr<const Plan> plan;
};
StatusOr<Bound> Bind(const Backend& cuda, const Graph& graph, Precision precision, int64_t rows, int64_t width) {
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<ModelResources> resources, cuda.PrepareModel(graph, precision));
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, NewExecutor(cuda, resources));
  PlanOptions options;
  options.backend = &cuda;
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan,
                         Plan::Build(graph, {{DType::kF32, {rows, width}, nullptr}}, options));
  return Bound{std::move(executor), std::move(plan)};
}

// Captures b's plan and replays it `replays` times on `in`: each replay gives the bits of `first`.
void ExpectReplaysTheSameBits(Bound& b, const std::vector<Tensor>& in, const Tensor& first, int replays,
                              const std::string& what) {
  ASSERT_TRUE(b.executor->Capture(*b.plan).ok()) << what;
  ASSERT_TRUE(b.executor->Captured(*b.plan)) << what;
  for (int replay = 0; replay < replays; ++replay) {
    auto again = b.executor->Run(*b.plan, in);
    ASSERT_TRUE(again.ok()) << what << ": " << again.status().ToString();
    ASSERT_EQ((*again)[0].size(), first.size()) << what;
    ASSERT_EQ(0, memcmp((*again)[0].data<float>(), first.data<float>(), first.size() * sizeof(float)))
        << what << ", replay " << replay;
  }
}

TEST(SplitKGemm, MatchesTheCpuAndCublasLtCapturedOrNot) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (const Case& c : kCases) {
    const std::string what = Name(c);
    std::mt19937_64 rng(static_cast<uint64_t>(c.rows * 31 + c.k + c.n));
    const Graph graph = Products(c, rng);
    std::vector<Tensor> in{RandomF32({c.rows, c.k}, rng)};
    auto want = testing::RunGraph(graph, in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto bound = Bind(*cuda, graph, Precision::kBf16, c.rows, c.k);
    ASSERT_TRUE(bound.ok()) << what << ": " << bound.status().ToString();
    if (c.second_n) {
      const cuda::Bf16Copies copies = cuda::PlanBf16Copies(*bound->plan);
      ASSERT_EQ(copies.read.size(), 2u);
      ASSERT_GE(copies.read[1], 0) << what << ": the second product reads the first's bf16 output";
    }

    const int64_t before = cuda::SplitKGemmRuns();
    auto got = bound->executor->Run(*bound->plan, in);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    EXPECT_EQ(cuda::SplitKGemmRuns() - before, testing::CudaIsHopper() && c.taken ? 1 : 0) << what;
    const double err = testing::RelativeError((*got)[0], (*want)[0]);
    EXPECT_LE(err, 2e-2) << what;
    EXPECT_GT(err, 0.0) << what << ": are the operands rounded?";

    cuda::EnableSplitKGemm(false);
    auto lt_bound = Bind(*cuda, graph, Precision::kBf16, c.rows, c.k);
    ASSERT_TRUE(lt_bound.ok()) << lt_bound.status().ToString();
    const int64_t lt_before = cuda::SplitKGemmRuns();
    auto lt = lt_bound->executor->Run(*lt_bound->plan, in);
    cuda::EnableSplitKGemm(true);
    ASSERT_TRUE(lt.ok()) << lt.status().ToString();
    EXPECT_EQ(cuda::SplitKGemmRuns(), lt_before) << what << ": switched off";
    EXPECT_LE(testing::RelativeError((*got)[0], (*lt)[0]), 1e-2) << what << ": against cuBLASLt";

    // In a captured graph: the same bits (the parts' sums are added in a fixed order).
    ExpectReplaysTheSameBits(*bound, in, (*got)[0], 2, what);
  }
}

// A DCN cross network at 64 rows and width 2,048: each layer's down-projection (k = 2,048 to 512)
// takes the split-k kernel and its up-projection the fused multiply-add, each launched to start
// while the one before finishes (dependent_launch.cuh), then the score's few-columns product. Run
// uncaptured, then replayed from a captured graph twenty times: every replay the same bits, and
// all within bf16's rounding of the CPU.
TEST(SplitKGemm, CrossLayersLaunchedDependentReplayTheSameBits) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(21);
  const int64_t rows = 64, features = 32;
  const Graph unfused = testing::CrossNetwork(rows, features, 2048, 512, 3, rng);
  const std::vector<Tensor> inputs = {RandomF32({rows, features}, rng, -1, 1)};
  Graph g = unfused;
  auto probe = Plan::Build(g, {{DType::kF32, {rows, features}, nullptr}});
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  ASSERT_EQ(FuseProductMulAdds(g, (*probe)->values()), 3);
  auto want = testing::RunGraph(unfused, inputs);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  auto bound = Bind(*cuda, g, Precision::kBf16Activations, rows, features);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  const int64_t split = cuda::SplitKGemmRuns(), fused = cuda::FusedProductMulAddRuns();
  auto got = bound->executor->Run(*bound->plan, inputs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const bool hopper = testing::CudaIsHopper();
  EXPECT_EQ(cuda::SplitKGemmRuns() - split, hopper ? 3 : 0);
  EXPECT_EQ(cuda::FusedProductMulAddRuns() - fused, hopper ? 3 : 0);
  testing::ExpectOutputsNear(*got, *want, 3e-2, "uncaptured");
  ExpectReplaysTheSameBits(*bound, inputs, (*got)[0], 20, "cross network");
}

}  // namespace
}  // namespace rankd

#endif  // RANKD_HAVE_CUDA

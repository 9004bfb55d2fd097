// MLP chains: the pass that makes them (compile/mlp_chain_fusion.cc), their schema, the CPU twin,
// and the CUDA kernel (backend/cuda/mlp_chain.h) against the CPU, in one kernel and layer by layer.
#include <gtest/gtest.h>

#include <random>

#if RANKD_HAVE_CUDA
#include "backend/cuda/mlp_chain.h"
#endif
#include "compile/passes.h"
#include "compile/plan.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::RandomF32;

std::vector<TensorMeta> MetasOf(const std::vector<Tensor>& inputs) {
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back({t.dtype(), t.shape(), nullptr});
  return metas;
}

// y = act(x · Wᵀ + b) with W [n, k] (scaled so that activations stay near 1) and b [n].
int Layer(GraphBuilder& b, int x, int64_t k, int64_t n, const char* activation, std::mt19937_64& rng) {
  const float scale = 1.5f / std::sqrt(static_cast<float>(k));
  std::map<std::string, AttributeValue> attrs = {{"transB", int64_t{1}}};
  if (activation) attrs["activation"] = std::string(activation);
  return b.Op("Gemm", {x, b.Const("w", RandomF32({n, k}, rng, -scale, scale)), b.Const("b", RandomF32({n}, rng, -0.2f, 0.2f))}, attrs);
}

// Three MLPs over one input: one whose last three layers fit a chain (its first would take the
// chain's weights past kMlpChainMaxWeights), one whose hidden result is also an output, one whose
// head is too wide.
TEST(MlpChainFusion, FusesAnMlpsLastLayersAndItsHeadAndScoresTheSame) {
  std::mt19937_64 rng(5);
  const int64_t rows = 9;
  GraphBuilder b;
  const int x = b.Input("x", DType::kF32, {rows, 512});
  const int wide = Layer(b, x, 512, 1024, "Relu", rng);
  b.Output(Layer(b, Layer(b, Layer(b, wide, 1024, 512, "Relu", rng), 512, 256, "Relu", rng), 256, 1, "Sigmoid", rng));
  const int shown = Layer(b, x, 512, 64, "Relu", rng);
  b.Output(shown);
  b.Output(Layer(b, shown, 64, 1, nullptr, rng));
  b.Output(Layer(b, Layer(b, x, 512, 64, "Relu", rng), 64, 16, nullptr, rng));
  const Graph unfused = b.graph();
  const std::vector<Tensor> inputs = {RandomF32({rows, 512}, rng)};
  Graph g = unfused;
  auto probe = Plan::Build(g, MetasOf(inputs));
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(FuseMlpChains(g, (*probe)->values()), 1);
  EXPECT_EQ(testing::CountOps(g, "MlpChain"), 1);
  EXPECT_EQ(testing::CountOps(g, "Gemm"), 5);
  for (const Node& n : g.nodes) {
    if (n.op != "MlpChain") continue;
    EXPECT_EQ(n.NumInputs(), 7);
    EXPECT_EQ(n.inputs[0], wide);
    EXPECT_EQ(n.GetInts("activations"), (std::vector<int64_t>{static_cast<int64_t>(Activation::kRelu), static_cast<int64_t>(Activation::kRelu),
                                                              static_cast<int64_t>(Activation::kSigmoid)}));
  }
  testing::ExpectSameOutputs(g, unfused, inputs, 1e-5, "fused on the CPU");
  auto again = Plan::Build(g, MetasOf(inputs));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(FuseMlpChains(g, (*again)->values()), 0);
}

// The planner refuses a chain whose activations, weights or biases do not line up.
TEST(MlpChainFusion, SchemaRefusesChainsThatDoNotLineUp) {
  std::mt19937_64 rng(6);
  auto plan = [&](Shape w1, Shape b1, std::vector<int64_t> activations) {
    GraphBuilder b;
    const int x = b.Input("x", DType::kF32, {4, 8});
    b.Output(b.Op("MlpChain", {x, b.Const("w0", RandomF32({16, 8}, rng)), b.Const("b0", RandomF32({16}, rng)),
                               b.Const("w1", RandomF32(w1, rng)), b.Const("b1", RandomF32(b1, rng))},
                  {{"activations", activations}}));
    return Plan::Build(b.graph(), {{DType::kF32, {4, 8}, nullptr}});
  };
  auto fine = plan({2, 16}, {2}, {1, 3});
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  auto expect_error = [](const StatusOr<std::shared_ptr<const Plan>>& p, const std::string& text) {
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.status().ToString().find(text), std::string::npos) << p.status().ToString();
  };
  expect_error(plan({2, 12}, {2}, {1, 3}), "must be [N, 16]");
  expect_error(plan({2, 16}, {3}, {1, 3}), "bias");
  expect_error(plan({2, 16}, {2}, {1}), "one activation per layer");
  expect_error(plan({2, 16}, {2}, {1, 9}), "unknown activation");
}

#if RANKD_HAVE_CUDA

// W1's top MLP's end (1,024 → 512 → 256 → 1) behind a product whose bf16 copy it reads, and the
// same chain reading an fp32 graph input, on CUDA with bf16-activations: in one kernel and layer
// by layer, against the CPU's fp32 unfused. Rows from 1 to 512 (clusters of 48 rows cut short)
// take the kernel on an sm_90 device; 4,096 rows need more clusters than run at once, and go
// layer by layer.
TEST(MlpChainFusion, CudaChainScoresAsTheCpuInOneKernelOrLayerByLayer) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (bool behind_product : {true, false}) {
    for (int64_t rows : {1, 5, 33, 300, 512, 4096}) {
      std::mt19937_64 rng(static_cast<uint64_t>(rows * 2 + behind_product));
      GraphBuilder b;
      const int64_t features = behind_product ? 40 : 1024;
      const int x = b.Input("x", DType::kF32, {rows, features});
      const int top = behind_product ? Layer(b, x, features, 1024, "Relu", rng) : x;
      b.Output(Layer(b, Layer(b, Layer(b, top, 1024, 512, "Relu", rng), 512, 256, "Relu", rng), 256, 1, "Sigmoid", rng));
      const Graph unfused = b.graph();
      const std::vector<Tensor> inputs = {RandomF32({rows, features}, rng)};
      Graph g = unfused;
      auto probe = Plan::Build(g, MetasOf(inputs));
      ASSERT_TRUE(probe.ok()) << probe.status().ToString();
      ASSERT_EQ(FuseMlpChains(g, (*probe)->values()), 1);
      auto want = testing::RunGraph(unfused, inputs);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      const std::string what = std::to_string(rows) + " rows" + (behind_product ? " behind a product" : " from an input");
      for (bool kernel : {true, false}) {
        cuda::EnableMlpChainKernel(kernel);
        const int64_t runs = cuda::MlpChainKernelRuns();
        auto got = testing::RunGraph(g, inputs, {}, *cuda, Precision::kBf16Activations);
        cuda::EnableMlpChainKernel(true);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const bool fits = kernel && rows <= 512 && testing::CudaIsHopper();
        EXPECT_EQ(cuda::MlpChainKernelRuns() - runs, fits ? 1 : 0) << what;
        testing::ExpectOutputsNear(*got, *want, 2e-2, what + (kernel ? ", one kernel" : ", layer by layer"));
      }
      // Plain fp32 runs it layer by layer with no bf16 copies.
      auto fp32 = testing::RunGraph(g, inputs, {}, *cuda, Precision::kFp32);
      ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
      testing::ExpectOutputsNear(*fp32, *want, 1e-3, what + ", fp32");
    }
  }
}

#endif  // RANKD_HAVE_CUDA

}  // namespace
}  // namespace rankd

// Products with a multiply-add epilogue: the pass that makes them
// (compile/product_muladd_fusion.cc), their schema, the CPU twin, and the CUDA kernels
// (backend/cuda/product_muladd.h) against the CPU.
#include <gtest/gtest.h>

#include <random>

#if RANKD_HAVE_CUDA
#include "backend/cuda/product_muladd.h"
#endif
#include "compile/passes.h"
#include "compile/plan.h"
#include "serving/model.h"
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

// A graph of products read by MulAdds: four that fuse (a Gemm with a bias, one without and the
// product on the MulAdd's left, a Gemm with a ReLU, a MatMul of a 3-D activation by a constant
// matrix) and three that do not (a product read twice, a MulAdd that broadcasts, a MatMul by a
// computed matrix).
struct Products {
  GraphBuilder b;
  std::vector<Tensor> inputs;

  explicit Products(std::mt19937_64& rng) {
    const int64_t m = 5, k = 7, n = 6;
    auto in = [&](const char* name, Shape s) {
      inputs.push_back(RandomF32(s, rng));
      return b.Input(name, DType::kF32, s);
    };
    int h = in("h", {m, k}), x0 = in("x0", {m, n}), x = in("x", {m, n});
    int h3 = in("h3", {2, 3, k}), x0_3 = in("x0_3", {2, 3, n}), x_3 = in("x_3", {2, 3, n});
    int wt = b.Const("wt", RandomF32({n, k}, rng)), w = b.Const("w", RandomF32({k, n}, rng));
    int bias = b.Const("bias", RandomF32({n}, rng));
    b.Output(b.Op("MulAdd", {x0, b.Op("Gemm", {h, wt, bias}, {{"transB", int64_t{1}}}), x}));
    b.Output(b.Op("MulAdd", {b.Op("Gemm", {h, w}), x0, x}));
    b.Output(b.Op("MulAdd", {x, b.Op("Gemm", {h, w}, {{"activation", std::string("Relu")}}), x0}));
    b.Output(b.Op("MulAdd", {x0_3, b.Op("MatMul", {h3, w}), x_3}));
    int shared = b.Op("Gemm", {h, w});
    b.Output(b.Op("MulAdd", {x0, shared, x}));
    b.Output(shared);
    b.Output(b.Op("MulAdd", {bias, b.Op("Gemm", {h, w}), x}));  // the multiplier broadcasts
    int computed = b.Op("Relu", {b.Op("Transpose", {wt}, {{"perm", std::vector<int64_t>{1, 0}}})});
    b.Output(b.Op("MulAdd", {x0, b.Op("MatMul", {h, computed}), x}));
  }
};

TEST(ProductMulAddFusion, FusesWeightProductsReadOnceAndScoresTheSame) {
  std::mt19937_64 rng(11);
  Products p(rng);
  Graph g = p.b.graph();
  auto probe = Plan::Build(g, MetasOf(p.inputs));
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(FuseProductMulAdds(g, (*probe)->values()), 4);
  EXPECT_EQ(testing::CountOps(g, "MulAdd"), 3);
  int with_epilogue = 0;
  for (const Node& n : g.nodes) {
    if (!n.HasInput(3)) continue;
    ++with_epilogue;
    EXPECT_TRUE(n.op == "Gemm" || n.op == "MatMul") << n.op;
    EXPECT_EQ(n.NumInputs(), 5);
  }
  EXPECT_EQ(with_epilogue, 4);
  // Still in topological order, and every output as before.
  auto before = testing::RunGraph(p.b.graph(), p.inputs);
  auto after = testing::RunGraph(g, p.inputs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  testing::ExpectOutputsNear(*after, *before, 1e-6, "fused");
  // Nothing left to fuse the second time.
  auto again = Plan::Build(g, MetasOf(p.inputs));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(FuseProductMulAdds(g, (*again)->values()), 0);
}

// Inputs 3 and 4 come together and have the product's shape; a planner refuses anything else.
TEST(ProductMulAddFusion, SchemaRefusesAnEpilogueOfTheWrongShape) {
  std::mt19937_64 rng(12);
  auto plan = [&](int64_t multiplier_cols, bool with_addend) {
    GraphBuilder b;
    int h = b.Input("h", DType::kF32, {4, 3});
    int m = b.Input("m", DType::kF32, {4, multiplier_cols});
    int c = b.Input("c", DType::kF32, {4, 5});
    std::vector<int> ins{h, b.Const("w", RandomF32({3, 5}, rng)), -1, m};
    if (with_addend) ins.push_back(c);
    b.Output(b.Op("Gemm", ins));
    return Plan::Build(
        b.graph(),
        {{DType::kF32, {4, 3}, nullptr}, {DType::kF32, {4, multiplier_cols}, nullptr}, {DType::kF32, {4, 5}, nullptr}});
  };
  EXPECT_TRUE(plan(5, true).ok());
  auto wrong_shape = plan(1, true);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().ToString().find("must have the product's shape"), std::string::npos)
      << wrong_shape.status().ToString();
  auto alone = plan(5, false);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().ToString().find("needs inputs 3 and 4"), std::string::npos) << alone.status().ToString();
}

// The zoo's DCNv2 on the CPU: its three cross layers become products with the epilogue, and the
// scores stay PyTorch's.
TEST(ProductMulAddFusion, ZooDcnCrossLayersFuseAndScoreAsPyTorch) {
  auto model = Model::Load(testing::SourcePath("models/zoo/dlrm_dcnv2"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->load_report().fused_product_mul_adds, 3);
  testing::ExpectZooScores(**model, "dlrm_dcnv2", 1e-5);
}

#if RANKD_HAVE_CUDA

// The CUDA backend takes the pass with bf16-activations only (cuda_backend.cc says why): the
// zoo's DCNv2 keeps its MulAdds in bf16 and fuses its three cross layers in bf16-activations,
// and the scores stay the CPU's within bf16's rounding, run either way (the zoo's small widths
// take two kernels; W1's 3,456 the fused one: docs/log/benchmarks.md).
TEST(ProductMulAddFusion, CudaFusesTheZooCrossLayersWithBf16Activations) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.precision = "bf16";
  auto bf16 = Model::Load(dir, -1, options);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ((*bf16)->load_report().fused_product_mul_adds, 0);
  options.precision = "bf16-activations";
  options.shape_buckets = 0;  // no captured graphs: every run launches as the switch says now
  auto act = Model::Load(dir, -1, options);
  ASSERT_TRUE(act.ok()) << act.status().ToString();
  EXPECT_EQ((*act)->load_report().fused_product_mul_adds, 3);
  auto cpu = Model::Load(dir, -1);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  for (int64_t rows : {1, 9, 64, 300, 700}) {
    InferRequest request = (*act)->ExampleRequest(rows);
    std::mt19937_64 rng(static_cast<uint64_t>(rows));
    for (InferInput& in : request.inputs) {
      if (in.data.dtype() == DType::kF32) in.data = testing::RandomF32(in.data.shape(), rng, 0, 5);
    }
    auto want = (*cpu)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (bool fused : {true, false}) {
      cuda::EnableFusedProductMulAdd(fused);
      auto got = (*act)->Infer(request);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), want->size());
      for (size_t i = 0; i < got->size(); ++i) {
        EXPECT_LT(testing::RelativeError((*got)[i].data, (*want)[i].data), 3e-2)
            << "rows " << rows << (fused ? " fused" : " two kernels") << " output " << i;
      }
    }
    cuda::EnableFusedProductMulAdd(true);
  }
}

// A cross network whose x0 is a product's result (so x0 and each x exist as bf16 copies alone),
// fused by the pass and run on CUDA with bf16-activations: fused and as two kernels, against the
// CPU's fp32. Widths 256 (the fused kernel's 128-column tiles) and 200 (two kernels), ranks 64 and
// 128, rows from 9 to 1,000 (tiles of 128 rows cut short); and width 1,024 at 2,200 and 4,100 rows,
// more tiles than an H100's or H200's SMs, which the kernel's warpgroups take in turn (ping-pong),
// the last one's rows cut short. The first layer's c is its m (x0), which the kernel reads once.
TEST(ProductMulAddFusion, CudaCrossLayersScoreAsTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  struct Case {
    int64_t width, rank, rows;
  };
  std::vector<Case> cases = {{1024, 128, 2200}, {1024, 64, 4100}};
  for (int64_t width : {256, 200}) {
    for (int64_t rank : {64, 128}) {
      for (int64_t rows : {9, 100, 1000}) cases.push_back({width, rank, rows});
    }
  }
  for (const auto& [width, rank, rows] : cases) {
    std::mt19937_64 rng(static_cast<uint64_t>(width * 7 + rank * 3 + rows));
    const int64_t features = 32;
    const Graph unfused = testing::CrossNetwork(rows, features, width, rank, 2, rng);
    std::vector<Tensor> inputs = {RandomF32({rows, features}, rng, -1, 1)};
    Graph g = unfused;
    auto probe = Plan::Build(g, MetasOf(inputs));
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    ASSERT_EQ(FuseProductMulAdds(g, (*probe)->values()), 2);
    auto want = testing::RunGraph(unfused, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const std::string what =
        "width " + std::to_string(width) + " rank " + std::to_string(rank) + " rows " + std::to_string(rows);
    for (bool fused : {true, false}) {
      cuda::EnableFusedProductMulAdd(fused);
      const int64_t runs = cuda::FusedProductMulAddRuns(), runs_c_is_m = cuda::FusedProductMulAddRunsWithCAsM();
      auto got = testing::RunGraph(g, inputs, {}, *cuda, Precision::kBf16Activations);
      cuda::EnableFusedProductMulAdd(true);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const bool fits = fused && width % 128 == 0 && testing::CudaIsHopper();
      EXPECT_EQ(cuda::FusedProductMulAddRuns() - runs, fits ? 2 : 0) << what << (fused ? ", fused" : ", two kernels");
      // The first layer's c is x0, its m: the kernel loads that tile once.
      EXPECT_EQ(cuda::FusedProductMulAddRunsWithCAsM() - runs_c_is_m, fits ? 1 : 0) << what;
      testing::ExpectOutputsNear(*got, *want, 3e-2, what + (fused ? ", fused" : ", two kernels"));
    }
    // bf16 (not -activations) runs the same graph as two kernels, reading fp32 m and c.
    auto plain = testing::RunGraph(g, inputs, {}, *cuda, Precision::kBf16);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    testing::ExpectOutputsNear(*plain, *want, 3e-2, what + ", bf16");
  }
}

// A cross layer whose result is the graph's output, read by no step: in a small run it is written
// straight into the pinned output buffer (Binding::outputs_pinned), and the result is the CPU's.
// The fused kernel takes only layers whose result is a bf16 copy alone, never a graph output, so
// its TMA stores never target pinned memory: the layer runs as two kernels.
TEST(ProductMulAddFusion, CudaCrossLayerOutputWrittenStraightIntoPinnedMemory) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kWidth = 256, kRank = 64;
  for (int64_t rows : {9, 300}) {
    std::mt19937_64 rng(static_cast<uint64_t>(rows));
    GraphBuilder b;
    int x0 = b.Input("x0", DType::kF32, {rows, kWidth});
    int down =
        b.Op("Gemm", {x0, b.Const("down", RandomF32({kRank, kWidth}, rng, -0.1, 0.1))}, {{"transB", int64_t{1}}});
    int up = b.Op("Gemm",
                  {down, b.Const("up", RandomF32({kWidth, kRank}, rng, -0.1, 0.1)),
                   b.Const("bias", RandomF32({kWidth}, rng, -0.5, 0.5))},
                  {{"transB", int64_t{1}}});
    b.Output(b.Op("MulAdd", {x0, up, x0}));
    const Graph unfused = b.graph();
    std::vector<Tensor> inputs = {RandomF32({rows, kWidth}, rng, -1, 1)};
    Graph g = unfused;
    auto probe = Plan::Build(g, MetasOf(inputs));
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    ASSERT_EQ(FuseProductMulAdds(g, (*probe)->values()), 1);
    auto want = testing::RunGraph(unfused, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const int64_t runs = cuda::FusedProductMulAddRuns();
    auto got = testing::RunGraph(g, inputs, {}, *cuda, Precision::kBf16Activations);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(cuda::FusedProductMulAddRuns() - runs, 0) << "rows " << rows;
    testing::ExpectOutputsNear(*got, *want, 3e-2, "rows " + std::to_string(rows));
  }
}

#endif  // RANKD_HAVE_CUDA

}  // namespace
}  // namespace rankd

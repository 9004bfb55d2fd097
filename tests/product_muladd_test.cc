// Products with a multiply-add epilogue: the pass that makes them
// (compile/product_muladd_fusion.cc), their schema, the CPU twin, and on a GPU the two ways the
// CUDA backend runs them (backend/cuda/product_muladd.h) against the CPU.
#include <gtest/gtest.h>

#include <random>

#include "compile/passes.h"
#include "compile/plan.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/product_muladd.h"
#endif

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
    return Plan::Build(b.graph(), {{DType::kF32, {4, 3}, nullptr},
                                   {DType::kF32, {4, multiplier_cols}, nullptr},
                                   {DType::kF32, {4, 5}, nullptr}});
  };
  EXPECT_TRUE(plan(5, true).ok());
  auto wrong_shape = plan(1, true);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().ToString().find("must have the product's shape"),
            std::string::npos)
      << wrong_shape.status().ToString();
  auto alone = plan(5, false);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().ToString().find("needs inputs 3 and 4"), std::string::npos)
      << alone.status().ToString();
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

// Sets the CUDA backend's way of running the epilogue for one scope.
class ModeScope {
 public:
  explicit ModeScope(cuda::ProductMulAddMode mode) { cuda::SetProductMulAddMode(mode); }
  ~ModeScope() { cuda::SetProductMulAddMode(cuda::ProductMulAddMode::kOff); }
};

// DCNv2's cross layers, two of them and a product reading the second, fused as the pass leaves
// them: the first layer's result is read by the second's down-projection through its bf16 copy.
Graph CrossLayers(int64_t rows, int64_t width, int64_t rank, std::mt19937_64& rng) {
  GraphBuilder b;
  int x0 = b.Input("x0", DType::kF32, {rows, width});
  int x = x0;
  for (int layer = 0; layer < 2; ++layer) {
    int down =
        b.Op("Gemm", {x, b.Const("down", RandomF32({rank, width}, rng))}, {{"transB", int64_t{1}}});
    int bias = b.Const("bias", RandomF32({width}, rng));
    if (layer == 0) {
      x = b.Op("Gemm", {down, b.Const("up", RandomF32({width, rank}, rng)), bias, x0, x},
               {{"transB", int64_t{1}}});
    } else {
      x = b.Op("MatMul", {down, b.Const("up", RandomF32({rank, width}, rng)), bias, x0, x});
    }
  }
  b.Output(b.Op("Gemm", {x, b.Const("top", RandomF32({width, 8}, rng))}));
  b.Output(x);
  return b.graph();
}

// Both CUDA ways against the CPU, in fp32 and bf16, at shapes no tile divides (rows 5 go to the
// few-rows kernel and then MulAdd; 200 and 300 rows to the fused kernel in bf16), the rank a
// multiple of 8 but not of the kernel's 32-wide k-slices.
TEST(ProductMulAddFusion, CudaMatchesTheCpuBothWays) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (auto mode : {cuda::ProductMulAddMode::kTwoKernels, cuda::ProductMulAddMode::kFused}) {
    ModeScope scope(mode);
    for (int64_t rows : {5, 200, 300}) {
      for (auto [width, rank] : {std::pair<int64_t, int64_t>{264, 72}, {130, 8}}) {
        std::mt19937_64 rng(static_cast<uint64_t>(rows * 1000 + width));
        Graph g = CrossLayers(rows, width, rank, rng);
        std::vector<Tensor> inputs{RandomF32({rows, width}, rng)};
        const std::string what =
            std::string(mode == cuda::ProductMulAddMode::kFused ? "fused" : "two kernels") +
            " rows " + std::to_string(rows) + " width " + std::to_string(width);
        testing::ExpectSameOutputs(g, g, inputs, 1e-5, what + " fp32", *cuda, Precision::kFp32);
        testing::ExpectSameOutputs(g, g, inputs, 1e-2, what + " bf16", *cuda, Precision::kBf16);
      }
    }
  }
}

// The zoo's DCNv2 on the GPU in bf16, with the pass on and the fused kernel against without the
// pass: the same scores within bf16's reach.
TEST(ProductMulAddFusion, CudaZooDcnScoresTheSameFused) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.precision = "bf16";
  auto plain = Model::Load(dir, -1, options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->load_report().fused_product_mul_adds, 0);  // off by default on CUDA
  InferRequest request = (*plain)->ExampleRequest(300);
  std::mt19937_64 rng(13);
  for (InferInput& in : request.inputs) {
    if (in.data.dtype() == DType::kF32) in.data = RandomF32(in.data.shape(), rng, 0, 5);
  }
  auto want = (*plain)->Infer(request);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ModeScope scope(cuda::ProductMulAddMode::kFused);
  auto fused = Model::Load(dir, -1, options);
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  EXPECT_EQ((*fused)->load_report().fused_product_mul_adds, 3);
  auto got = (*fused)->Infer(request);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    EXPECT_LT(testing::RelativeError((*got)[i].data, (*want)[i].data), 1e-2) << "output " << i;
  }
}

#endif  // RANKD_HAVE_CUDA

}  // namespace
}  // namespace rankd

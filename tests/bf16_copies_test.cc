// bf16 copies written by producers for the products that read them (runtime/cuda/bf16_copies.h):
// where they are planned and how their room is shared, and that they change no bit of any result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "compile/plan.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/gemm.h"
#include "backend/cuda/small_rows_gemm.h"
#include "runtime/cuda/bf16_copies.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

// Turns the copies off for one scope.
class CopiesOff {
 public:
  CopiesOff() { cuda::EnableBf16Copies(false); }
  ~CopiesOff() { cuda::EnableBf16Copies(true); }
};

// Keeps the heuristic's first algorithm for the products planned in one scope (no choice by
// timing, which may pick split-K and its reduction in one model and not the other).
class TuningOff {
 public:
  TuningOff() { cuda::EnableGemmTuning(false); }
  ~TuningOff() { cuda::EnableGemmTuning(true); }
};

// `graph` on `cuda` in bf16 with every product converting its own operands.
StatusOr<std::vector<Tensor>> RunWithoutCopies(const Graph& graph, const std::vector<Tensor>& inputs,
                                               const Backend& cuda) {
  CopiesOff off;
  return testing::RunGraph(graph, inputs, {}, cuda, Precision::kBf16);
}

// m1 = x*y + x; p1 = m1 W; m2 = m1*y + x; p2 = m2 W; [q = m1 W]; s = x + y; p3 = s W.
struct Chain {
  GraphBuilder g;
  int m1, p1, m2, p2, q = -1, s, p3;
};

void BuildChain(Chain& c, int64_t width, bool read_m1_late, std::mt19937_64& rng) {
  GraphBuilder& g = c.g;
  int x = g.Input("x", DType::kF32, {-1, width});
  int y = g.Input("y", DType::kF32, {-1, width});
  int w = g.Const("w", testing::RandomF32({width, 5}, rng));
  c.m1 = g.Op("MulAdd", {x, y, x});
  c.p1 = g.Op("MatMul", {c.m1, w});
  c.m2 = g.Op("MulAdd", {c.m1, y, x});
  c.p2 = g.Op("MatMul", {c.m2, w});
  if (read_m1_late) c.q = g.Op("MatMul", {c.m1, w});
  c.s = g.Op("Add", {x, y});
  c.p3 = g.Op("MatMul", {c.s, w});
  for (int out : {c.p1, c.p2, c.q, c.p3}) {
    if (out >= 0) g.Output(out);
  }
}

// The plan step producing `value`.
size_t StepOf(const Plan& plan, int value) {
  for (size_t s = 0; s < plan.steps().size(); ++s) {
    if (plan.steps()[s].outputs[0] == value) return s;
  }
  ADD_FAILURE() << "no step writes value " << value;
  return 0;
}

std::shared_ptr<const Plan> PlanFor(Graph& graph, int64_t rows, int64_t width) {
  auto plan = Plan::Build(graph, {{DType::kF32, {rows, width}}, {DType::kF32, {rows, width}}});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : nullptr;
}

TEST(Bf16Copies, WrittenByProducersOfProductOperandsAndReadByThoseProducts) {
  std::mt19937_64 rng(1);
  Chain c;
  BuildChain(c, 8, /*read_m1_late=*/false, rng);
  auto plan = PlanFor(c.g.graph(), 100, 8);
  ASSERT_TRUE(plan);
  cuda::Bf16Copies copies = cuda::PlanBf16Copies(*plan);
  ASSERT_EQ(copies.written.size(), plan->steps().size());
  const int64_t room = (100 * 8 * 2 + 255) / 256 * 256;
  // m1's copy lives from its MulAdd to p1; m2's starts after that, so it takes the same room.
  EXPECT_EQ(copies.written[StepOf(*plan, c.m1)], 0);
  EXPECT_EQ(copies.read[StepOf(*plan, c.p1)], 0);
  EXPECT_EQ(copies.written[StepOf(*plan, c.m2)], 0);
  EXPECT_EQ(copies.read[StepOf(*plan, c.p2)], 0);
  EXPECT_EQ(copies.bytes, room);
  // An Add writes no copy, so its product converts; the MulAdds read none.
  EXPECT_EQ(copies.written[StepOf(*plan, c.s)], -1);
  EXPECT_EQ(copies.read[StepOf(*plan, c.p3)], -1);
  EXPECT_EQ(copies.read[StepOf(*plan, c.m2)], -1);
}

TEST(Bf16Copies, CopiesAliveTogetherGetRoomsOfTheirOwn) {
  std::mt19937_64 rng(2);
  Chain c;
  BuildChain(c, 8, /*read_m1_late=*/true, rng);
  auto plan = PlanFor(c.g.graph(), 100, 8);
  ASSERT_TRUE(plan);
  cuda::Bf16Copies copies = cuda::PlanBf16Copies(*plan);
  const int64_t room = (100 * 8 * 2 + 255) / 256 * 256;
  EXPECT_EQ(copies.written[StepOf(*plan, c.m1)], 0);
  EXPECT_EQ(copies.read[StepOf(*plan, c.q)], 0);  // m1's copy is read again after m2's is written
  EXPECT_EQ(copies.written[StepOf(*plan, c.m2)], room);
  EXPECT_EQ(copies.read[StepOf(*plan, c.p2)], room);
  EXPECT_EQ(copies.bytes, 2 * room);
}

TEST(Bf16Copies, NonePlannedWhenTurnedOff) {
  std::mt19937_64 rng(3);
  Chain c;
  BuildChain(c, 8, true, rng);
  auto plan = PlanFor(c.g.graph(), 10, 8);
  ASSERT_TRUE(plan);
  CopiesOff off;
  cuda::Bf16Copies copies = cuda::PlanBf16Copies(*plan);
  EXPECT_EQ(copies.bytes, 0);
  for (int64_t o : copies.written) EXPECT_EQ(o, -1);
  for (int64_t o : copies.read) EXPECT_EQ(o, -1);
}

// An MLP's hidden layer h = x W1, read only by the product h W2, is written as the bf16 copy
// alone; a product whose result something else reads (an Add, the graph's outputs) writes none.
struct Mlp {
  GraphBuilder g;
  int h, p, shared, q, s, out_h, r;
};

void BuildMlp(Mlp& m, int64_t width, std::mt19937_64& rng) {
  GraphBuilder& g = m.g;
  int x = g.Input("x", DType::kF32, {-1, width});
  int y = g.Input("y", DType::kF32, {-1, width});
  int w1 = g.Const("w1", testing::RandomF32({width, 24}, rng));
  int w2 = g.Const("w2", testing::RandomF32({24, 5}, rng));
  m.h = g.Op("MatMul", {x, w1});
  m.p = g.Op("MatMul", {m.h, w2});
  m.shared = g.Op("MatMul", {y, w1});
  m.q = g.Op("MatMul", {m.shared, w2});
  m.s = g.Op("Add", {m.shared, m.shared});
  m.out_h = g.Op("MatMul", {x, w1});
  m.r = g.Op("MatMul", {m.out_h, w2});
  for (int out : {m.p, m.q, m.s, m.out_h, m.r}) g.Output(out);
}

TEST(Bf16Copies, ProductsReadOnlyByProductsWriteTheCopyAlone) {
  std::mt19937_64 rng(5);
  Mlp m;
  BuildMlp(m, 8, rng);
  auto plan = PlanFor(m.g.graph(), 100, 8);
  ASSERT_TRUE(plan);
  cuda::Bf16Copies copies = cuda::PlanBf16Copies(*plan);
  EXPECT_EQ(copies.written[StepOf(*plan, m.h)], 0);
  EXPECT_EQ(copies.read[StepOf(*plan, m.p)], 0);
  EXPECT_EQ(copies.written[StepOf(*plan, m.shared)], -1);  // the Add reads it too
  EXPECT_EQ(copies.read[StepOf(*plan, m.q)], -1);
  EXPECT_EQ(copies.written[StepOf(*plan, m.out_h)], -1);  // a graph output
  EXPECT_EQ(copies.read[StepOf(*plan, m.r)], -1);
  EXPECT_EQ(copies.written[StepOf(*plan, m.p)], -1);
}

// DCNv2's cross layers: x1 = x0 * (h0 W0 + b) + x0, x2 = x0 * (h1 W1 + b) + x1, read by a product;
// with `shared_up`, an Add reads the first up-projection too.
struct Cross {
  GraphBuilder g;
  int up0, x1, down1, up1, x2, top, sum = -1;
};

void BuildCross(Cross& c, int64_t width, bool shared_up, std::mt19937_64& rng) {
  GraphBuilder& g = c.g;
  int x0 = g.Input("x0", DType::kF32, {-1, width});
  auto layer = [&](int x, int& down, int& up) {
    down = g.Op("Gemm", {x, g.Const("down", testing::RandomF32({width, 4}, rng))});
    up = g.Op("Gemm", {down, g.Const("up", testing::RandomF32({4, width}, rng)),
                       g.Const("b", testing::RandomF32({width}, rng))});
  };
  int down0 = -1;
  layer(x0, down0, c.up0);
  c.x1 = g.Op("MulAdd", {x0, c.up0, x0});
  layer(c.x1, c.down1, c.up1);
  c.x2 = g.Op("MulAdd", {c.up1, x0, c.x1});  // the product as the first factor
  c.top = g.Op("Gemm", {c.x2, g.Const("top", testing::RandomF32({width, 3}, rng))});
  g.Output(c.top);
  if (shared_up) {
    c.sum = g.Op("Add", {c.up0, c.up0});
    g.Output(c.sum);
  }
}

// The up-projections, read only by their MulAdds as factors, write the copy alone and the MulAdds
// read it; the last MulAdd, read only by a product, writes its copy alone; x0 and x1, read as
// addends too, keep their fp32 results, and a MulAdd never reads a copy written beside one.
TEST(Bf16Copies, CrossLayerProductsHandTheirMulAddsTheCopyAlone) {
  std::mt19937_64 rng(6);
  Cross c;
  BuildCross(c, 8, /*shared_up=*/false, rng);
  auto plan = Plan::Build(c.g.graph(), {{DType::kF32, {100, 8}}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const Plan& p = **plan;
  cuda::Bf16Copies copies = cuda::PlanBf16Copies(p);
  const size_t up0 = StepOf(p, c.up0), x1 = StepOf(p, c.x1), up1 = StepOf(p, c.up1), x2 = StepOf(p, c.x2);
  EXPECT_GE(copies.written[up0], 0);
  EXPECT_TRUE(copies.alone[up0]);
  EXPECT_EQ(copies.read_second[x1], copies.written[up0]);  // MulAdd(x0, up0, x0): up0 second
  EXPECT_EQ(copies.read[x1], -1);                          // x0 is a graph input
  EXPECT_GE(copies.written[x1], 0);                        // read by down1 as A
  EXPECT_FALSE(copies.alone[x1]);                          // and by x2 as its addend
  EXPECT_EQ(copies.read[StepOf(p, c.down1)], copies.written[x1]);
  EXPECT_TRUE(copies.alone[up1]);
  EXPECT_EQ(copies.read[x2], copies.written[up1]);  // MulAdd(up1, x0, x1): up1 first
  EXPECT_EQ(copies.read_second[x2], -1);
  EXPECT_TRUE(copies.alone[x2]);
  EXPECT_EQ(copies.read[StepOf(p, c.top)], copies.written[x2]);
  EXPECT_EQ(copies.written[StepOf(p, c.top)], -1);  // a graph output

  Cross shared;
  BuildCross(shared, 8, /*shared_up=*/true, rng);
  auto plan2 = Plan::Build(shared.g.graph(), {{DType::kF32, {100, 8}}});
  ASSERT_TRUE(plan2.ok()) << plan2.status().ToString();
  copies = cuda::PlanBf16Copies(**plan2);
  EXPECT_EQ(copies.written[StepOf(**plan2, shared.up0)], -1);  // the Add reads its fp32 result
  EXPECT_EQ(copies.read_second[StepOf(**plan2, shared.x1)], -1);
  EXPECT_TRUE(copies.alone[StepOf(**plan2, shared.up1)]);
}

// With bf16-activations precision the residual x1 is written as its copy alone, and the MulAdd
// adding it reads that copy; with bf16 no MulAdd reads an addend's copy.
TEST(Bf16Copies, Bf16ActivationsKeepTheResidualInBf16) {
  std::mt19937_64 rng(7);
  Cross c;
  BuildCross(c, 8, /*shared_up=*/false, rng);
  auto plan = Plan::Build(c.g.graph(), {{DType::kF32, {100, 8}}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const Plan& p = **plan;
  const size_t up0 = StepOf(p, c.up0), x1 = StepOf(p, c.x1), up1 = StepOf(p, c.up1), x2 = StepOf(p, c.x2);
  cuda::Bf16Copies copies = cuda::PlanBf16Copies(p, /*bf16_activations=*/true);
  EXPECT_TRUE(copies.alone[up0]);
  EXPECT_EQ(copies.read_second[x1], copies.written[up0]);
  EXPECT_EQ(copies.read[x1], -1);  // x0 is a graph input: no copy of it is written
  EXPECT_EQ(copies.read_third[x1], -1);
  EXPECT_GE(copies.written[x1], 0);
  EXPECT_TRUE(copies.alone[x1]);  // read by down1 as A and by x2 as its addend: both read the copy
  EXPECT_EQ(copies.read[StepOf(p, c.down1)], copies.written[x1]);
  EXPECT_EQ(copies.read[x2], copies.written[up1]);
  EXPECT_EQ(copies.read_third[x2], copies.written[x1]);
  EXPECT_TRUE(copies.alone[x2]);
  EXPECT_EQ(copies.read[StepOf(p, c.top)], copies.written[x2]);

  copies = cuda::PlanBf16Copies(p);
  EXPECT_FALSE(copies.alone[x1]);
  for (int64_t o : copies.read_third) EXPECT_EQ(o, -1);

  Cross shared;  // an Add reads up0's fp32 result: up0 keeps it, and x1 reads that
  BuildCross(shared, 8, /*shared_up=*/true, rng);
  auto plan2 = Plan::Build(shared.g.graph(), {{DType::kF32, {100, 8}}});
  ASSERT_TRUE(plan2.ok()) << plan2.status().ToString();
  copies = cuda::PlanBf16Copies(**plan2, /*bf16_activations=*/true);
  EXPECT_EQ(copies.written[StepOf(**plan2, shared.up0)], -1);
  EXPECT_EQ(copies.read_second[StepOf(**plan2, shared.x1)], -1);
  EXPECT_TRUE(copies.alone[StepOf(**plan2, shared.x1)]);
}

// On the GPU: the cross layers with their copies score as without them within the up-projection's
// rounding to bf16, and as the CPU's fp32 within bf16's. Widths 8 (four elements a thread) and 7
// (one), rows 1 (the few-rows products), 37 and 1000.
TEST(Bf16Copies, CrossLayersScoreAsWithoutCopies) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (int64_t width : {8, 7}) {
    for (int64_t rows : {1, 37, 1000}) {
      std::mt19937_64 rng(static_cast<uint64_t>(width * 1000 + rows));
      Cross c;
      BuildCross(c, width, /*shared_up=*/false, rng);
      std::vector<Tensor> inputs = {testing::RandomF32({rows, width}, rng)};
      const std::string what = "width " + std::to_string(width) + " rows " + std::to_string(rows);
      auto with = testing::RunGraph(c.g.graph(), inputs, {}, *cuda, Precision::kBf16);
      auto without = RunWithoutCopies(c.g.graph(), inputs, *cuda);
      ASSERT_TRUE(with.ok()) << with.status().ToString();
      ASSERT_TRUE(without.ok()) << without.status().ToString();
      testing::ExpectOutputsNear(*with, *without, 1e-2, what);
      auto exact = testing::RunGraph(c.g.graph(), inputs);
      ASSERT_TRUE(exact.ok());
      testing::ExpectOutputsNear(*with, *exact, 3e-2, "against the CPU, " + what);
      auto bf16_residual = testing::RunGraph(c.g.graph(), inputs, {}, *cuda, Precision::kBf16Activations);
      ASSERT_TRUE(bf16_residual.ok()) << bf16_residual.status().ToString();
      testing::ExpectOutputsNear(*bf16_residual, *exact, 3e-2, "bf16 activations against the CPU, " + what);
      testing::ExpectOutputsNear(*bf16_residual, *with, 2e-2, "bf16 activations against bf16, " + what);
    }
  }
}

// On the GPU: the same scores as converting the fp32 hidden layer, within what a different
// accumulation order of a bf16 product moves (cuBLASLt may pick another algorithm for a bf16
// output), and as the CPU's fp32 within bf16's rounding.
TEST(Bf16Copies, ProductsWritingTheCopyAloneScoreAsConverting) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (int64_t rows : {1, 37, 1000}) {
    std::mt19937_64 rng(static_cast<uint64_t>(rows));
    Mlp m;
    BuildMlp(m, 8, rng);
    std::vector<Tensor> inputs = {testing::RandomF32({rows, 8}, rng), testing::RandomF32({rows, 8}, rng)};
    auto with = testing::RunGraph(m.g.graph(), inputs, {}, *cuda, Precision::kBf16);
    auto without = RunWithoutCopies(m.g.graph(), inputs, *cuda);
    ASSERT_TRUE(with.ok()) << with.status().ToString();
    ASSERT_TRUE(without.ok()) << without.status().ToString();
    testing::ExpectOutputsNear(*with, *without, 1e-3, "rows " + std::to_string(rows));
    auto exact = testing::RunGraph(m.g.graph(), inputs);
    ASSERT_TRUE(exact.ok());
    testing::ExpectOutputsNear(*with, *exact, 2e-2, "against the CPU, rows " + std::to_string(rows));
  }
}

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// The copies hold exactly what the products would have converted: every bit of every output is
// the same with and without them. Widths 8 (16-byte stores) and 7 (one element per thread).
TEST(Bf16Copies, ChangeNoBitOfTheResult) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (int64_t width : {8, 7}) {
    for (int64_t rows : {1, 37, 1000}) {
      std::mt19937_64 rng(static_cast<uint64_t>(width * 1000 + rows));
      Chain c;
      BuildChain(c, width, true, rng);
      std::vector<Tensor> inputs = {testing::RandomF32({rows, width}, rng), testing::RandomF32({rows, width}, rng)};
      auto with = testing::RunGraph(c.g.graph(), inputs, {}, *cuda, Precision::kBf16);
      auto without = RunWithoutCopies(c.g.graph(), inputs, *cuda);
      ASSERT_TRUE(with.ok()) << with.status().ToString();
      ASSERT_TRUE(without.ok()) << without.status().ToString();
      for (size_t i = 0; i < with->size(); ++i) {
        EXPECT_TRUE(BitEqual((*with)[i], (*without)[i])) << "output " << i << " width " << width << " rows " << rows;
      }
    }
  }
}

// DCNv2 (W1): the embedding concatenation, the cross layers' multiply-adds and the products only
// products (or, for the up-projections, their MulAdds) read write the copies; the scores stay
// within what rounding the up-projections to bf16 and a bf16 product's accumulation order move,
// and the copies' conversions are no longer launched, but where cuBLASLt declines.
// A copy read by a product of at most eight columns saves nothing: the few-rows kernel takes that
// product transposed and rounds an fp32 A itself (small_rows_gemm.h).
TEST(Bf16Copies, DcnScoresUnchangedWithFewerLaunches) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  TuningOff same_algorithms;  // in both models, so that their launches differ by the copies only
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.precision = "bf16";
  auto with = Model::Load(dir, -1, options);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  InferRequest request = (*with)->ExampleRequest(300);
  std::mt19937_64 rng(4);
  for (InferInput& in : request.inputs) {
    if (in.data.dtype() == DType::kF32) in.data = testing::RandomF32(in.data.shape(), rng, 0, 5);
  }
  auto got = (*with)->Infer(request);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto plan = (*with)->PlanForRequest(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto launches = (*with)->CountLaunches(**plan);
  ASSERT_TRUE(launches.ok()) << launches.status().ToString();
  const cuda::Bf16Copies copies = cuda::PlanBf16Copies(**plan);
  const int written =
      static_cast<int>(std::count_if(copies.written.begin(), copies.written.end(), [](int64_t o) { return o >= 0; }));
  EXPECT_GT(written, 4);  // more than the concatenation and the three multiply-adds
  int read_by_products = 0, read_by_few_columns = 0, read_by_muladds = 0;
  for (size_t s = 0; s < copies.read.size(); ++s) {
    const Node& node = (*plan)->graph().nodes[static_cast<size_t>((*plan)->steps()[s].node)];
    if (node.op == "MulAdd") {
      read_by_muladds += (copies.read[s] >= 0) + (copies.read_second[s] >= 0);
      continue;
    }
    const Shape& out = (*plan)->values()[static_cast<size_t>(node.outputs[0])].shape;
    read_by_products += copies.read[s] >= 0;
    read_by_few_columns += copies.read[s] >= 0 && out.back() <= cuda::kSmallRows;
  }
  EXPECT_EQ(read_by_muladds, 3);      // each cross layer's up-projection
  EXPECT_EQ(read_by_few_columns, 2);  // the bottom MLP's last layer (8 columns) and the score's
  {
    CopiesOff off;
    auto without = Model::Load(dir, -1, options);
    ASSERT_TRUE(without.ok()) << without.status().ToString();
    auto want = (*without)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LT(testing::RelativeError((*got)[i].data, (*want)[i].data), 1e-2) << "output " << i;
    }
    auto plan_without = (*without)->PlanForRequest(request);
    ASSERT_TRUE(plan_without.ok());
    auto launches_without = (*without)->CountLaunches(**plan_without);
    ASSERT_TRUE(launches_without.ok()) << launches_without.status().ToString();
    // Each copy a product reads saves it one conversion (the MulAdds' reads save none: without
    // copies they read the fp32 result): the concatenation's and the three multiply-adds' always,
    // a product's where cuBLASLt writes bf16 with its epilogue. With fp32 biases an H100 declined
    // four of the products (24 launches where 20 were due); with their bf16 copies (gemm.h) every
    // product is expected to write bf16.
    EXPECT_EQ(launches->kernels, launches_without->kernels - read_by_products + read_by_few_columns)
        << "without copies " << launches_without->kernels << ", copies written " << written;
  }
}

// DCNv2 (W1) with bf16 activations: the concatenation and every cross layer (its up-projection
// with the MulAdd as its epilogue) write their copies alone, each cross layer reads A, x0 and x as
// copies, and the scores stay within bf16's rounding of
// the CPU's fp32 and of bf16 precision's.
TEST(Bf16Copies, DcnWithBf16ActivationsWritesNoFp32Activation) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.precision = "bf16-activations";
  auto act = Model::Load(dir, -1, options);
  ASSERT_TRUE(act.ok()) << act.status().ToString();
  options.precision = "bf16";
  auto bf16 = Model::Load(dir, -1, options);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  auto cpu = Model::Load(dir, -1);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  for (int64_t rows : {1, 64, 700}) {
    InferRequest request = (*act)->ExampleRequest(rows);
    std::mt19937_64 rng(static_cast<uint64_t>(rows));
    for (InferInput& in : request.inputs) {
      if (in.data.dtype() == DType::kF32) in.data = testing::RandomF32(in.data.shape(), rng, 0, 5);
    }
    auto plan = (*act)->PlanForRequest(request);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const cuda::Bf16Copies copies = cuda::PlanBf16Copies(**plan, /*bf16_activations=*/true);
    int cross_layers = 0, concats = 0;  // the MulAdds fused into their products (product_muladd.h)
    for (size_t s = 0; s < copies.read.size(); ++s) {
      const Node& node = (*plan)->graph().nodes[static_cast<size_t>((*plan)->steps()[s].node)];
      const std::string& op = node.op;
      EXPECT_NE(op, "MulAdd");
      if ((op == "Gemm" || op == "MatMul") && node.HasInput(3)) {
        ++cross_layers;
        EXPECT_TRUE(copies.alone[s]) << "step " << s;
        EXPECT_TRUE(copies.read[s] >= 0 && copies.read_second[s] >= 0 && copies.read_third[s] >= 0) << "step " << s;
      } else if (op == "ConcatEmbeddingBags") {
        ++concats;
        EXPECT_TRUE(copies.alone[s]);
      }
    }
    EXPECT_EQ(cross_layers, 3);
    EXPECT_EQ(concats, 1);
    auto got = (*act)->Infer(request);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto want = (*cpu)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto near = (*bf16)->Infer(request);
    ASSERT_TRUE(near.ok()) << near.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LT(testing::RelativeError((*got)[i].data, (*want)[i].data), 3e-2) << "rows " << rows << " output " << i;
      EXPECT_LT(testing::RelativeError((*got)[i].data, (*near)[i].data), 3e-2) << "rows " << rows << " output " << i;
    }
  }
}

}  // namespace
}  // namespace rankd

#endif  // RANKD_HAVE_CUDA

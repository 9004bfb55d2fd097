// Element-wise chain fusion (FuseElementwiseChains) and the FusedElementwise kernels: random
// chains over broadcast inputs score the same fused as unfused, on the CPU's fused loop and on
// the NVRTC-compiled CUDA kernel, at row counts other than the probe's; what must stay outside a
// group does; malformed programs are refused with a reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "compile/passes.h"
#include "compile/plan.h"
#include "model/ops/elementwise_program.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/runtime_compiler.h"
#include "backend/cuda/settings.h"
#endif

namespace rankd {
namespace {

using testing::CountOps;
using testing::GraphBuilder;
using testing::MakeF32;
using testing::RandomF32;
using testing::RunGraph;

constexpr int64_t kProbeRows = 7;

// Inputs x [rows, h], row [h], column [rows, 1] and y [rows, h]; `Shapes(rows)` gives them.
struct ChainGraph {
  Graph graph;
  int64_t h = 1;
  std::vector<Shape> Shapes(int64_t rows) const { return {{rows, h}, {h}, {rows, 1}, {rows, h}}; }
};

// A random chain of 4 to 16 element-wise ops reading the inputs, scalar and row constants and
// earlier results; every op is kept finite (logs and roots of |v| + 1, exponents of tanh). Its
// last result is an output, and sometimes an intermediate is too.
ChainGraph RandomChain(uint64_t seed) {
  std::mt19937_64 rng(seed);
  ChainGraph c;
  c.h = std::uniform_int_distribution<int64_t>(1, 40)(rng);
  GraphBuilder b;
  std::vector<int> pool;
  const char* names[] = {"x", "row", "column", "y"};
  std::vector<Shape> shapes = c.Shapes(-1);
  for (int i = 0; i < 4; ++i) pool.push_back(b.Input(names[i], DType::kF32, shapes[static_cast<size_t>(i)]));
  int one = b.Const("one", MakeF32({}, {1.0f}));
  int half = b.Const("half", MakeF32({1}, {0.5f}));
  pool.push_back(half);
  pool.push_back(b.Const("weights", RandomF32({c.h}, rng, -2, 2)));
  auto pick = [&] { return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]; };
  auto positive = [&](int v) { return b.Op("Add", {b.Op("Abs", {v}), one}); };
  const char* ops[] = {"Add",  "Sub",     "Mul",  "Div", "Pow",  "Max", "Min", "MulAdd",     "Clip",  "Neg",
                       "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Abs"};
  int steps = std::uniform_int_distribution<int>(4, 16)(rng);
  int last = -1;
  for (int s = 0; s < steps; ++s) {
    std::string op = ops[std::uniform_int_distribution<size_t>(0, std::size(ops) - 1)(rng)];
    int a = pick(), v;
    if (op == "Div")
      v = b.Op(op, {a, positive(pick())});
    else if (op == "Pow")
      v = b.Op(op, {positive(a), std::uniform_int_distribution<int>(0, 1)(rng) ? half : b.Op("Tanh", {pick()})});
    else if (op == "Sqrt" || op == "Log" || op == "Reciprocal")
      v = b.Op(op, {positive(a)});
    else if (op == "Exp")
      v = b.Op(op, {b.Op("Tanh", {a})});
    else if (op == "MulAdd")
      v = b.Op(op, {a, pick(), pick()});
    else if (op == "Clip")
      v = b.Op(op, {a, std::uniform_int_distribution<int>(0, 1)(rng) ? -1 : half, half});
    else if (op == "Floor")
      v = b.Op(op, {pool[std::uniform_int_distribution<size_t>(0, 3)(rng)]});  // of an input: exact on both
    else if (op == "Neg" || op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "Erf" || op == "Abs")
      v = b.Op(op, {a});
    else
      v = b.Op(op, {a, pick()});
    pool.push_back(v);
    if (s + 1 < steps && std::uniform_int_distribution<int>(0, 5)(rng) == 0) b.Output(v);
    last = v;
  }
  b.Output(last);
  c.graph = std::move(b.graph());
  return c;
}

std::vector<Tensor> RandomInputs(const ChainGraph& c, int64_t rows, std::mt19937_64& rng) {
  std::vector<Tensor> inputs;
  for (const Shape& s : c.Shapes(rows)) inputs.push_back(RandomF32(s, rng, -2, 2));
  return inputs;
}

// `graph` fused at the probe's shapes.
Graph Fused(const ChainGraph& c, int* fused = nullptr) {
  std::vector<TensorMeta> metas;
  for (const Shape& s : c.Shapes(kProbeRows)) metas.push_back({DType::kF32, s, nullptr});
  auto probe = Plan::Build(c.graph, metas);
  EXPECT_TRUE(probe.ok()) << probe.status().ToString();
  Graph g = c.graph;
  int n = probe.ok() ? FuseElementwiseChains(g, (*probe)->values()) : 0;
  if (fused) *fused = n;
  return g;
}

bool AllFinite(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) {
    for (int64_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(t.data<float>()[i])) return false;
    }
  }
  return true;
}

TEST(ElementwiseFusion, RandomChainsScoreTheSameFusedOnTheCpu) {
  int fused_graphs = 0, nodes_before = 0, nodes_after = 0, overflowed = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    ChainGraph c = RandomChain(seed);
    int fused = 0;
    Graph g = Fused(c, &fused);
    fused_graphs += fused > 0;
    nodes_before += static_cast<int>(c.graph.nodes.size());
    nodes_after += static_cast<int>(g.nodes.size());
    EXPECT_EQ(CountOps(g, "FusedElementwise"), fused);
    std::mt19937_64 rng(seed * 31);
    for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{300}}) {
      std::vector<Tensor> inputs = RandomInputs(c, rows, rng);
      auto want = RunGraph(c.graph, inputs);
      auto got = RunGraph(g, inputs);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_TRUE(got.ok()) << got.status().ToString() << "\nseed " << seed;
      if (!AllFinite(*want)) {  // a chain of products that overflowed: nothing to compare
        ++overflowed;
        continue;
      }
      testing::ExpectOutputsNear(*got, *want, 1e-6, "seed " + std::to_string(seed) + " rows " + std::to_string(rows));
    }
  }
  EXPECT_GE(fused_graphs, 50);                   // nearly every chain has two ops of the output's shape in a row
  EXPECT_LT(nodes_after * 3, nodes_before * 2);  // a third of the nodes gone (512 of 870 left when written)
  EXPECT_LE(overflowed, 10);
}

TEST(ElementwiseFusion, RandomChainsScoreTheSameOnCuda) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    ChainGraph c = RandomChain(seed);
    Graph g = Fused(c);
    std::mt19937_64 rng(seed * 17);
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{4099}}) {
      std::vector<Tensor> inputs = RandomInputs(c, rows, rng);
      auto want = RunGraph(c.graph, inputs);
      auto got = RunGraph(g, inputs, {}, *cuda);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_TRUE(got.ok()) << got.status().ToString() << "\nseed " << seed;
      if (!AllFinite(*want)) continue;  // overflowed (counted by the CPU test)
      testing::ExpectOutputsNear(*got, *want, 1e-5, "seed " + std::to_string(seed) + " rows " + std::to_string(rows));
    }
  }
}

#if RANKD_HAVE_CUDA
TEST(ElementwiseFusion, SameProgramCompilesOnceAndIsKeptOnDisk) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("rankd_kernels_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  cuda::SetKernelCacheDir(dir.string());
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, 3});
  b.Output(b.Op("Tanh", {b.Op("Mul", {x, b.Const("k", MakeF32({}, {1.2345678f}))})}));  // a program no other test has
  Graph g = std::move(b.graph());
  auto probe = Plan::Build(g, {{DType::kF32, {kProbeRows, 3}, nullptr}});
  ASSERT_TRUE(probe.ok());
  ASSERT_EQ(FuseElementwiseChains(g, (*probe)->values()), 1);
  Tensor in = MakeF32({2, 3}, {-1, 0, 1, 2, 3, 4});
  const cuda::CompileCounts before = cuda::RuntimeCompileCounts();
  auto first = RunGraph(g, {in}, {}, *cuda);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(cuda::RuntimeCompileCounts().compiled, before.compiled + 1);
  auto again = RunGraph(g, {in}, {}, *cuda);  // prepares the model again: the kernel is cached
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cuda::RuntimeCompileCounts().compiled, before.compiled + 1);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".cubin") files.push_back(entry.path());
  }
  ASSERT_EQ(files.size(), 1u);
  // A later process (the loaded kernels forgotten) takes the code from the disk.
  cuda::ForgetLoadedKernels();
  ASSERT_TRUE(RunGraph(g, {in}, {}, *cuda).ok());
  EXPECT_EQ(cuda::RuntimeCompileCounts().compiled, before.compiled + 1);
  EXPECT_EQ(cuda::RuntimeCompileCounts().from_disk, before.from_disk + 1);
  // A damaged file (cut short, then one byte changed) is compiled afresh, never loaded.
  for (int damage = 0; damage < 2; ++damage) {
    std::string bytes;
    {
      std::ifstream f(files[0], std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    if (damage == 0)
      bytes.resize(bytes.size() / 2);
    else
      bytes[bytes.size() - 7] ^= 0x5a;  // the file was rewritten whole after the first damage
    std::ofstream(files[0], std::ios::binary | std::ios::trunc) << bytes;
    cuda::ForgetLoadedKernels();
    auto fixed = RunGraph(g, {in}, {}, *cuda);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    EXPECT_EQ(cuda::RuntimeCompileCounts().compiled, before.compiled + 2 + damage);
    EXPECT_EQ(cuda::RuntimeCompileCounts().from_disk, before.from_disk + 1);
  }
  cuda::SetKernelCacheDir("");
  std::filesystem::remove_all(dir);
  auto cpu = RunGraph(g, {in});
  ASSERT_TRUE(cpu.ok());
  testing::ExpectOutputsNear(*again, *cpu, 1e-6, "cached kernel");
}
#endif

TEST(ElementwiseFusion, IntermediatesReadElsewhereAndSmallerProducersStayOutside) {
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, 4});
  int row = b.Input("row", DType::kF32, {4});
  int two = b.Const("two", MakeF32({}, {2.0f}));
  int small = b.Op("Sigmoid", {b.Op("Mul", {row, two})});  // [4]: its own group, not recomputed per row
  int sum = b.Op("Add", {x, small});
  int shared = b.Op("Relu", {sum});  // read by two ops and an output: stays a value
  int y = b.Op("Exp", {b.Op("Neg", {shared})});
  int z = b.Op("Mul", {shared, x});
  b.Output(y);
  b.Output(z);
  b.Output(shared);
  Graph g = std::move(b.graph());
  auto probe = Plan::Build(g, {{DType::kF32, {kProbeRows, 4}, nullptr}, {DType::kF32, {4}, nullptr}});
  ASSERT_TRUE(probe.ok());
  Graph fused = g;
  EXPECT_EQ(FuseElementwiseChains(fused, (*probe)->values()), 3);
  std::vector<std::string> programs;
  for (const Node& n : fused.nodes) {
    if (n.op == "FusedElementwise") programs.push_back(n.GetString("program", ""));
  }
  // Mul+Sigmoid on the row; Add+Relu ending at the shared value; Neg+Exp; Mul stays alone.
  EXPECT_EQ(programs, (std::vector<std::string>{"Mul x0 0x1p+1;Sigmoid t0", "Add x0 x1;Relu t0", "Neg x0;Exp t0"}));
  EXPECT_EQ(CountOps(fused, "Mul"), 1);
  std::mt19937_64 rng(5);
  std::vector<Tensor> inputs = {RandomF32({3, 4}, rng, -2, 2), RandomF32({4}, rng, -2, 2)};
  testing::ExpectSameOutputs(fused, g, inputs, 0, "exact");
}

TEST(ElementwiseFusion, OnlyFp32OpsJoin) {
  GraphBuilder b;
  int x = b.Input("x", DType::kI64, {-1, 4});
  int f = b.Input("f", DType::kF32, {-1, 4});
  int i = b.Op("Add", {b.Op("Mul", {x, x}), x});  // INT64: left alone
  b.Output(b.Op("Add", {b.Op("Cast", {i}, {{"to", int64_t{1}}}), f}));
  Graph g = std::move(b.graph());
  auto probe = Plan::Build(g, {{DType::kI64, {kProbeRows, 4}, nullptr}, {DType::kF32, {kProbeRows, 4}, nullptr}});
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(FuseElementwiseChains(g, (*probe)->values()), 0);
  EXPECT_EQ(CountOps(g, "FusedElementwise"), 0);
}

TEST(ElementwiseProgram, TextRoundTripsExactly) {
  const std::string text = "Mul x0 x1;Add t0 0x1.8p-3;Clip t1 -inf 0x1p+0;MulAdd t2 x1 x0;Sigmoid t3";
  auto p = ElementwiseProgram::Parse(text, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ToString(), text);
  EXPECT_EQ(p->code[1].operands[1].value, 0.1875f);
}

TEST(ElementwiseProgram, MalformedProgramsAreRefusedWithAReason) {
  struct Case {
    const char* text;
    const char* why;
  };
  const Case cases[] = {
      {"", "empty"},
      {"Mul x0 x1;;Neg t0", "unknown op ''"},
      {"Frobnicate x0", "unknown op 'Frobnicate'"},
      {"Add x0", "Add takes 2 operands"},
      {"Relu x0 x1", "Relu takes 1 operands"},
      {"Add x0 x2", "x2 but the node has 2 inputs"},
      {"Add x0 t0", "t0 is not computed before this op"},
      {"Add x0 1.5.2", "'1.5.2' is not an operand"},
      {"Add x0 nan", "'nan' is not an operand"},
      {"Add x0 x99999", "'x99999' is not an operand"},
  };
  for (const Case& c : cases) {
    auto p = ElementwiseProgram::Parse(c.text, 2);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_NE(p.status().message().find(c.why), std::string::npos) << c.text << ": " << p.status().ToString();
  }
  std::string long_program = "Neg x0";
  for (int i = 0; i < kMaxFusedOps; ++i) long_program += ";Neg t" + std::to_string(i);
  EXPECT_FALSE(ElementwiseProgram::Parse(long_program, 1).ok());
  // The schema's check refuses such a node before it is planned.
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, 2});
  b.Output(b.Op("FusedElementwise", {x}, {{"program", std::string("Add x0 x1")}}));
  Status s = CpuBackend().CheckGraph(b.graph());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x1 but the node has 1 inputs"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace rankd

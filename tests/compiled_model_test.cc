// CompiledModel (compile/compiled_model.h) and PlanRunner (runtime/plan_runner.h), the parts a
// Model composes: the passes' graph and its input bindings, the plan cache and its bound, going
// back to the graph as written, and plans run on pooled executors with no captures on the CPU.
#include "compile/compiled_model.h"

#include <gtest/gtest.h>

#include <string>

#include "model/onnx_import.h"
#include "runtime/plan_runner.h"
#include "test_util.h"

namespace rankd {
namespace {

std::unique_ptr<CompiledModel> CompileZoo(const std::string& name, const CompileOptions& options = {}) {
  const std::string dir = testing::SourcePath("models/zoo/" + name);
  auto config = LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto graph = ImportOnnxFile(dir + "/1/model.onnx");
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!config.ok() || !graph.ok()) return nullptr;
  auto compiled = CompiledModel::Compile(std::move(*graph), std::move(*config), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled.ok() ? std::move(*compiled) : nullptr;
}

// Graph inputs of `model` for `rows` candidates with ragged rows of one id each.
std::vector<TensorMeta> MetasFor(const CompiledModel& model, int64_t rows) {
  std::vector<TensorMeta> metas;
  for (const InputBinding& b : model.bindings()) {
    const GraphInputKind& k = b.kind;
    const int64_t n = k.user ? 1 : rows;
    if (k.part == GraphInputKind::kRequestIndex) {
      metas.push_back({DType::kI64, {rows}, nullptr});
      continue;
    }
    const InputConfig& in = model.config().inputs[b.config_index];
    if (k.part == GraphInputKind::kOffsets) {
      metas.push_back({DType::kI64, {n + 1}, nullptr});
    } else if (k.part == GraphInputKind::kValues) {
      metas.push_back({in.dtype, {n}, nullptr});
    } else {
      Shape s{n};
      for (int64_t d : in.dims) s.push_back(d < 0 ? 1 : d);
      metas.push_back({in.dtype, s, nullptr});
    }
  }
  return metas;
}

TEST(CompiledModel, BindsEveryGraphInputAndHoistsDin) {
  std::unique_ptr<CompiledModel> din = CompileZoo("din");
  ASSERT_TRUE(din);
  EXPECT_TRUE(din->hoisted());
  EXPECT_EQ(din->report().hoisting.rfind("on:", 0), 0u) << din->report().hoisting;
  ASSERT_EQ(din->bindings().size(), din->graph().inputs.size());
  ASSERT_EQ(din->input_kinds().size(), din->bindings().size());
  int request_index = 0;
  for (const InputBinding& b : din->bindings()) request_index += b.kind.part == GraphInputKind::kRequestIndex;
  EXPECT_EQ(request_index, 1);
  EXPECT_EQ(din->output_names().size(), din->graph().outputs.size());
  EXPECT_EQ(din->ragged_names(), (std::vector<std::string>{"seq_items", "seq_cats"}));
}

TEST(CompiledModel, UnhoistGoesBackToTheGraphAsWrittenAndDropsPlans) {
  std::unique_ptr<CompiledModel> din = CompileZoo("din");
  ASSERT_TRUE(din && din->hoisted());
  auto hoisted_plan = din->PlanFor(MetasFor(*din, 3), {1, 1});
  ASSERT_TRUE(hoisted_plan.ok()) << hoisted_plan.status().ToString();
  ASSERT_TRUE(din->Unhoist("a test said so").ok());
  EXPECT_FALSE(din->hoisted());
  EXPECT_EQ(din->report().hoisting, "off: a test said so");
  for (const InputBinding& b : din->bindings()) {
    EXPECT_NE(b.kind.part, GraphInputKind::kRequestIndex);
    EXPECT_FALSE(b.kind.user);
  }
  auto plan = din->PlanFor(MetasFor(*din, 3), {1, 1});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->get(), hoisted_plan->get());
  EXPECT_EQ(&(*plan)->graph(), &din->graph());
  EXPECT_FALSE(din->Unhoist("twice").ok());  // nothing left to undo
}

TEST(CompiledModel, PlansAreCachedPerShapeWithinTheirBound) {
  CompileOptions options;
  options.max_plans = 2;
  std::unique_ptr<CompiledModel> w1 = CompileZoo("dlrm_dcnv2", options);
  ASSERT_TRUE(w1);
  const std::vector<int64_t> lengths(w1->ragged_names().size(), 1);
  auto a = w1->PlanFor(MetasFor(*w1, 2), lengths);
  auto again = w1->PlanFor(MetasFor(*w1, 2), lengths);
  ASSERT_TRUE(a.ok() && again.ok());
  EXPECT_EQ(a->get(), again->get());
  auto b = w1->PlanFor(MetasFor(*w1, 3), lengths);
  auto c = w1->PlanFor(MetasFor(*w1, 4), lengths);  // past the bound: the oldest (2 rows) is dropped
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_NE(a->get(), b->get());
  auto rebuilt = w1->PlanFor(MetasFor(*w1, 2), lengths);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_NE(a->get(), rebuilt->get());
  EXPECT_EQ(w1->PlanFor(MetasFor(*w1, 4), lengths)->get(), c->get());  // still cached
}

TEST(PlanRunner, RunsPlansOnPooledExecutorsWithoutCapturesOnTheCpu) {
  std::unique_ptr<CompiledModel> mmoe = CompileZoo("mmoe");
  ASSERT_TRUE(mmoe);
  auto runner =
      PlanRunner::Create({&CpuBackend()}, mmoe->graph(), PrepareOptions{mmoe->precision(), {}, {}}, 2, "mmoe");
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  EXPECT_EQ((*runner)->max_executors(), 2);
  std::vector<TensorMeta> metas = MetasFor(*mmoe, 3);
  auto plan = mmoe->PlanFor(metas, std::vector<int64_t>(mmoe->ragged_names().size(), 1));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<Tensor> inputs;
  for (const TensorMeta& m : metas) inputs.push_back(Tensor::Zeros(m.dtype, m.shape));
  for (const InputBinding& b : mmoe->bindings()) {
    if (b.kind.part == GraphInputKind::kOffsets) {  // rows of one id each
      Tensor& o = inputs[static_cast<size_t>(&b - mmoe->bindings().data())];
      for (int64_t r = 0; r < o.size(); ++r) o.data<int64_t>()[r] = r;
    }
  }
  auto first = (*runner)->Run(*plan, inputs, /*capture=*/true);
  auto second = (*runner)->Run(*plan, inputs, /*capture=*/true);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status().ToString() << second.status().ToString();
  ASSERT_EQ(first->size(), mmoe->output_names().size());
  for (size_t o = 0; o < first->size(); ++o) EXPECT_EQ(testing::RelativeError((*first)[o], (*second)[o]), 0.0);
  EXPECT_FALSE((*runner)->capturing());
  (*runner)->QueueCapture(*plan);  // capture off: nothing queued, nothing counted
  (*runner)->WaitForCaptures();
  const CaptureCounters counters = (*runner)->counters();
  EXPECT_EQ(counters.graph_hits + counters.graph_misses + counters.captures, 0u);
  EXPECT_EQ((*runner)->CountLaunches(**plan).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace rankd

// Ids sent to the device in 32 bits (backend/cuda/narrow_ids.h): which inputs qualify, and the
// clamping. On the device, CudaBackend.IdOutOfRangeFailsThatRunOnly sends ids beyond INT32's range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>

#include "compile/plan.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/narrow_ids.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();

TEST(NarrowIds, ClampsToInt32sRange) {
  const std::vector<int64_t> from = {0, -1, 7, kMax32, kMax32 + 1, int64_t{1} << 32, int64_t{1} << 40,
                                     kMin32, kMin32 - 1, -(int64_t{1} << 40)};
  const std::vector<int32_t> want = {0, -1, 7, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MIN, INT32_MIN, INT32_MIN};
  std::vector<int32_t> to(from.size());
  cuda::NarrowIds(from.data(), to.data(), from.size());
  EXPECT_EQ(to, want);
}

TEST(NarrowIds, LongRunsWithRareOutliersMatchTheClamp) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t n = rng() % 3000;
    std::vector<int64_t> from(n);
    for (int64_t& id : from) {
      id = static_cast<int64_t>(rng() % 1000000) - 1;
      if (rng() % 700 == 0) id = static_cast<int64_t>(rng());  // anywhere in INT64's range
      if (rng() % 900 == 0) id = rng() % 2 ? kMax32 + 1 : kMin32 - 1;
    }
    std::vector<int32_t> to(n), want(n);
    for (size_t i = 0; i < n; ++i) want[i] = static_cast<int32_t>(std::clamp(from[i], kMin32, kMax32));
    cuda::NarrowIds(from.data(), to.data(), n);
    ASSERT_EQ(to, want) << "trial " << trial;
  }
}

std::vector<bool> Narrowable(Graph& graph, const std::vector<TensorMeta>& metas) {
  auto plan = Plan::Build(graph, metas);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? cuda::NarrowableIdInputs(**plan) : std::vector<bool>();
}

TEST(NarrowIds, OnlyInputsReadSolelyAsBagIds) {
  std::mt19937_64 rng(1);
  GraphBuilder g;
  int table = g.Const("t", testing::RandomF32({10, 4}, rng));
  int ids = g.Input("ids", DType::kI64, {-1});
  int offsets = g.Input("offsets", DType::kI64, {-1});
  int padded = g.Input("padded", DType::kI64, {-1, 3});
  int also_compared = g.Input("compared", DType::kI64, {-1, 3});
  g.Output(g.Op("EmbeddingBag", {table, ids, offsets}));
  g.Output(g.Op("EmbeddingBag", {table, g.Op("Reshape", {padded, g.Const("s", testing::MakeI64({2}, {-1, 3}))})}));
  g.Output(g.Op("EmbeddingBag", {table, also_compared}));
  g.Output(g.Op("Equal", {also_compared, g.Const("m", testing::MakeI64({}, {-1}))}));
  std::vector<TensorMeta> metas{{DType::kI64, {6}, nullptr}, {DType::kI64, {3}, nullptr},
                                {DType::kI64, {2, 3}, nullptr}, {DType::kI64, {2, 3}, nullptr}};
  // Bag ids (also through a reshape) are narrowed; offsets are not ids; an input also read by
  // an Equal keeps its 64 bits.
  EXPECT_EQ(Narrowable(g.graph(), metas), (std::vector<bool>{true, false, true, false}));
}

TEST(NarrowIds, NotForTablesBeyondInt32Rows) {
  GraphBuilder g;
  // A table's rows only matter through its shape here; the plan never reads its data.
  int table = g.Const("t", Tensor::View(DType::kF32, {kMax32 + 1, 1}, nullptr));
  int ids = g.Input("ids", DType::kI64, {-1, 2});
  g.Output(g.Op("EmbeddingBag", {table, ids}));
  EXPECT_EQ(Narrowable(g.graph(), {{DType::kI64, {4, 2}, nullptr}}), std::vector<bool>{false});
}

TEST(NarrowIds, InputsHandedBackAsOutputsKeepTheirBits) {
  std::mt19937_64 rng(2);
  GraphBuilder g;
  int table = g.Const("t", testing::RandomF32({10, 4}, rng));
  int ids = g.Input("ids", DType::kI64, {-1, 2});
  g.Output(g.Op("EmbeddingBag", {table, ids}));
  g.Output(ids);
  EXPECT_EQ(Narrowable(g.graph(), {{DType::kI64, {4, 2}, nullptr}}), std::vector<bool>{false});
}

TEST(NarrowIds, W1SendsEveryFeaturesIdsNarrowed) {
  auto model = Model::Load(testing::SourcePath("models/zoo/dlrm_dcnv2"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto plan = (*model)->PlanForRequest((*model)->ExampleRequest(16, 2));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<bool> narrowed = cuda::NarrowableIdInputs(**plan);
  const Graph& graph = (*plan)->graph();
  int count = 0;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    if (!narrowed[i]) continue;
    ++count;
    EXPECT_EQ((*plan)->values()[static_cast<size_t>(graph.inputs[i])].dtype, DType::kI64);
  }
  EXPECT_EQ(count, 26);  // the ids of the 26 sparse features; their offsets and the dense input stay
}

}  // namespace
}  // namespace rankd

#endif  // RANKD_HAVE_CUDA

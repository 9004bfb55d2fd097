// Step lanes (runtime/step_lanes.h): every pair of steps that touch the same bytes keeps its
// order, on hand-made accesses, random ones and the zoo's plans; independent chains run apart.
#include "runtime/step_lanes.h"

#include <gtest/gtest.h>

#include <random>

#include "compile/plan.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

StepAccess Access(std::vector<ByteRange> reads, std::vector<ByteRange> writes, bool exclusive = false) {
  return {std::move(reads), std::move(writes), exclusive};
}

// Every pair that must keep its order does.
void ExpectOrdersKept(const std::vector<StepAccess>& steps, const LaneSchedule& s, int max_lanes) {
  ASSERT_EQ(s.lane.size(), steps.size());
  EXPECT_LE(s.lanes, max_lanes);
  for (size_t j = 0; j < steps.size(); ++j) {
    EXPECT_LT(s.lane[j], s.lanes);
    for (size_t i = 0; i < j; ++i) {
      if (MustFollow(steps[i], steps[j])) {
        EXPECT_TRUE(RunsAfter(s, static_cast<int>(i), static_cast<int>(j))) << "step " << j << " may overtake " << i;
      }
    }
    for (int w : s.waits[j]) {
      EXPECT_LT(w, static_cast<int>(j));
      EXPECT_NE(s.lane[static_cast<size_t>(w)], s.lane[j]);  // a wait is across lanes
    }
  }
}

TEST(StepLanes, IndependentChainsRunOnTheirOwnLanesAndJoinWithOneWait) {
  // a0 -> a1 and b0 -> b1 touch different bytes; the join reads a1's and b1's results.
  std::vector<StepAccess> steps{
      Access({}, {{0, 0, 16}}),              // a0
      Access({}, {{0, 16, 32}}),             // b0
      Access({{0, 0, 16}}, {{0, 32, 48}}),   // a1
      Access({{0, 16, 32}}, {{0, 48, 64}}),  // b1
      Access({{0, 32, 64}}, {{0, 64, 80}}),  // join
  };
  LaneSchedule s = ScheduleLanes(steps, 4);
  ExpectOrdersKept(steps, s, 4);
  EXPECT_EQ(s.lanes, 2);
  EXPECT_EQ(s.lane[0], s.lane[2]);
  EXPECT_EQ(s.lane[1], s.lane[3]);
  EXPECT_NE(s.lane[0], s.lane[1]);
  EXPECT_EQ(s.waits[4].size(), 1u);
  EXPECT_FALSE(RunsAfter(s, 0, 1));
  EXPECT_FALSE(RunsAfter(s, 2, 3));

  LaneSchedule one = ScheduleLanes(steps, 1);  // one lane: program order, no waits
  ExpectOrdersKept(steps, one, 1);
  for (size_t j = 0; j < steps.size(); ++j) {
    EXPECT_EQ(one.lane[j], 0);
    EXPECT_TRUE(one.waits[j].empty());
  }
}

TEST(StepLanes, RoomReusedAndExclusiveBuffersOrderSteps) {
  std::vector<StepAccess> steps{
      Access({}, {{0, 0, 16}}),             // writes x
      Access({{0, 0, 16}}, {{0, 16, 32}}),  // reads x
      Access({}, {{0, 8, 12}}),             // overwrites part of x: after its reader
      Access({}, {{1, 0, 4}}, true),        // exclusive, its own bytes
      Access({}, {{1, 100, 104}}, true),    // exclusive, other bytes: still after
      Access({}, {{2, 0, 4}}),              // another buffer, free to run at once
  };
  LaneSchedule s = ScheduleLanes(steps, 4);
  ExpectOrdersKept(steps, s, 4);
  EXPECT_TRUE(RunsAfter(s, 1, 2));
  EXPECT_TRUE(RunsAfter(s, 3, 4));
  EXPECT_FALSE(RunsAfter(s, 0, 5));
  EXPECT_FALSE(RunsAfter(s, 4, 5));
  // Reads of the same bytes need no order.
  EXPECT_FALSE(MustFollow(Access({{0, 0, 16}}, {}), Access({{0, 0, 16}}, {})));
  EXPECT_FALSE(MustFollow(Access({}, {{0, 0, 16}}), Access({}, {{1, 0, 16}})));   // other buffers
  EXPECT_FALSE(MustFollow(Access({}, {{0, 0, 16}}), Access({}, {{0, 16, 32}})));  // adjacent
}

TEST(StepLanes, RandomAccessesKeepEveryOrder) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int max_lanes = 1 + static_cast<int>(rng() % 5);
    std::vector<StepAccess> steps(static_cast<size_t>(n));
    auto range = [&] {
      const int64_t begin = static_cast<int64_t>(rng() % 200);
      return ByteRange{static_cast<int>(rng() % 2), begin, begin + 1 + static_cast<int64_t>(rng() % 20)};
    };
    for (StepAccess& a : steps) {
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) a.reads.push_back(range());
      for (int k = 1 + static_cast<int>(rng() % 2); k > 0; --k) a.writes.push_back(range());
      a.exclusive = rng() % 6 == 0;
    }
    LaneSchedule s = ScheduleLanes(steps, max_lanes);
    ExpectOrdersKept(steps, s, max_lanes);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "round " << round;
      return;
    }
  }
}

// The CPU backend, with plans keeping every value in a room of its own (as the CUDA backend's
// small plans do: Backend::SeparateRoomBytes).
class SeparateRoomsCpu final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  const Kernel* FindKernel(const std::string& op) const override { return CpuBackend().FindKernel(op); }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph,
                                                         const PrepareOptions& options) const override {
    return CpuBackend().PrepareModel(graph, options);
  }
  DeviceKind device_kind() const override { return DeviceKind::kHost; }
  int64_t SeparateRoomBytes() const override { return int64_t{1} << 30; }
};

StatusOr<std::unique_ptr<Model>> LoadZoo(const std::string& name, const Backend& backend) {
  std::string dir = testing::SourcePath("models/zoo/" + name);
  RANKD_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  config.name = name;
  ModelOptions options;
  options.backend = &backend;
  return Model::LoadFile(dir + "/1/model.onnx", std::move(config), options);
}

// The most steps on one path of the schedule's orders (lane order and waits).
int StepsInARow(const LaneSchedule& s) {
  std::vector<int> depth;
  std::vector<int> lane_tail(static_cast<size_t>(s.lanes), -1);
  int longest = 0;
  for (size_t j = 0; j < s.lane.size(); ++j) {
    int& tail = lane_tail[static_cast<size_t>(s.lane[j])];
    int d = tail >= 0 ? depth[static_cast<size_t>(tail)] : 0;
    for (int w : s.waits[j]) d = std::max(d, depth[static_cast<size_t>(w)]);
    depth.push_back(d + 1);
    tail = static_cast<int>(j);
    longest = std::max(longest, d + 1);
  }
  return longest;
}

class ZooLanesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooLanesTest, PlansKeepEveryOrderAndDinsChainsRunApart) {
  SeparateRoomsCpu separate;
  for (const Backend* backend : {&CpuBackend(), static_cast<const Backend*>(&separate)}) {
    auto model = LoadZoo(GetParam(), *backend);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    for (int64_t rows : {1, 37}) {
      auto plan = (*model)->PlanForRequest((*model)->ExampleRequest(rows, 5));
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      EXPECT_EQ((*plan)->separate_rooms(), backend == &separate);
      std::vector<StepAccess> steps = WorkspaceAccesses(**plan);
      ASSERT_EQ(steps.size(), (*plan)->steps().size());
      for (int max_lanes : {1, 2, 4}) {
        LaneSchedule s = ScheduleLanes(steps, max_lanes);
        ExpectOrdersKept(steps, s, max_lanes);
        // DIN in separate rooms: the user's sequence (items, categories, mask), the candidates'
        // lookups and the profile are chains of their own. Of its 16 steps, 8 in a row: the
        // sequence padded, looked up (both tables, clipped, concatenated: one step), projected,
        // attended, concatenated with the rest, the top MLP's three products.
        if (GetParam() == "din" && backend == &separate && max_lanes == 4) {
          EXPECT_EQ(s.lanes, 4) << rows << " rows";
          EXPECT_EQ(StepsInARow(s), 8) << rows << " rows";
        }
      }
    }
  }
}

// Separate rooms change no score.
TEST_P(ZooLanesTest, SeparateRoomsScoreAsSharedOnes) {
  SeparateRoomsCpu separate;
  auto model = LoadZoo(GetParam(), separate);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  testing::ExpectZooScores(**model, GetParam(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooLanesTest, ::testing::Values("dlrm_dcnv2", "din", "bst", "mmoe"));

}  // namespace
}  // namespace rankd

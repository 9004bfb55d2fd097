// The nap before spinning on the device (runtime/nap_estimate.h): what it learns from runs, and that
// a run far longer than the others cannot make the following ones sleep long past their end.
#include "runtime/nap_estimate.h"

#include <gtest/gtest.h>

namespace rankd {
namespace {

TEST(NapEstimate, NoNapBeforeTwoRunsThenTheLesserOfThem) {
  NapEstimate nap;
  EXPECT_EQ(nap.NapUs(), 0);
  nap.Waited(50'000);  // a first run of 50 ms (say, the first after a capture)
  EXPECT_EQ(nap.NapUs(), 0);
  nap.Waited(300);
  EXPECT_DOUBLE_EQ(nap.NapUs(), 0.8 * 300);
}

TEST(NapEstimate, FollowsSteadyRunsAndBoundsAnOutlier) {
  NapEstimate nap;
  for (int i = 0; i < 100; ++i) nap.Waited(i % 2 ? 200 : 400);
  EXPECT_NEAR(nap.NapUs(), 0.8 * 300, 0.8 * 30);  // the average, give or take the last runs'
  const double before = nap.NapUs();
  nap.Waited(100'000);  // one run of 100 ms counts as twice the estimate at most
  EXPECT_LE(nap.NapUs(), 1.1 * before + 1e-9);
  for (int i = 0; i < 100; ++i) nap.Waited(1'000);  // runs that really grew: followed
  EXPECT_NEAR(nap.NapUs(), 0.8 * 1'000, 1);
}

TEST(NapEstimate, ARunDoneOnWakingHalvesIt) {
  NapEstimate nap;
  nap.Waited(1'000);
  nap.Waited(1'000);
  nap.DoneOnWaking();
  EXPECT_DOUBLE_EQ(nap.NapUs(), 0.8 * 500);
  for (int i = 0; i < 5; ++i) nap.DoneOnWaking();
  EXPECT_EQ(nap.NapUs(), 0);  // 31 µs halved is under the shortest nap
}

TEST(NapEstimate, ShortRunsAreNotNapped) {
  NapEstimate nap;
  for (int i = 0; i < 10; ++i) nap.Waited(NapEstimate::kShortestUs - 1);
  EXPECT_EQ(nap.NapUs(), 0);
}

}  // namespace
}  // namespace rankd

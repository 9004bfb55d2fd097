// UsableCores: the cores of the process's affinity (taskset, a cpuset), not the machine's.
#include "common/usable_cores.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace rankd {
namespace {

TEST(UsableCores, FollowTheAffinityNotTheMachine) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(UsableCores(), CPU_COUNT(&before));
  EXPECT_LE(UsableCores(), static_cast<int>(std::thread::hardware_concurrency()));
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(UsableCores(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(UsableCores(), CPU_COUNT(&before));
}

}  // namespace
}  // namespace rankd

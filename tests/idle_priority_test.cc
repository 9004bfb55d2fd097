#include "common/idle_priority.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace rankd {
namespace {

// The thread that asks is lowered, and only that one: the caller keeps its policy.
TEST(IdlePriority, LowersTheCallingThreadOnly) {
  const int before = sched_getscheduler(0);
  int policy = -1;
  bool lowered = false;
  std::thread background([&] {
    lowered = RunAtIdlePriority();
    policy = sched_getscheduler(0);
  });
  background.join();
#ifdef SCHED_IDLE
  EXPECT_TRUE(lowered);
  EXPECT_EQ(policy, SCHED_IDLE);
#else
  EXPECT_FALSE(lowered);
#endif
  EXPECT_EQ(sched_getscheduler(0), before);
}

}  // namespace
}  // namespace rankd

#include "common/thread_priority.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace rankd {
namespace {

// The thread that asks is lowered, and only that one: the caller keeps its policy.
TEST(ThreadPriority, IdlePriorityLowersTheCallingThreadOnly) {
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

// A niceness set by a thread is that thread's alone, and lasts; the caller keeps its own.
TEST(ThreadPriority, NicenessLowersTheCallingThreadOnly) {
  const auto self = [] { return static_cast<id_t>(syscall(SYS_gettid)); };
  errno = 0;
  const int before = getpriority(PRIO_PROCESS, self());
  ASSERT_EQ(errno, 0);
  int seen = -100;
  bool lowered = false;
  std::thread executor([&] {
    lowered = RaiseNiceness(3);
    errno = 0;
    seen = getpriority(PRIO_PROCESS, self());
  });
  executor.join();
  EXPECT_TRUE(lowered);
  EXPECT_EQ(seen, before + 3 > 19 ? 19 : before + 3);
  EXPECT_EQ(getpriority(PRIO_PROCESS, self()), before);
}

}  // namespace
}  // namespace rankd

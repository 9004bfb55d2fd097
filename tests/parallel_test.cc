// ParallelFor and ParallelForEach (common/parallel.h): every item once, and the OpenMP team kept
// whole across loops of any length, so a short loop never ends threads the next one creates anew.
#include "common/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

namespace rankd {
namespace {

constexpr int64_t kCostly = 1 << 20;  // per item: always worth threads

// The kernel thread ids of the team that runs a full-width loop.
std::set<long> TeamOfFullLoop(int threads) {
  std::mutex mu;
  std::set<long> ids;
  ParallelFor(threads, kCostly, [&](int64_t, int64_t) {
    std::lock_guard lock(mu);
    ids.insert(static_cast<long>(syscall(SYS_gettid)));
  });
  return ids;
}

TEST(ParallelFor, CoversEveryItemOnceWhateverTheChunks) {
  ScopedOmpThreads threads(4);
  for (int64_t n : {1, 2, 3, 4, 5, 17, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    ParallelFor(n, kCostly, [&](int64_t begin, int64_t end) {
      EXPECT_LE(begin, end);
      for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n " << n << " item " << i;
  }
}

TEST(ParallelFor, SmallWorkRunsInlineAsOneRange) {
  ScopedOmpThreads threads(4);
  int calls = 0;
  ParallelFor(100, 1, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelFor, ShortLoopKeepsTheTeamsThreads) {
  ScopedOmpThreads threads(4);
  std::set<long> before = TeamOfFullLoop(4);
  ASSERT_EQ(before.size(), 4u);
  // Two items on four threads: libgomp would end two pool threads for a team of two.
  ParallelFor(2, kCostly, [](int64_t, int64_t) {});
  ParallelForEach(2, [](int64_t) {});
  EXPECT_EQ(TeamOfFullLoop(4), before);
}

TEST(ParallelForEach, CoversEveryItemOnce) {
  ScopedOmpThreads threads(4);
  for (int64_t n : {1, 3, 64}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    ParallelForEach(n, [&](int64_t i) { seen[static_cast<size_t>(i)].fetch_add(1); });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n " << n;
  }
}

}  // namespace
}  // namespace rankd

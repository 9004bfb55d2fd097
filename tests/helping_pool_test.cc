#include "common/helping_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace rankd {
namespace {

using std::chrono::microseconds;

// Every item runs exactly once, and what the items wrote (plain stores, some on helpers) is
// there when Run returns.
TEST(HelpingPool, RunsEveryItemOnceAndPublishesItsWrites) {
  HelpingPool pool(3, microseconds(2000));
  for (int64_t n : {1, 2, 7, 1000, 20000}) {
    std::vector<int> wrote(static_cast<size_t>(n), 0);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    pool.Run(n, [&](int64_t i) {
      wrote[static_cast<size_t>(i)] = static_cast<int>(i) + 1;
      runs[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(wrote[static_cast<size_t>(i)], i + 1) << "n " << n;
      ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "n " << n;
    }
  }
}

// Helpers do take items when there are enough of them (the pool is not the caller alone).
TEST(HelpingPool, HelpersTakeItems) {
  HelpingPool pool(2, microseconds(200000));
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  for (int round = 0; round < 50 && elsewhere.load() == 0; ++round) {
    pool.Run(64, [&](int64_t) {
      std::this_thread::sleep_for(microseconds(50));
      if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
    });
  }
  EXPECT_GT(elsewhere.load(), 0);
}

// Without helpers, or with helpers asleep (no spin), Run still runs everything; a pool of none
// runs on the caller only.
TEST(HelpingPool, NeverWaitsForAHelperToWake) {
  HelpingPool none(0, microseconds(0));
  EXPECT_EQ(none.helpers(), 0);
  const std::thread::id caller = std::this_thread::get_id();
  int on_caller = 0;
  none.Run(100, [&](int64_t) { on_caller += std::this_thread::get_id() == caller; });
  EXPECT_EQ(on_caller, 100);
  HelpingPool sleepy(2, microseconds(0));
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> count{0};
    sleepy.Run(3, [&](int64_t) { count.fetch_add(1); });
    ASSERT_EQ(count.load(), 3);
  }
}

// Callers on several threads at once, and a Run inside an item: each caller's items all run,
// once, before its Run returns.
TEST(HelpingPool, ConcurrentAndNestedCallers) {
  HelpingPool pool(3, microseconds(1000));
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int round = 0; round < 100; ++round) {
        std::vector<std::atomic<int>> runs(300);
        pool.Run(300, [&](int64_t i) {
          if (i % 100 == 0) {
            std::atomic<int> inner{0};
            pool.Run(10, [&](int64_t) { inner.fetch_add(1); });
            if (inner.load() != 10) wrong.fetch_add(1);
          }
          runs[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& r : runs) {
          if (r.load() != 1) wrong.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace rankd

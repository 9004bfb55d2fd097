#include "common/grace_period.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace rankd {
namespace {

using std::chrono::milliseconds;

// With nobody inside, the writer does not wait.
TEST(GracePeriod, NoReadersNoWait) {
  GracePeriod period;
  period.WaitForEarlierReaders();
  const uint64_t t = period.Enter();
  period.Exit(t);
  period.WaitForEarlierReaders();
  EXPECT_EQ(period.readers(), 0u);
}

// The writer waits for a reader that entered before it, and not for one that entered after.
TEST(GracePeriod, WaitsForEarlierReadersOnly) {
  GracePeriod period;
  const uint64_t early = period.Enter();
  std::atomic<bool> waited{false};
  std::thread writer([&] {
    period.WaitForEarlierReaders();
    waited = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(waited.load()) << "the writer did not wait for the reader inside";
  // A reader arriving now, after the writer took its bound, stays inside until after the writer
  // has returned: were the writer waiting for it too, the join below would never finish.
  const uint64_t late = period.Enter();
  period.Exit(early);
  writer.join();
  EXPECT_TRUE(waited.load());
  period.Exit(late);
}

// Readers come and go on several threads while a writer takes grace periods: every value a reader
// saw published was still intact when it left (the writer retires a value only after a grace
// period, and poisons it then).
TEST(GracePeriod, RetiredValuesOutliveTheirReaders) {
  GracePeriod period;
  constexpr int kSlots = 4;
  std::vector<std::atomic<int>> value(kSlots);  // value[i]: generation, -1 while poisoned
  std::atomic<int> published{0};                // the slot readers take
  std::atomic<bool> stop{false}, torn{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        GraceReader reading(&period);
        const int slot = published.load();
        const int seen = value[static_cast<size_t>(slot)].load();
        if (seen < 0) torn = true;
        std::this_thread::yield();
        if (value[static_cast<size_t>(slot)].load() != seen) torn = true;
      }
    });
  }
  for (int gen = 1; gen < 400; ++gen) {
    const int old = published.load(), next = gen % kSlots;
    value[static_cast<size_t>(next)] = gen;
    published = next;  // unpublish `old`
    period.WaitForEarlierReaders();
    if (old != next) value[static_cast<size_t>(old)] = -1;  // nobody can hold it now
  }
  stop = true;
  for (std::thread& t : readers) t.join();
  EXPECT_FALSE(torn.load()) << "a reader saw a value change under it";
  EXPECT_EQ(period.readers(), 0u);
}

}  // namespace
}  // namespace rankd

// The poller that wakes waiting threads when their work is done (common/completion_poller.h): each
// wakes after its own work ends and not before, polls run on the poller's thread only and not
// before their first time, and a wait due sooner than the poller's sleep is not held up by it.
#include "common/completion_poller.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <thread>
#include <vector>

namespace rankd {
namespace {

using Clock = CompletionPoller::Clock;
using namespace std::chrono_literals;

TEST(CompletionPoller, WakesEachWaiterOnlyOnceItsWorkIsDone) {
  CompletionPoller poller(5us);
  constexpr int kThreads = 8, kRounds = 40;
  std::array<std::atomic<bool>, kThreads> work_done{};
  std::atomic<int> early{0}, polls_elsewhere{0};
  std::atomic<std::thread::id> poller_thread{};
  for (int round = 0; round < kRounds; ++round) {
    for (auto& d : work_done) d = false;
    std::vector<std::thread> waiters;
    for (int t = 0; t < kThreads; ++t) {
      waiters.emplace_back([&, t] {
        const std::function<bool()> done = [&] {
          std::thread::id expected{};
          poller_thread.compare_exchange_strong(expected, std::this_thread::get_id());
          if (poller_thread.load() != std::this_thread::get_id()) ++polls_elsewhere;
          return work_done[static_cast<size_t>(t)].load();
        };
        // Half poll from now on, half from a moment ahead (a run's estimated end).
        poller.Wait(done, Clock::now() + (t % 2 ? 200us : 0us));
        if (!work_done[static_cast<size_t>(t)].load()) ++early;
      });
    }
    std::mt19937 rng(static_cast<unsigned>(round));
    std::array<int, kThreads> order{};
    for (int t = 0; t < kThreads; ++t) order[static_cast<size_t>(t)] = t;
    std::shuffle(order.begin(), order.end(), rng);
    for (int t : order) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      work_done[static_cast<size_t>(t)] = true;
    }
    for (auto& w : waiters) w.join();
  }
  EXPECT_EQ(early.load(), 0) << "a waiter woke before its work was done";
  EXPECT_EQ(polls_elsewhere.load(), 0) << "a poll ran off the poller's thread";
  EXPECT_EQ(poller.Pending(), 0u);
}

TEST(CompletionPoller, PollsNoSoonerThanAsked) {
  CompletionPoller poller(5us);
  const Clock::time_point start = Clock::now();
  Clock::time_point first_call{};
  const std::function<bool()> done_at_once = [&] {
    if (first_call == Clock::time_point{}) first_call = Clock::now();
    return true;
  };
  EXPECT_TRUE(poller.Wait(done_at_once, start + 20ms)) << "done at its first poll";
  EXPECT_GE(first_call - start, 20ms);

  std::atomic<int> calls{0};
  const std::function<bool()> done_third_time = [&] { return ++calls == 3; };
  EXPECT_FALSE(poller.Wait(done_third_time, Clock::now())) << "not done at its first poll";
  EXPECT_EQ(calls.load(), 3);
}

// The poller sleeping until one wait's first poll far ahead does not hold up a wait due now.
TEST(CompletionPoller, AWaitDueSoonerThanThePollersSleepWakesIt) {
  CompletionPoller poller(5us);
  const std::function<bool()> done = [] { return true; };
  std::thread far([&] { poller.Wait(done, Clock::now() + 2s); });
  while (poller.Pending() == 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(10ms);  // the poller asleep until the far wait's first poll
  const Clock::time_point start = Clock::now();
  poller.Wait(done, start);
  EXPECT_LT(Clock::now() - start, 1s);
  far.join();
}

}  // namespace
}  // namespace rankd

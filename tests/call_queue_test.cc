// CallQueue (frontend/call_queue.h): calls run on a worker in arrival order, never on the taking
// thread; past capacity or max_wait they are refused; exactly one of handle and refuse runs for each
// call, including those still waiting when the queue goes.
#include "frontend/call_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rankd {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(CallQueue, AWorkerRunsEveryCallNeverTheTakingThread) {
  CallQueueOptions o;
  o.workers = 1;
  CallQueue q(o);
  std::promise<std::thread::id> ran_on;
  std::promise<microseconds> waited;
  q.Submit(
      [&](microseconds w) {
        ran_on.set_value(std::this_thread::get_id());
        waited.set_value(w);
      },
      [](const std::string&) { FAIL() << "refused"; });
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
  EXPECT_GE(waited.get_future().get().count(), 0);
}

TEST(CallQueue, WorkersTakeCallsInOrderAndRefuseThemPastCapacityOrMaxWait) {
  CallQueueOptions o;
  o.workers = 1;
  o.capacity = 3;
  o.max_wait = milliseconds(20);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mu;
  std::vector<std::string> events;
  auto note = [&](std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
  };
  {
    CallQueue q(o);
    std::promise<void> started;
    // The worker holds the first call until released; three more wait; the fifth finds the queue
    // full. Released after max_wait, the worker refuses the three; a call after them runs.
    q.Submit(
        [&](microseconds) {
          started.set_value();
          released.wait();
          note("ran 0");
        },
        [&](const std::string&) { note("refused 0"); });
    started.get_future().wait();
    for (int k = 1; k <= 4; ++k) {
      q.Submit([&, k](microseconds) { note("ran " + std::to_string(k)); },
               [&, k](const std::string& why) { note("refused " + std::to_string(k) + ": " + why); });
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ASSERT_EQ(events.size(), 1u);
      EXPECT_EQ(events[0], "refused 4: the server is overloaded: 3 calls wait to be handled");
    }
    std::this_thread::sleep_for(milliseconds(40));  // the three waiting pass max_wait
    release.set_value();
    for (bool drained = false; !drained; std::this_thread::sleep_for(milliseconds(1))) {
      std::lock_guard<std::mutex> lock(mu);
      drained = events.size() == 5;
    }
    q.Submit([&](microseconds) { note("ran 5"); }, [&](const std::string&) { note("refused 5"); });
  }
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[1], "ran 0");
  for (int k = 1; k <= 3; ++k) {
    EXPECT_EQ(events[static_cast<size_t>(k + 1)].rfind("refused " + std::to_string(k) +
                                                           ": the server is overloaded: "
                                                           "the call waited ",
                                                       0),
              0u)
        << events[static_cast<size_t>(k + 1)];
  }
  EXPECT_EQ(events[5], "ran 5");  // it waited less than max_wait
}

TEST(CallQueue, CallsStillWaitingWhenTheQueueGoesAreHandled) {
  CallQueueOptions o;
  o.workers = 1;
  o.max_wait = milliseconds(60'000);
  std::atomic<int> handled{0};
  std::promise<void> release, started;
  std::thread releaser;
  {
    CallQueue q(o);
    q.Submit(
        [&](microseconds) {
          started.set_value();
          release.get_future().wait();
          ++handled;
        },
        [](const std::string&) {});
    started.get_future().wait();
    for (int k = 0; k < 5; ++k) q.Submit([&](microseconds) { ++handled; }, [](const std::string&) {});
    releaser = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(10));
      release.set_value();
    });
  }
  releaser.join();
  EXPECT_EQ(handled.load(), 6);
}

TEST(CallQueue, ManyThreadsSubmittingGetOneAnswerPerCall) {
  CallQueueOptions o;
  o.workers = 3;
  o.capacity = 1 << 20;
  o.max_wait = milliseconds(60'000);
  std::atomic<int> handled{0}, refused{0};
  {
    CallQueue q(o);
    std::vector<std::thread> submitters;
    for (int t = 0; t < 4; ++t) {
      submitters.emplace_back([&] {
        for (int k = 0; k < 2000; ++k)
          q.Submit([&](microseconds) { ++handled; }, [&](const std::string&) { ++refused; });
      });
    }
    for (std::thread& t : submitters) t.join();
  }
  EXPECT_EQ(handled.load(), 8000);
  EXPECT_EQ(refused.load(), 0);
}

}  // namespace
}  // namespace rankd

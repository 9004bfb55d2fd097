// ExecutorPool (runtime/executor_pool.h): executors made on demand up to the limit, reused, a
// waiter woken by the release it waits for; with replicas, executors taken from the least busy
// healthy one.
#include "runtime/executor_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_util.h"

namespace rankd {
namespace {

TEST(ExecutorPool, MakesUpToItsLimitAndReusesReleasedOnes) {
  ExecutorPool pool({{&CpuBackend(), nullptr}}, 2);
  auto a = pool.Acquire(), b = pool.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(pool.All().size(), 2u);
  const Executor* first = a->get();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto c = pool.Acquire();  // the limit is reached: waits for a release
    got = c.ok();
    EXPECT_EQ(c->get(), first);
    pool.Release(std::move(*c));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load()) << "a third executor was made past the limit of two";
  pool.Release(std::move(*a));
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(pool.All().size(), 2u);
  pool.Release(std::move(*b));
}

TEST(ExecutorPool, TakeWaitsForThatExecutorWhileOthersComeAndGo) {
  ExecutorPool pool({{&CpuBackend(), nullptr}}, 0);
  auto a = pool.Acquire(), b = pool.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  const Executor* wanted = a->get();
  std::unique_ptr<Executor> taken;
  std::thread taker([&] { taken = pool.Take(wanted); });
  pool.Release(std::move(*b));  // another executor's release must not satisfy the Take
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(taken, nullptr);
  pool.Release(std::move(*a));
  taker.join();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken.get(), wanted);
  auto again = pool.Acquire();  // the other one, idle
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), wanted);
}

TEST(ExecutorPool, SpreadsOverReplicasByLoad) {
  testing::SwitchableHealthBackend second;
  ExecutorPool pool({{&CpuBackend(), nullptr}, {&second, nullptr}}, 2);
  auto a = pool.Acquire(), b = pool.Acquire(), c = pool.Acquire();
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // The least busy replica each time: first, second, then the first again (a tie goes to the first).
  EXPECT_EQ(pool.ReplicaOf(a->get()), 0u);
  EXPECT_EQ(pool.ReplicaOf(b->get()), 1u);
  EXPECT_EQ(pool.ReplicaOf(c->get()), 0u);
  EXPECT_EQ(pool.Busy(0), 2);
  EXPECT_EQ(pool.Busy(1), 1);
  auto d = pool.Acquire();  // the first is at its limit of two
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(pool.ReplicaOf(d->get()), 1u);
  const Executor* released = a->get();
  std::unique_ptr<Executor> waited;
  std::thread waiter([&] {  // both replicas at their limit: waits for a release of either
    auto e = pool.Acquire();
    ASSERT_TRUE(e.ok());
    waited = std::move(*e);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(waited, nullptr);
  EXPECT_EQ(pool.Release(std::move(*a)), 0u);  // a release names the replica it went back to
  waiter.join();
  ASSERT_NE(waited, nullptr);
  EXPECT_EQ(waited.get(), released);
  EXPECT_EQ(pool.Release(std::move(*b)), 1u);
  for (auto* e : {&waited, &c.value(), &d.value()}) pool.Release(std::move(*e));
  EXPECT_EQ(pool.Busy(0) + pool.Busy(1), 0);
}

TEST(ExecutorPool, PassesOverAReplicaWhoseDeviceFailed) {
  testing::SwitchableHealthBackend first, second;
  ExecutorPool pool({{&first, nullptr}, {&second, nullptr}}, 1);
  first.Fail("GPU 0 met an unrecoverable error");
  auto a = pool.Acquire();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(pool.ReplicaOf(a->get()), 1u);
  EXPECT_TRUE(pool.Health().ok());
  // The healthy replica is busy: a caller waits for it rather than taking the failed one.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto b = pool.Acquire();
    got = b.ok();
    if (b.ok()) {
      EXPECT_EQ(pool.ReplicaOf(b->get()), 1u);
      pool.Release(std::move(*b));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  pool.Release(std::move(*a));
  waiter.join();
  EXPECT_TRUE(got.load());
  second.Fail("GPU 1 met an unrecoverable error");
  auto none = pool.Acquire();
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(none.status().message(), "GPU 0 met an unrecoverable error");
  EXPECT_EQ(pool.Health().message(), "GPU 0 met an unrecoverable error");
}

// A caller with a deadline waits for a release until then: DeadlineExceeded past it, the
// executor released before it otherwise.
TEST(ExecutorPool, ACallerWaitsForAnExecutorUntilItsDeadline) {
  ExecutorPool pool({{&CpuBackend(), nullptr}}, 1);
  auto held = pool.Acquire();
  ASSERT_TRUE(held.ok());
  const auto began = std::chrono::steady_clock::now();
  auto late = pool.Acquire(began + std::chrono::milliseconds(30));
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(30));
  const Executor* executor = held->get();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pool.Release(std::move(*held));
  });
  auto in_time = pool.Acquire(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  releaser.join();
  ASSERT_TRUE(in_time.ok()) << in_time.status().ToString();
  EXPECT_EQ(in_time->get(), executor);
  pool.Release(std::move(*in_time));
}

// Callers past both replicas' executors, each woken by one release (no herd): every caller gets
// one, no replica lends more than its limit, and once a replica fails its released executors wake
// callers who pass it over and still get the other's.
TEST(ExecutorPool, CallersPastEveryReplicaAreEachServedByOneRelease) {
  testing::SwitchableHealthBackend first, second;
  ExecutorPool pool({{&first, nullptr}, {&second, nullptr}}, 1);
  constexpr int kThreads = 12, kRounds = 400;
  std::atomic<int> served{0}, over_limit{0}, failed_taken{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        const bool after_failure = failed.load();
        auto e = pool.Acquire();
        ASSERT_TRUE(e.ok()) << e.status().ToString();
        const size_t replica = pool.ReplicaOf(e->get());
        if (pool.Busy(replica) > 1) ++over_limit;
        if (after_failure && replica == 0) ++failed_taken;
        ++served;
        pool.Release(std::move(*e));
      }
    });
  }
  while (served.load() < kThreads * kRounds / 2) std::this_thread::yield();
  first.Fail("GPU 0 met an unrecoverable error");
  failed = true;
  for (auto& c : callers) c.join();
  EXPECT_EQ(served.load(), kThreads * kRounds);
  EXPECT_EQ(over_limit.load(), 0);
  EXPECT_EQ(failed_taken.load(), 0) << "an executor of the failed replica was lent after it failed";
  EXPECT_EQ(pool.Busy(0) + pool.Busy(1), 0);
}

}  // namespace
}  // namespace rankd

// ExecutorPool (runtime/executor_pool.h): executors made on demand up to the limit, reused, and a
// waiter woken by the release it waits for.
#include "runtime/executor_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace rankd {
namespace {

TEST(ExecutorPool, MakesUpToItsLimitAndReusesReleasedOnes) {
  ExecutorPool pool(CpuBackend(), nullptr, 2);
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
  ExecutorPool pool(CpuBackend(), nullptr, 0);
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

}  // namespace
}  // namespace rankd

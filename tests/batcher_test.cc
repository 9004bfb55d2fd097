// The threaded batcher: every request runs exactly once, requests merge under load, a full queue
// refuses at once, deadlines expire, priorities order, destruction drains. The capture worker:
// one job per plan, in order, concurrent submitters, stop. Runs under ThreadSanitizer in
// scripts/test.sh.
#include "batching/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/capture_worker.h"

namespace rankd {
namespace {

struct TestTask : BatchTask {
  int id = 0;
  std::atomic<int>* failed = nullptr;
  Status failure;
  void Fail(const Status& s) override {
    failure = s;
    if (failed) ++*failed;
  }
};

std::unique_ptr<BatchTask> Make(int id, int64_t rows = 10, int priority = 0) {
  auto t = std::make_unique<TestTask>();
  t->id = id;
  t->info.rows = rows;
  t->info.priority = priority;
  t->info.enqueued = BatchClock::now();
  return t;
}

// A batch run that waits for `gate` (which the test holds locked) and counts the requests it ran.
RunBatch GatedRun(std::mutex& gate, std::atomic<int>& ran) {
  return [&gate, &ran](std::vector<std::unique_ptr<BatchTask>> batch) {
    std::lock_guard<std::mutex> wait(gate);
    ran += static_cast<int>(batch.size());
  };
}

// Hands `b` its first request and waits until an executor took it (and blocks on its gate), so
// that the requests after it queue.
void StartBlockedBatch(Batcher& b, std::unique_ptr<BatchTask> first) {
  ASSERT_TRUE(b.Enqueue(first).ok());
  while (b.queued() > 0) std::this_thread::yield();
}

TEST(Batcher, EveryRequestRunsOnceAndRequestsMerge) {
  std::mutex mu;
  std::multiset<int> seen;
  std::vector<size_t> sizes;
  BatcherOptions o;
  o.executors = 3;
  o.policy.max_queue_delay = std::chrono::microseconds(200);
  o.policy.cost_budget = 100;  // up to 10 requests of 10 rows
  o.policy.max_enqueued = 100000;
  {
    Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      std::lock_guard<std::mutex> lock(mu);
      sizes.push_back(batch.size());
      int64_t rows = 0;
      for (auto& t : batch) {
        seen.insert(static_cast<TestTask*>(t.get())->id);
        rows += t->info.rows;
      }
      EXPECT_LE(rows, 100);
    });
    std::vector<std::thread> producers;
    for (int p = 0; p < 8; ++p) {
      producers.emplace_back([&b, p] {
        for (int i = 0; i < 200; ++i) {
          auto t = Make(p * 1000 + i);
          ASSERT_TRUE(b.Enqueue(t).ok());
        }
      });
    }
    for (auto& t : producers) t.join();
  }  // destruction drains
  ASSERT_EQ(seen.size(), 1600u);
  for (int p = 0; p < 8; ++p) {
    for (int i = 0; i < 200; ++i) EXPECT_EQ(seen.count(p * 1000 + i), 1u);
  }
  size_t merged = 0;
  for (size_t s : sizes) merged += s > 1;
  EXPECT_GT(merged, 0u) << "no batch held more than one request";
}

TEST(Batcher, FullQueueRefusesAndKeepsOwnership) {
  std::mutex gate;
  gate.lock();  // the first batch blocks, so the queue fills
  BatcherOptions o;
  o.policy.max_enqueued = 2;
  o.policy.cost_budget = 10;  // one request per batch
  std::atomic<int> ran{0};
  {
    Batcher b(o, GatedRun(gate, ran));
    StartBlockedBatch(b, Make(0));
    auto a = Make(1), c = Make(2), d = Make(3);
    ASSERT_TRUE(b.Enqueue(a).ok());
    EXPECT_TRUE(b.Admission().ok());
    ASSERT_TRUE(b.Enqueue(c).ok());
    EXPECT_EQ(b.Admission().code(), StatusCode::kUnavailable);  // asked before a request is read
    Status s = b.Enqueue(d);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    ASSERT_NE(d, nullptr);  // still the caller's
    gate.unlock();
  }
  EXPECT_EQ(ran.load(), 3);
}

// With max_queue_wait, a request finding the queue's head older than the bound is refused at once
// and stays the caller's; once the queue drains, requests are taken again. A fake clock.
TEST(Batcher, QueueBehindItsWaitBoundRefusesNewRequests) {
  std::mutex gate;
  gate.lock();
  std::atomic<int64_t> now_us{0};
  const auto epoch = BatchClock::now();
  BatcherOptions o;
  o.policy.cost_budget = 10;  // one request per batch
  o.policy.max_queue_delay = std::chrono::microseconds(0);
  o.policy.max_queue_wait = std::chrono::milliseconds(20);
  o.now = [&] { return epoch + std::chrono::microseconds(now_us.load()); };
  std::atomic<int> ran{0};
  auto at = [&](int id) {
    auto t = Make(id);
    t->info.enqueued = o.now();
    return t;
  };
  {
    Batcher b(o, GatedRun(gate, ran));
    StartBlockedBatch(b, at(0));
    auto head = at(1);
    ASSERT_TRUE(b.Enqueue(head).ok());  // an empty queue: nothing is behind
    now_us = 20'000;                    // the head has waited exactly the bound: still taken
    auto second = at(2);
    ASSERT_TRUE(b.Enqueue(second).ok());
    now_us = 20'001;
    auto late = at(3);
    Status s = b.Enqueue(late);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("the queue is behind: its oldest request has waited 20 ms"), std::string::npos)
        << s.ToString();
    ASSERT_NE(late, nullptr);  // still the caller's
    gate.unlock();
    while (b.queued() > 0) std::this_thread::yield();  // drained
    ASSERT_TRUE(b.Enqueue(late).ok());
  }
  EXPECT_EQ(ran.load(), 4);
}

// A batcher with the automatic queue bound, one request per batch, whose batches wait on `gate`
// and advance a fake clock by `run_us` each.
struct ClockedBatcher {
  explicit ClockedBatcher(int64_t run) : run_us(run) {
    BatcherOptions o;
    o.policy.cost_budget = 10;
    o.policy.max_queue_delay = std::chrono::microseconds(0);
    o.policy.auto_queue_wait = true;
    o.now = [this] { return Now(); };
    batcher = std::make_unique<Batcher>(o, [this](std::vector<std::unique_ptr<BatchTask>> batch) {
      std::lock_guard<std::mutex> wait(gate);
      now_us += run_us.load();
      ran += static_cast<int>(batch.size());
    });
  }
  BatchClock::time_point Now() const { return epoch + std::chrono::microseconds(now_us.load()); }
  // A request enqueued now.
  std::unique_ptr<BatchTask> At(int id) const {
    auto t = Make(id);
    t->info.enqueued = Now();
    return t;
  }
  Status Enqueue(std::unique_ptr<BatchTask>& t) { return batcher->Enqueue(t); }
  // Enqueues `id` and waits until the executor has taken it.
  void Running(int id) {
    auto t = At(id);
    ASSERT_TRUE(Enqueue(t).ok());
    while (batcher->queued() > 0) std::this_thread::yield();
  }
  // Waits until `n` requests ran and none is queued.
  void Settle(int n) const {
    while (ran.load() < n || batcher->queued() > 0) std::this_thread::yield();
  }

  std::mutex gate;
  std::atomic<int64_t> now_us{0}, run_us;
  std::atomic<int> ran{0};
  const BatchClock::time_point epoch = BatchClock::now();
  std::unique_ptr<Batcher> batcher;  // last: stopped before the rest goes
};

// Without a bound of its own (a config that gives no max_queue_wait_microseconds) a queue is
// bounded once it stands: when it has not emptied for two of its latest batch's run time (at
// least 100 ms) and its head has waited more than 4 times a request's run time (at least 20 ms),
// new requests are refused. A burst that batches drain is queued whole, however long its head
// waits. Within a second of a refusal a queue that forms again is bounded at once.
TEST(Batcher, WithoutABoundOfItsOwnAQueueThatStandsRefusesNewRequests) {
  ClockedBatcher b(10'000);
  // Before any batch ran there is no bound: a blocked executor, a head 10 s late, still queued.
  b.gate.lock();
  b.Running(0);
  auto early = b.At(1);
  ASSERT_TRUE(b.Enqueue(early).ok());
  b.now_us += 10'000'000;
  auto unbounded = b.At(2);
  ASSERT_TRUE(b.Enqueue(unbounded).ok());
  b.gate.unlock();
  b.Settle(3);  // three batches of 10 ms: a request's run time 10 ms, its bound 40 ms
  // A burst: the executor blocked, the queue formed at t0; 90 ms later its head has waited past
  // 40 ms, but the queue has stood for less than 100 ms.
  b.gate.lock();
  b.run_us = 0;
  b.Running(3);
  const int64_t t0 = b.now_us.load();
  auto head = b.At(4);
  ASSERT_TRUE(b.Enqueue(head).ok());
  b.now_us = t0 + 90'000;
  auto burst = b.At(5);
  ASSERT_TRUE(b.Enqueue(burst).ok()) << "a queue formed 90 ms ago is a burst";
  // At 100 ms it stands, and its head (100 ms) is past the bound: refused, and still the caller's.
  b.now_us = t0 + 100'000;
  auto late = b.At(6);
  Status s = b.Enqueue(late);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("it has not emptied for 100 ms and its oldest request has waited 100 ms, more than "
                             "the 40 ms that 4 of its requests' run time allow"),
            std::string::npos)
      << s.ToString();
  ASSERT_NE(late, nullptr);
  // Asked before a request is read, the batcher answers as Enqueue would.
  Status asked = b.batcher->Admission();
  EXPECT_EQ(asked.code(), StatusCode::kUnavailable);
  EXPECT_NE(asked.message().find("the queue is behind"), std::string::npos) << asked.ToString();
  b.gate.unlock();
  b.Settle(6);
  EXPECT_TRUE(b.batcher->Admission().ok()) << "an empty queue admits";
  ASSERT_TRUE(b.Enqueue(late).ok()) << "drained, the queue takes requests again";
  b.Settle(7);
  // Within a second of that refusal a queue that forms again is bounded at once: the same overload.
  b.gate.lock();
  b.Running(7);
  const int64_t t1 = b.now_us.load();
  auto head2 = b.At(8);
  ASSERT_TRUE(b.Enqueue(head2).ok());
  b.now_us = t1 + 21'000;  // the latest batches ran in no time: the bound is the 20 ms floor
  auto shed = b.At(9);
  s = b.Enqueue(shed);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("it was shed within the last second"), std::string::npos) << s.ToString();
  b.gate.unlock();
  b.Settle(9);
  // A second after the last refusal a queue must stand again before it is bounded.
  b.now_us = t1 + 21'000 + 1'000'000;
  b.gate.lock();
  b.Running(10);
  auto head3 = b.At(11);
  ASSERT_TRUE(b.Enqueue(head3).ok());
  b.now_us += 50'000;
  EXPECT_TRUE(b.Enqueue(shed).ok()) << "a queue formed 50 ms ago, a second after the last refusal: a burst";
  b.gate.unlock();
  b.Settle(12);
}

// The automatic bound's floors: batches of 1 ms give a bound of 20 ms once the queue has stood
// 100 ms; a latest batch of 80 ms makes the queue stand only after 160 ms.
TEST(Batcher, AStandingQueuesBoundFollowsItsBatchesRunTime) {
  ClockedBatcher b(1'000);
  auto one = b.At(0);
  ASSERT_TRUE(b.Enqueue(one).ok());
  b.Settle(1);
  // Blocks the executor on `id`, queues a head, moves the clock, and offers one more.
  auto stand = [&](int64_t for_us, int id) {
    b.Running(id);
    auto head = b.At(id + 1);
    EXPECT_TRUE(b.Enqueue(head).ok());
    b.now_us += for_us;
    auto t = b.At(id + 2);
    return b.Enqueue(t);
  };
  b.gate.lock();
  b.run_us = 0;
  EXPECT_TRUE(stand(99'000, 1).ok());
  b.gate.unlock();
  b.Settle(4);
  b.gate.lock();
  Status s = stand(100'000, 4);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("more than the 20 ms"), std::string::npos) << s.ToString();
  b.gate.unlock();
  b.Settle(6);
  // A second later (the refusal above no longer counts), one batch of 80 ms (its request's run
  // time does not raise the typical one at once).
  b.now_us += 1'000'000;
  b.run_us = 80'000;
  auto slow = b.At(7);
  ASSERT_TRUE(b.Enqueue(slow).ok());
  b.Settle(7);
  b.run_us = 0;
  b.gate.lock();
  EXPECT_TRUE(stand(150'000, 8).ok()) << "160 ms: two of the latest batch's 80 ms";
  b.gate.unlock();
  b.Settle(10);
}

TEST(Batcher, ExpiredRequestsFailAndNeverRun) {
  std::atomic<int> failed{0}, ran{0};
  {
    Batcher b({}, [&](std::vector<std::unique_ptr<BatchTask>> batch) { ran += static_cast<int>(batch.size()); });
    auto t = Make(7);
    static_cast<TestTask*>(t.get())->failed = &failed;
    t->info.deadline = BatchClock::now() - std::chrono::milliseconds(1);
    ASSERT_TRUE(b.Enqueue(t).ok());
    auto ok = Make(8);
    ASSERT_TRUE(b.Enqueue(ok).ok());
  }
  EXPECT_EQ(failed.load(), 1);
  EXPECT_EQ(ran.load(), 1);
}

// FailQueued while a batch runs: the queued requests are answered with the status given before it
// returns and never run, the running batch finishes, and later requests are refused.
TEST(Batcher, FailQueuedAnswersTheQueueAndLetsTheRunningBatchFinish) {
  std::mutex gate;
  gate.lock();  // the first batch blocks, so the rest queue
  BatcherOptions o;
  o.policy.cost_budget = 10;  // one request per batch
  std::atomic<int> failed{0}, ran{0};
  {
    Batcher b(o, GatedRun(gate, ran));
    StartBlockedBatch(b, Make(0));
    for (int id = 1; id <= 3; ++id) {
      auto t = Make(id);
      static_cast<TestTask*>(t.get())->failed = &failed;
      ASSERT_TRUE(b.Enqueue(t).ok());
    }
    b.FailQueued(Unavailable("the server is shutting down"));  // returns with the batch still running
    EXPECT_EQ(failed.load(), 3);
    EXPECT_EQ(b.queued(), 0u);
    auto late = Make(4);
    const Status refused = b.Enqueue(late);
    EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
    EXPECT_EQ(refused.message(), "the server is shutting down");  // the stop's reason, not the model's
    EXPECT_NE(late, nullptr);                                     // refused: still the caller's
    EXPECT_EQ(ran.load(), 0);
    gate.unlock();
  }
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(failed.load(), 3);
}

// Five requests of 10 rows queue while a batch runs, with a queue delay far longer than the test
// and a second executor free. With a preferred size of 30 rows that executor takes three of them
// at once and the other two go when nothing runs any more; without one, all five wait for that
// and go together. Batch sizes sorted (the two blocked batches finish in either order).
// `left` is how many stay queued while the first batch runs: awaited (for up to 10 s, then 20 ms
// more for anything else that might go) before the first batch is let finish.
std::vector<size_t> BatchSizesBehindABlocker(std::vector<int64_t> preferred_rows, size_t left) {
  std::mutex gate, mu;
  gate.lock();
  std::vector<size_t> sizes;
  BatcherOptions o;
  o.policy.max_queue_delay = std::chrono::seconds(60);
  o.policy.preferred_rows = std::move(preferred_rows);
  o.executors = 2;
  {
    Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) {
      std::lock_guard<std::mutex> wait(gate);
      std::lock_guard<std::mutex> lock(mu);
      sizes.push_back(batch.size());
    });
    auto blocker = Make(0);
    EXPECT_TRUE(b.Enqueue(blocker).ok());
    while (b.queued() > 0) std::this_thread::yield();  // the executor took it and is blocked
    for (int id = 1; id <= 5; ++id) {
      auto t = Make(id);
      EXPECT_TRUE(b.Enqueue(t).ok());
    }
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (b.queued() > left && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(b.queued(), left);
    gate.unlock();
  }
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

TEST(Batcher, PreferredSizeIsSentWithoutWaitingForTheDelay) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(BatchSizesBehindABlocker({30}, 2), std::vector<size_t>({1, 2, 3}));
  EXPECT_EQ(BatchSizesBehindABlocker({}, 5), std::vector<size_t>({1, 5}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));  // no 60 s delay was waited
}

TEST(Batcher, HigherPriorityRunsFirst) {
  std::mutex gate, mu;
  gate.lock();
  std::vector<int> order;
  BatcherOptions o;
  o.policy.cost_budget = 10;  // one request per batch
  {
    Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) {
      std::lock_guard<std::mutex> wait(gate);
      std::lock_guard<std::mutex> lock(mu);
      for (auto& t : batch) order.push_back(static_cast<TestTask*>(t.get())->id);
    });
    auto blocker = Make(0);
    ASSERT_TRUE(b.Enqueue(blocker).ok());
    while (b.queued() > 0) std::this_thread::yield();
    for (auto [id, prio] : std::vector<std::pair<int, int>>{{1, 0}, {2, 0}, {3, 5}, {4, 5}}) {
      auto t = Make(id, 10, prio);
      ASSERT_TRUE(b.Enqueue(t).ok());
    }
    gate.unlock();
  }
  EXPECT_EQ(order, std::vector<int>({0, 3, 4, 1, 2}));
}

// Light load: a request whose caller offers its thread and that finds the batcher idle runs on
// that thread, before Enqueue returns; while a batch runs, requests queue (offered thread or not)
// and merge on the batcher's threads once it ends. Without the offer a request always queues.
TEST(Batcher, IdleBatcherRunsAnOfferedRequestOnItsCallersThread) {
  std::mutex gate, mu;
  std::map<int, std::thread::id> ran_on;
  std::vector<size_t> sizes;
  BatcherOptions o;
  o.executors = 2;
  o.policy.max_queue_delay = std::chrono::microseconds(0);
  {
    Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) {
      std::lock_guard<std::mutex> wait(gate);
      std::lock_guard<std::mutex> lock(mu);
      sizes.push_back(batch.size());
      for (auto& t : batch) ran_on[static_cast<TestTask*>(t.get())->id] = std::this_thread::get_id();
    });
    for (int id = 0; id < 3; ++id) {  // one after another: each alone, each on this thread
      auto t = Make(id);
      ASSERT_TRUE(b.Enqueue(t, /*run_here_when_idle=*/true).ok());
      EXPECT_EQ(t, nullptr);
      std::lock_guard<std::mutex> lock(mu);
      ASSERT_EQ(ran_on.count(id), 1u) << "request " << id << " had not run when Enqueue returned";
      EXPECT_EQ(ran_on[id], std::this_thread::get_id());
    }
    EXPECT_EQ(b.ran_on_caller(), 3u);
    gate.lock();  // the next caller's run holds an executor
    std::thread holder([&b] {
      auto t = Make(10);
      ASSERT_TRUE(b.Enqueue(t, /*run_here_when_idle=*/true).ok());
    });
    while (b.ran_on_caller() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // A batch runs: these go to the batcher's threads and return at once, though one executor
    // is free (which takes a batch, and waits on the gate too).
    for (int id = 11; id < 14; ++id) {
      auto t = Make(id);
      ASSERT_TRUE(b.Enqueue(t, /*run_here_when_idle=*/true).ok());
    }
    EXPECT_EQ(b.ran_on_caller(), 4u);
    gate.unlock();
    holder.join();
    while (true) {  // idle again
      {
        std::lock_guard<std::mutex> lock(mu);
        if (ran_on.size() == 7) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto t = Make(20);  // not offered: queued, though the batcher is idle
    ASSERT_TRUE(b.Enqueue(t).ok());
  }
  EXPECT_EQ(ran_on.size(), 8u);
  for (int id : {11, 12, 13, 20}) {
    ASSERT_EQ(ran_on.count(id), 1u);
    EXPECT_NE(ran_on[id], std::this_thread::get_id());
  }
  size_t requests = 0;
  for (size_t s : sizes) requests += s;
  EXPECT_EQ(requests, 8u);
}

// The ids of this process's threads.
std::set<std::string> ThreadIds() {
  std::set<std::string> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ids.insert(e.path().filename());
  return ids;
}

// How often the threads `ids` have gone to sleep (voluntary context switches), together.
int64_t Sleeps(const std::set<std::string>& ids) {
  int64_t total = 0;
  for (const std::string& id : ids) {
    std::ifstream status("/proc/self/task/" + id + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) total += std::stoll(line.substr(line.find(':') + 1));
    }
  }
  return total;
}

// The batcher's executor threads: those its construction started.
std::set<std::string> ExecutorThreads(const std::set<std::string>& before) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // each waiting for work
  std::set<std::string> started;
  for (const std::string& id : ThreadIds()) {
    if (!before.count(id)) started.insert(id);
  }
  return started;
}

// Requests run on their callers' threads wake none of the idle executors: every executor woken
// after each run cost two context switches per executor and request.
TEST(Batcher, IdleExecutorsSleepThroughRequestsRunOnTheirCallers) {
  BatcherOptions o;
  o.executors = 4;
  o.policy.max_queue_delay = std::chrono::microseconds(0);
  int ran = 0;
  const std::set<std::string> before = ThreadIds();
  Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) { ran += static_cast<int>(batch.size()); });
  const std::set<std::string> executors = ExecutorThreads(before);
  ASSERT_EQ(executors.size(), 4u);
  const int64_t slept = Sleeps(executors);
  for (int id = 0; id < 200; ++id) {
    auto t = Make(id);
    ASSERT_TRUE(b.Enqueue(t, /*run_here_when_idle=*/true).ok());
  }
  EXPECT_EQ(b.ran_on_caller(), 200u);
  EXPECT_EQ(ran, 200);
  EXPECT_LT(Sleeps(executors) - slept, 10) << "idle executors were woken for requests run on their callers";
}

// Requests queued behind a running batch, with the forming batch's delay far off, wake at most
// the one executor that times the delay; they still all run.
TEST(Batcher, QueuedRequestsWakeOnlyTheExecutorThatTimesTheDelay) {
  BatcherOptions o;
  o.executors = 4;
  o.policy.max_queue_delay = std::chrono::seconds(2);
  o.policy.cost_budget = 1e9;
  std::mutex gate;
  std::atomic<int> ran{0};
  const std::set<std::string> before = ThreadIds();
  {
    Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) {
      std::lock_guard<std::mutex> wait(gate);
      ran += static_cast<int>(batch.size());
    });
    const std::set<std::string> executors = ExecutorThreads(before);
    ASSERT_EQ(executors.size(), 4u);
    gate.lock();  // the first batch runs and holds its executor
    auto first = Make(0);
    ASSERT_TRUE(b.Enqueue(first).ok());
    while (b.queued() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int64_t slept = Sleeps(executors);
    for (int id = 1; id <= 100; ++id) {  // apart, so that an executor woken for one sleeps again
      auto t = Make(id);
      ASSERT_TRUE(b.Enqueue(t).ok());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const int64_t woken = Sleeps(executors) - slept;
    gate.unlock();
    EXPECT_LT(woken, 10) << "idle executors were woken for requests that wait for the delay";
  }  // destruction drains
  EXPECT_EQ(ran.load(), 101);
}

// A run on the caller's thread that throws still gives its executor back: the exception reaches
// the caller, and the next request finds the batcher idle again.
TEST(Batcher, ARunOnTheCallersThreadThatThrowsGivesItsExecutorBack) {
  std::vector<int> ran;
  BatcherOptions o;
  o.executors = 1;
  o.policy.max_queue_delay = std::chrono::microseconds(0);
  Batcher b(o, [&](std::vector<std::unique_ptr<BatchTask>> batch) {
    const int id = static_cast<TestTask*>(batch.front().get())->id;
    if (id == 1) throw std::runtime_error("run failed");
    ran.push_back(id);
  });
  auto failing = Make(1);
  EXPECT_THROW((void)b.Enqueue(failing, /*run_here_when_idle=*/true), std::runtime_error);
  auto next = Make(2);
  ASSERT_TRUE(b.Enqueue(next, /*run_here_when_idle=*/true).ok());
  EXPECT_EQ(b.ran_on_caller(), 2u);
  EXPECT_EQ(ran, std::vector<int>({2}));  // run before Enqueue returned: the executor was free
}

TEST(CaptureWorker, RunsEachPlansJobOnceInOrderAndDrains) {
  std::atomic<int> runs{0};
  std::vector<int> order;  // written by the worker thread only; read after Drain
  CaptureWorker worker;
  EXPECT_TRUE(worker.Submit(1, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    order.push_back(1);
    ++runs;
  }));
  EXPECT_FALSE(worker.Submit(1, [&] { ++runs; }));  // the same plan while it runs or waits: dropped
  EXPECT_TRUE(worker.Submit(2, [&] {
    order.push_back(2);
    ++runs;
  }));
  worker.Drain();
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(order, std::vector<int>({1, 2}));
  EXPECT_TRUE(worker.Submit(2, [&] { ++runs; }));  // done: a plan may need capturing again
  worker.Drain();
  EXPECT_EQ(runs.load(), 3);
}

TEST(CaptureWorker, StoppingDropsPendingJobsAndFinishesTheRunningOne) {
  std::atomic<int> runs{0};
  std::atomic<bool> started{false};
  {
    CaptureWorker worker;
    worker.Submit(1, [&] {
      started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ++runs;
    });
    for (uint64_t id = 2; id < 10; ++id) worker.Submit(id, [&] { ++runs; });
    while (!started) std::this_thread::yield();
  }
  EXPECT_EQ(runs.load(), 1);
}

TEST(CaptureWorker, ConcurrentSubmittersNeverRunAPlanTwiceAtOnce) {
  std::atomic<int> queued{0}, ran{0};
  std::vector<std::atomic<int>> running(50);
  std::atomic<bool> overlap{false};
  CaptureWorker worker;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (uint64_t id = 0; id < 50; ++id) {
        bool ok = worker.Submit(id, [&, id] {
          if (++running[id] > 1) overlap = true;
          ++ran;
          --running[id];
        });
        if (ok) ++queued;
      }
    });
  }
  for (auto& t : threads) t.join();
  worker.Drain();
  EXPECT_FALSE(overlap.load());
  EXPECT_GE(queued.load(), 50);          // each plan at least once
  EXPECT_EQ(ran.load(), queued.load());  // every job queued ran
}

}  // namespace
}  // namespace rankd

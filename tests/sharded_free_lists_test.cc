// ShardedFreeLists (the pinned pool's free lists): a thread takes back what it gave, last first;
// blocks freed on other threads are found; many threads taking and giving at once never hold one
// block twice and lose none.
#include "common/sharded_free_lists.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace rankd {
namespace {

TEST(ShardedFreeLists, TakesWhatItsThreadGaveLastFirst) {
  ShardedFreeLists lists(4, 10);
  int a = 0, b = 0;
  EXPECT_EQ(lists.Take(3), nullptr);
  lists.Give(3, &a);
  lists.Give(3, &b);
  EXPECT_EQ(lists.FreeBlocks(3), 2u);
  EXPECT_EQ(lists.Take(4), nullptr) << "a block of another size";
  EXPECT_EQ(lists.Take(3), &b);
  EXPECT_EQ(lists.Take(3), &a);
  EXPECT_EQ(lists.Take(3), nullptr);
  EXPECT_EQ(lists.FreeBlocks(3), 0u);
}

TEST(ShardedFreeLists, BlocksFreedOnAnotherThreadAreTaken) {
  ShardedFreeLists lists(4, 10);
  std::vector<int> blocks(10);
  size_t giver_shard = 0;
  std::thread giver([&] {
    giver_shard = lists.ThreadShard();
    for (int& b : blocks) lists.Give(5, &b);
  });
  giver.join();
  // Threads are numbered as they first come: the next thread to ask has another shard.
  size_t taker_shard = 0;
  std::set<void*> taken;
  std::thread taker([&] {
    taker_shard = lists.ThreadShard();
    while (void* p = lists.Take(5)) EXPECT_TRUE(taken.insert(p).second) << "a block taken twice";
  });
  taker.join();
  EXPECT_NE(giver_shard, taker_shard);
  EXPECT_EQ(taken.size(), blocks.size());
  EXPECT_EQ(lists.FreeBlocks(5), 0u);
}

TEST(ShardedFreeLists, ThreadsTakingAndGivingAtOnceHoldNoBlockTwiceAndLoseNone) {
  constexpr int kSizes = 4, kBlocksPerSize = 64, kThreads = 8, kSteps = 20000;
  ShardedFreeLists lists(3, kSizes - 1);
  std::vector<std::atomic<bool>> held(kSizes * kBlocksPerSize);
  std::vector<char> storage(held.size());
  auto index = [&](void* p) { return static_cast<size_t>(static_cast<char*>(p) - storage.data()); };
  for (int s = 0; s < kSizes; ++s) {
    for (int i = 0; i < kBlocksPerSize; ++i) lists.Give(s, &storage[static_cast<size_t>(s * kBlocksPerSize + i)]);
  }
  std::atomic<int> twice{0}, wrong_size{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      std::vector<std::pair<int, void*>> mine;
      for (int step = 0; step < kSteps; ++step) {
        if (mine.size() < 8 && rng() % 2 == 0) {
          const int s = static_cast<int>(rng() % kSizes);
          if (void* p = lists.Take(s)) {
            if (held[index(p)].exchange(true)) ++twice;
            if (static_cast<int>(index(p)) / kBlocksPerSize != s) ++wrong_size;
            mine.emplace_back(s, p);
          }
        } else if (!mine.empty()) {
          auto [s, p] = mine.back();
          mine.pop_back();
          held[index(p)].store(false);
          lists.Give(s, p);
        }
      }
      for (auto [s, p] : mine) {
        held[index(p)].store(false);
        lists.Give(s, p);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(twice.load(), 0);
  EXPECT_EQ(wrong_size.load(), 0);
  for (int s = 0; s < kSizes; ++s) EXPECT_EQ(lists.FreeBlocks(s), static_cast<size_t>(kBlocksPerSize)) << "size " << s;
  std::set<void*> all;
  for (int s = 0; s < kSizes; ++s) {
    while (void* p = lists.Take(s)) all.insert(p);
  }
  EXPECT_EQ(all.size(), held.size());
}

}  // namespace
}  // namespace rankd

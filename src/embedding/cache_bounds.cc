#include "embedding/cache_bounds.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rankd {

int64_t BeladyHits(std::span<const uint64_t> trace, int64_t capacity) {
  if (capacity <= 0) return 0;
  const int64_t n = static_cast<int64_t>(trace.size());
  const int64_t never = std::numeric_limits<int64_t>::max();
  // next[i]: where trace[i] is accessed next, or `never`.
  std::vector<int64_t> next(trace.size());
  std::unordered_map<uint64_t, int64_t> seen_at;
  for (int64_t i = n - 1; i >= 0; --i) {
    auto [it, fresh] = seen_at.try_emplace(trace[static_cast<size_t>(i)], i);
    next[static_cast<size_t>(i)] = fresh ? never : it->second;
    it->second = i;
  }
  std::set<std::pair<int64_t, uint64_t>> by_next;  // cached keys by their next access
  std::unordered_map<uint64_t, int64_t> cached;    // cached key -> its next access
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t key = trace[static_cast<size_t>(i)];
    const int64_t upcoming = next[static_cast<size_t>(i)];
    auto it = cached.find(key);
    if (it != cached.end()) {
      ++hits;
      by_next.erase({it->second, key});
      if (upcoming == never) {
        cached.erase(it);  // never read again: its slot is free for others
      } else {
        it->second = upcoming;
        by_next.insert({upcoming, key});
      }
      continue;
    }
    if (upcoming == never) continue;  // caching it could not hit
    if (static_cast<int64_t>(cached.size()) == capacity) {
      auto furthest = std::prev(by_next.end());
      if (furthest->first < upcoming) continue;  // every cached key is needed sooner
      cached.erase(furthest->second);
      by_next.erase(furthest);
    }
    cached.emplace(key, upcoming);
    by_next.insert({upcoming, key});
  }
  return hits;
}

int64_t StaticOracleHits(std::span<const uint64_t> trace, int64_t capacity) {
  std::unordered_map<uint64_t, int64_t> counts;
  for (uint64_t key : trace) ++counts[key];
  std::vector<int64_t> sorted;
  sorted.reserve(counts.size());
  for (const auto& [key, count] : counts) sorted.push_back(count);
  const auto k = static_cast<size_t>(std::clamp<int64_t>(capacity, 0, static_cast<int64_t>(sorted.size())));
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end(), std::greater<>());
  int64_t hits = 0;
  for (size_t i = 0; i < k; ++i) hits += sorted[i];
  return hits;
}

}  // namespace rankd

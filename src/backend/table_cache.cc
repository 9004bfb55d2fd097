#include "backend/table_cache.h"

#include <unordered_map>

namespace rankd {

std::vector<TableCache::Fill> LastFills(std::span<const TableCache::Fill> fills, std::span<const int64_t> row_of_slot) {
  std::unordered_map<int64_t, size_t> at;
  std::vector<TableCache::Fill> last;
  for (const TableCache::Fill& f : fills) {
    auto [it, added] = at.try_emplace(f.slot, last.size());
    if (added)
      last.push_back(f);
    else
      last[it->second].row = f.row;
  }
  std::erase_if(last, [&](const TableCache::Fill& f) { return row_of_slot[static_cast<size_t>(f.slot)] == f.row; });
  return last;
}

}  // namespace rankd

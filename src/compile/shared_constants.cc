#include "compile/shared_constants.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "common/mutex.h"
#include "common/parallel.h"
#include "model/mapped_file.h"

namespace rankd {
namespace {

// A constant offered, held weakly: its storage lives while some model's tensor keeps it (or, for
// a constant viewing a model's external-data file, while a graph maps that file).
struct Offered {
  const void* data = nullptr;
  MemoryLocation location;
  std::weak_ptr<const void> keeper;
  std::weak_ptr<const MappedFile> file;  // the file it lies in, if any
};

using Key = std::tuple<DType, Shape>;

Mutex mu;
std::multimap<Key, Offered>& OfferedConstants() RANKD_REQUIRES(mu) {
  static auto* offered = new std::multimap<Key, Offered>;  // lives past static destruction
  return *offered;
}

// Whether `bytes` at `a` and at `b` are equal, compared on every core in 16 MiB pieces, each
// thread stopping at the first difference any has found.
bool SameBytes(const void* a, const void* b, size_t bytes) {
  constexpr size_t kPiece = size_t{16} << 20;
  const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  std::atomic<bool> differ{false};
  ParallelFor(pieces, int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end && !differ.load(std::memory_order_relaxed); ++p) {
      const size_t at = static_cast<size_t>(p) * kPiece, n = std::min(kPiece, bytes - at);
      if (std::memcmp(static_cast<const uint8_t*>(a) + at, static_cast<const uint8_t*>(b) + at, n) != 0) {
        differ.store(true, std::memory_order_relaxed);
      }
    }
  });
  return !differ.load();
}

}  // namespace

size_t ShareEqualConstants(Graph& graph, size_t min_bytes) {
  MutexLock lock(mu);
  auto& offered = OfferedConstants();
  std::erase_if(offered, [](const auto& entry) { return entry.second.keeper.expired(); });
  std::vector<std::pair<Key, Offered>> offers;  // offered once the whole graph is through: a graph's
                                                // own equal constants stay apart (each its own table)
  std::vector<const void*> taken;               // storage this graph shares already
  size_t shared = 0;
  for (auto& [id, t] : graph.constants) {
    if (t.bytes() < min_bytes || !t.location().host_accessible()) continue;
    std::shared_ptr<const MappedFile> file = graph.FileHolding(t);
    std::shared_ptr<const void> mine = graph.StorageOwner(t);
    if (!mine) continue;  // a view of memory whose lifetime no one here knows
    const Key key{t.dtype(), t.shape()};
    bool found = false;
    for (auto [it, end] = offered.equal_range(key); it != end && !found; ++it) {
      std::shared_ptr<const void> keeper = it->second.keeper.lock();
      if (!keeper || std::find(taken.begin(), taken.end(), it->second.data) != taken.end() ||
          (it->second.data != t.raw() && !SameBytes(it->second.data, t.raw(), t.bytes()))) {
        continue;
      }
      taken.push_back(it->second.data);
      if (it->second.data != t.raw()) {
        t = Tensor::View(t.dtype(), t.shape(), const_cast<void*>(it->second.data), it->second.location,
                         std::move(keeper));
        // The file it now views is checked (Model::CheckServable) and read (DiskTables) as its own.
        std::shared_ptr<const MappedFile> theirs = it->second.file.lock();
        if (theirs &&
            std::find(graph.mapped_files.begin(), graph.mapped_files.end(), theirs) == graph.mapped_files.end()) {
          graph.mapped_files.push_back(std::move(theirs));
        }
      }
      shared += t.bytes();
      found = true;
    }
    if (!found) offers.push_back({key, Offered{t.raw(), t.location(), mine, file}});
  }
  for (auto& [key, o] : offers) offered.emplace(key, std::move(o));
  return shared;
}

}  // namespace rankd

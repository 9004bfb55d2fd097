// CPU kernel of KeyedRows (model/ops/keyed_rows.h): each id a key of a keyed table, looked up in
// its index (model/key_index.h) to its row; the keys not found read the default row and are
// counted.
#include "model/ops/keyed_rows.h"

#include <atomic>

#include "backend/cpu/kernels.h"
#include "common/parallel.h"
#include "model/key_index.h"

namespace rankd::cpu {
namespace {

// Part `p`'s ids mapped into `rows`; returns the keys not found.
template <typename Id>
int64_t MapKeys(const Id* ids, int64_t n, const Tensor& index, const keyed_rows::Part& p, int64_t* rows) {
  const int64_t* slots = index.data<int64_t>();
  const uint64_t mask = static_cast<uint64_t>(index.dim(0)) - 1;
  std::atomic<int64_t> unknown{0};
  ParallelFor(n, 16, [&](int64_t first, int64_t last) {
    int64_t missed = 0;
    for (int64_t i = first; i < last; ++i) {
      const auto key = static_cast<int64_t>(ids[i]);
      if (p.bag && key < 0) {
        rows[i] = -1;
        continue;
      }
      int64_t row = RowOfKey(slots, mask, key);
      if (row < 0) {
        row = p.default_row;
        ++missed;
      }
      rows[i] = row;
    }
    unknown += missed;
  });
  return unknown.load();
}

Status KeyedRows(const KernelArgs& k) {
  const std::vector<keyed_rows::Part> parts = keyed_rows::Parts(k.node);
  for (size_t p = 0; p < parts.size(); ++p) {
    const Tensor& ids = k.In(static_cast<int>(2 * p));
    const Tensor& index = k.In(static_cast<int>(2 * p + 1));
    int64_t* rows = k.Out(static_cast<int>(p)).data<int64_t>();
    const int64_t unknown = ids.dtype() == DType::kI32
                                ? MapKeys(ids.data<int32_t>(), ids.size(), index, parts[p], rows)
                                : MapKeys(ids.data<int64_t>(), ids.size(), index, parts[p], rows);
    if (k.counters && unknown > 0) static_cast<std::atomic<int64_t>*>(k.counters)[parts[p].counter] += unknown;
  }
  return Status::Ok();
}

}  // namespace

void AppendKeyedRowsKernel(KernelTable& out) { out["KeyedRows"] = KeyedRows; }

}  // namespace rankd::cpu

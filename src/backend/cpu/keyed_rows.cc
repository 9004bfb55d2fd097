// CPU kernel of KeyedRows: each id a key of a keyed table, looked up in its index
// (model/key_index.h) to its row; the keys not found read the default row and are counted.
#include <atomic>

#include "backend/cpu/kernels.h"
#include "common/parallel.h"
#include "model/key_index.h"

namespace rankd::cpu {
namespace {

template <typename Id>
Status MapKeys(const KernelArgs& k, const Id* ids) {
  const Tensor& keys = k.In(1);
  const int64_t* slot_keys = keys.data<int64_t>();
  const int32_t* slot_rows = k.In(2).data<int32_t>();
  const uint64_t mask = static_cast<uint64_t>(keys.size()) - 1;
  const int64_t default_row = k.node.GetInt("default_row", 0);
  const bool bag = k.node.GetInt("bag", 0) != 0;
  int64_t* rows = k.Out(0).data<int64_t>();
  std::atomic<int64_t> unknown{0};
  ParallelFor(k.Out(0).size(), 16, [&](int64_t first, int64_t last) {
    int64_t missed = 0;
    for (int64_t i = first; i < last; ++i) {
      const auto key = static_cast<int64_t>(ids[i]);
      if (bag && key < 0) {
        rows[i] = -1;
        continue;
      }
      int64_t row = RowOfKey(slot_keys, slot_rows, mask, key);
      if (row < 0) {
        row = default_row;
        ++missed;
      }
      rows[i] = row;
    }
    unknown += missed;
  });
  if (k.counters && unknown.load() > 0) {
    static_cast<std::atomic<int64_t>*>(k.counters)[k.node.GetInt("counter", 0)] += unknown.load();
  }
  return Status::Ok();
}

Status KeyedRows(const KernelArgs& k) {
  if (k.In(0).dtype() == DType::kI32) return MapKeys(k, k.In(0).data<int32_t>());
  return MapKeys(k, k.In(0).data<int64_t>());
}

}  // namespace

void AppendKeyedRowsKernel(KernelTable& out) { out["KeyedRows"] = KeyedRows; }

}  // namespace rankd::cpu

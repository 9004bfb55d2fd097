// CUDA kernel of KeyedRows (cpu/keyed_rows.cc is the reference): a thread per id probes the
// table's index (model/key_index.h, the probe the host runs too); the keys not found read the
// default row and are counted into the model's counter, one atomic add per block.
#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "model/key_index.h"

namespace rankd::cuda {
namespace {

template <typename Id>
__global__ void KeyedRowsKernel(const Id* ids, int64_t n, const int64_t* slot_keys, const int32_t* slot_rows,
                                uint64_t mask, int64_t default_row, bool bag, int64_t* rows,
                                unsigned long long* unknown) {
  __shared__ unsigned long long block_missed;
  if (threadIdx.x == 0) block_missed = 0;
  __syncthreads();
  unsigned long long missed = 0;
  RANKD_GRID_LOOP(i, n) {
    const auto key = static_cast<int64_t>(ids[i]);
    int64_t row = -1;
    if (!bag || key >= 0) {
      row = RowOfKey(slot_keys, slot_rows, mask, key);
      if (row < 0) {
        row = default_row;
        ++missed;
      }
    }
    rows[i] = row;
  }
  if (missed > 0) atomicAdd(&block_missed, missed);
  __syncthreads();
  if (threadIdx.x == 0 && block_missed > 0 && unknown) atomicAdd(unknown, block_missed);
}

Status KeyedRows(const KernelArgs& k) {
  const Tensor& ids = k.In(0);
  const int64_t n = ids.size();
  if (n == 0) return Status::Ok();
  const Tensor& keys = k.In(1);
  const uint64_t mask = static_cast<uint64_t>(keys.size()) - 1;
  const int64_t default_row = k.node.GetInt("default_row", 0);
  const bool bag = k.node.GetInt("bag", 0) != 0;
  auto* unknown = k.counters ? static_cast<unsigned long long*>(k.counters) + k.node.GetInt("counter", 0) : nullptr;
  auto launch = [&](auto id_tag) {
    using Id = decltype(id_tag);
    KeyedRowsKernel<Id><<<Blocks(n), kThreads, 0, k.device->stream>>>(ids.data<Id>(), n, keys.data<int64_t>(),
                                                                      k.In(2).data<int32_t>(), mask, default_row, bag,
                                                                      k.Out(0).data<int64_t>(), unknown);
  };
  if (ids.dtype() == DType::kI32)
    launch(int32_t{});
  else
    launch(int64_t{});
  return Launched(k);
}

}  // namespace

void AppendKeyedRowsKernel(KernelTable& out) { out["KeyedRows"] = KeyedRows; }

}  // namespace rankd::cuda

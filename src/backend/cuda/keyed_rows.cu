// CUDA kernel of KeyedRows (model/ops/keyed_rows.h; cpu/keyed_rows.cc is the reference): every
// part's ids in one launch, a thread per id probing its table's index (model/key_index.h, the
// probe the host runs too); the keys not found read the default row and are counted into the
// model's counters, one atomic add per block and part.
#include <algorithm>

#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "model/key_index.h"
#include "model/ops/keyed_rows.h"

namespace rankd::cuda {
namespace {

constexpr int kMaxParts = 32;  // per launch: the kernel's parameters stay well under 4 KB

struct PartArgs {
  const void* ids = nullptr;
  const int64_t* slots = nullptr;
  int64_t* rows = nullptr;
  unsigned long long* unknown = nullptr;  // the part's counter, or null
  uint64_t mask = 0;
  int64_t default_row = 0;
  bool wide = true;  // INT64 ids, else INT32
  bool bag = false;
};

struct Launch {
  int parts = 0;
  int64_t starts[kMaxParts + 1] = {};  // part p's ids are [starts[p], starts[p + 1]) of the launch's
  PartArgs part[kMaxParts];
};

__global__ void KeyedRowsKernel(Launch launch) {
  __shared__ unsigned long long missed[kMaxParts];
  if (threadIdx.x < kMaxParts) missed[threadIdx.x] = 0;
  __syncthreads();
  int p = 0;
  RANKD_GRID_LOOP(i, launch.starts[launch.parts]) {
    while (i >= launch.starts[p + 1]) ++p;  // i only grows: the part only moves forward
    const PartArgs& a = launch.part[p];
    const int64_t j = i - launch.starts[p];
    const int64_t key = a.wide ? static_cast<const int64_t*>(a.ids)[j] : static_cast<const int32_t*>(a.ids)[j];
    int64_t row = -1;
    if (!a.bag || key >= 0) {
      row = RowOfKey(a.slots, a.mask, key);
      if (row < 0) {
        row = a.default_row;
        atomicAdd(&missed[p], 1ull);
      }
    }
    a.rows[j] = row;
  }
  __syncthreads();
  if (threadIdx.x < launch.parts && missed[threadIdx.x] > 0 && launch.part[threadIdx.x].unknown) {
    atomicAdd(launch.part[threadIdx.x].unknown, missed[threadIdx.x]);
  }
}

Status KeyedRows(const KernelArgs& k) {
  const std::vector<keyed_rows::Part> parts = keyed_rows::Parts(k.node);
  auto* counters = static_cast<unsigned long long*>(k.counters);
  for (size_t first = 0; first < parts.size(); first += kMaxParts) {
    Launch launch;
    for (size_t p = first; p < std::min(parts.size(), first + kMaxParts); ++p) {
      const Tensor& ids = k.In(static_cast<int>(2 * p));
      const Tensor& index = k.In(static_cast<int>(2 * p + 1));
      PartArgs& a = launch.part[launch.parts];
      a.ids = ids.raw();
      a.wide = ids.dtype() != DType::kI32;
      a.slots = index.data<int64_t>();
      a.mask = static_cast<uint64_t>(index.dim(0)) - 1;
      a.rows = k.Out(static_cast<int>(p)).data<int64_t>();
      a.default_row = parts[p].default_row;
      a.bag = parts[p].bag;
      a.unknown = counters ? counters + parts[p].counter : nullptr;
      launch.starts[launch.parts + 1] = launch.starts[launch.parts] + ids.size();
      ++launch.parts;
    }
    const int64_t total = launch.starts[launch.parts];
    if (total == 0) continue;
    KeyedRowsKernel<<<Blocks(total), kThreads, 0, k.device->stream>>>(launch);
    RANKD_RETURN_IF_ERROR(Launched(k));
  }
  return Status::Ok();
}

}  // namespace

void AppendKeyedRowsKernel(KernelTable& out) { out["KeyedRows"] = KeyedRows; }

}  // namespace rankd::cuda

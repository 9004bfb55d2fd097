// CUDA kernels of EmbeddingBag (padded or ragged ids, negative = empty slot, sum, mean, sqrtn or max,
// ragged ids perhaps weighted) and RaggedToPadded (cpu/embedding_bag.cc is the reference). Ids out
// of range are reported through the executor's error word and contribute nothing.
#include <map>
#include <type_traits>

#include "backend/cuda/device.h"
#include "backend/cuda/dtypes.cuh"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "model/ops/bag_combiner.h"

namespace rankd::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

// A warp per bag; lanes stride the embedding dimension; an empty bag gives `empty` (0 but for a
// masked max's fill). With weights (ragged bags only, n_weights of them) each row is multiplied by
// its id's weight and the mean and sqrtn divide by the weights (WeightedBagScale). A row the
// table's cache holds is read from its slot, past L1 (RowCacheView).
template <typename Row, typename Id>
__global__ void BagKernel(int64_t bags, int64_t rows, int64_t dim, const Row* table, RowCacheView cache, const Id* ids,
                          int64_t n_ids, const int64_t* offsets, int64_t width, const float* weights, int64_t n_weights,
                          int combiner, float empty, float* out, int* error, int step) {
  int64_t b = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (b >= bags) return;
  int64_t lo = offsets ? offsets[b] : b * width, hi = offsets ? offsets[b + 1] : (b + 1) * width;
  if (lo < 0 || hi < lo || hi > n_ids || (weights && hi > n_weights)) {
    if (lane == 0) ReportBadData(error, step);
    lo = hi = 0;
  }
  float* dst = out + b * dim;
  for (int64_t d0 = 0; d0 < dim; d0 += 4 * kWarp) {
    float acc[4] = {0, 0, 0, 0};
    int64_t count = 0;
    float weight_sum = 0.0f, weight_squares = 0.0f;
    for (int64_t j = lo; j < hi; ++j) {
      int64_t id = static_cast<int64_t>(ids[j]);
      if (id < 0) continue;
      if (id >= rows) {
        if (lane == 0 && d0 == 0) ReportBadData(error, step);
        continue;
      }
      ++count;
      const float w = weights ? weights[j] : 1.0f;
      weight_sum += w;
      weight_squares += w * w;
      const int32_t slot = cache.slot_of_row ? __ldcg(cache.slot_of_row + id) : -1;
      const Row* row = slot >= 0 ? static_cast<const Row*>(cache.slots) + slot * dim : table + id * dim;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        int64_t d = d0 + u * kWarp + lane;
        if (d >= dim) continue;
        const float v = w * ToFloat(slot >= 0 ? __ldcg(row + d) : row[d]);
        acc[u] = combiner != kBagMax ? acc[u] + v : count == 1 ? v : fmaxf(acc[u], v);
      }
    }
    const float scale = weights ? WeightedBagScale(combiner, weight_sum, weight_squares) : BagScale(combiner, count);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int64_t d = d0 + u * kWarp + lane;
      if (d < dim) dst[d] = count == 0 ? empty : acc[u] * scale;
    }
  }
}

Status EmbeddingBag(const KernelArgs& k) {
  const Tensor& table = k.In(0);
  const Tensor& ids = k.In(1);
  Tensor& out = k.Out(0);
  int64_t rows = table.dim(0), dim = table.dim(1), bags = out.dim(0);
  const int combiner = BagCombinerFromName(k.node.GetString("mode", "sum")).value_or(kBagSum);
  const float empty = k.node.GetFloat("empty", 0.0f);
  bool ragged = k.in.size() >= 3;
  const int64_t* offsets = ragged ? k.In(2).data<int64_t>() : nullptr;
  const bool weighted = k.in.size() == 4;
  const float* weights = weighted ? k.In(3).data<float>() : nullptr;
  const int64_t n_weights = weighted ? k.In(3).size() : 0;
  int64_t width = ragged ? 0 : ids.dim(1);
  if (bags == 0 || dim == 0) return Status::Ok();
  unsigned blocks = static_cast<unsigned>((bags + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const int cached = k.device->row_caches ? k.device->row_caches->Find(table.raw()) : -1;
  const RowCacheView cache = cached >= 0 ? k.device->row_caches->views[static_cast<size_t>(cached)] : RowCacheView{};
  auto launch = [&](auto row_tag, auto id_tag) {
    using Row = decltype(row_tag);
    using Id = decltype(id_tag);
    BagKernel<<<blocks, kWarp * kWarpsPerBlock, 0, k.device->stream>>>(
        bags, rows, dim, table.data<Row>(), cache, ids.data<Id>(), ids.size(), offsets, width, weights, n_weights,
        combiner, empty, out.data<float>(), k.device->error, k.step);
  };
  auto with_ids = [&](auto row_tag) {
    if (ids.dtype() == DType::kI32)
      launch(row_tag, int32_t{});
    else
      launch(row_tag, int64_t{});
  };
  switch (table.dtype()) {
    case DType::kF32:
      with_ids(float{});
      break;
    case DType::kF16:
      with_ids(__half{});
      break;
    case DType::kBF16:
      with_ids(__nv_bfloat16{});
      break;
    default:
      return Internal(k.node.Describe() + ": no cuda EmbeddingBag for " + DTypeName(table.dtype()) + " tables");
  }
  return Launched(k);
}

template <typename T>
__global__ void RaggedToPaddedKernel(int64_t bags, int64_t width, const T* values, int64_t n_values,
                                     const int64_t* offsets, T* out, int* error, int step) {
  RANKD_GRID_LOOP(i, bags * width) {
    int64_t b = i / width, j = i % width;
    int64_t lo = offsets[b], len = offsets[b + 1] - lo;
    if (len < 0 || len > width || offsets[b + 1] > n_values) {
      if (j == 0) ReportBadData(error, step);
      out[i] = T(-1);
      continue;
    }
    out[i] = j < len ? values[lo + j] : T(-1);
  }
}

Status RaggedToPadded(const KernelArgs& k) {
  const Tensor &values = k.In(0), &offsets = k.In(1);
  Tensor& out = k.Out(0);
  int64_t bags = out.dim(0), width = out.dim(1);
  if (out.size() == 0) return Status::Ok();
  if (values.dtype() == DType::kI64) {
    RaggedToPaddedKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(
        bags, width, values.data<int64_t>(), values.size(), offsets.data<int64_t>(), out.data<int64_t>(),
        k.device->error, k.step);
  } else {
    RaggedToPaddedKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(
        bags, width, values.data<int32_t>(), values.size(), offsets.data<int64_t>(), out.data<int32_t>(),
        k.device->error, k.step);
  }
  return Launched(k);
}

}  // namespace

void AppendEmbeddingKernels(KernelTable& out) {
  out["EmbeddingBag"] = EmbeddingBag;
  out["RaggedToPadded"] = RaggedToPadded;
}

}  // namespace rankd::cuda

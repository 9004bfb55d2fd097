// Device-side helpers for kernels over shapes of rank <= kMaxRank: broadcast index maps, strided
// offsets, grid-stride loops and the bad-data report.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd::cuda {

constexpr int kMaxRank = 8;

// Output element i -> offset of the element it reads in each of N operands.
template <int N>
struct IndexMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  bool contiguous[N] = {};  // operand n has the output's shape: offset == i

  __device__ void Offsets(int64_t i, int64_t (&off)[N]) const {
    for (int n = 0; n < N; ++n) off[n] = contiguous[n] ? i : 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = i % dims[d];
      i /= dims[d];
      for (int n = 0; n < N; ++n) {
        if (!contiguous[n]) off[n] += c * strides[n][d];
      }
    }
  }
};

// Numpy-style broadcast of each operand shape to `out`. Fails past kMaxRank.
template <int N>
StatusOr<IndexMap<N>> BroadcastMap(const Shape& out, const Shape* const (&operands)[N]) {
  IndexMap<N> m;
  if (out.size() > static_cast<size_t>(kMaxRank)) return Unimplemented("cuda kernels take rank <= 8");
  m.rank = static_cast<int>(out.size());
  for (int d = 0; d < m.rank; ++d) m.dims[d] = out[static_cast<size_t>(d)];
  for (int n = 0; n < N; ++n) {
    const Shape& s = *operands[n];
    m.contiguous[n] = s == out;
    Shape st = BroadcastStrides(s, out);
    for (size_t d = 0; d < out.size(); ++d) m.strides[n][d] = st[d];
  }
  return m;
}

// An index map with explicit strides for one operand (transpose, slice, expand).
inline StatusOr<IndexMap<1>> StridedMap(const Shape& out, const Shape& strides) {
  IndexMap<1> m;
  if (out.size() > static_cast<size_t>(kMaxRank)) return Unimplemented("cuda kernels take rank <= 8");
  m.rank = static_cast<int>(out.size());
  for (int d = 0; d < m.rank; ++d) {
    m.dims[d] = out[static_cast<size_t>(d)];
    m.strides[0][d] = strides[static_cast<size_t>(d)];
  }
  return m;
}

// Records the first failing step (1 + step) in the executor's error word.
__device__ inline void ReportBadData(int* error, int step) { atomicCAS(error, 0, step + 1); }

#define RANKD_GRID_LOOP(i, n)                                                            \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace rankd::cuda

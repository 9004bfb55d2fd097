// The short-k product kernel (short_k_gemm.h): a thread per output, over a grid that strides
// across them; a warp's threads share A's row (one load, broadcast) and read consecutive
// columns of a [k, n] weight. Each operand is rounded to bf16 (round to nearest even) as read.
// (Threads that each took four rows of a column, its weights in registers, were slower on an
// H200: 6.8 against 3.5 µs at 64 rows of W1's first layer, 7.5 against 5.7 at 512.)
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/short_k_gemm.h"

namespace rankd::cuda {
namespace {

constexpr int kShortKThreads = 256;

__device__ inline float Value(const float* p, int64_t i) { return __bfloat162float(__float2bfloat16_rn(p[i])); }
__device__ inline float Value(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

template <typename T>
__global__ void __launch_bounds__(kShortKThreads) ShortKKernel(const ShortKProduct p) {
  const T* a = static_cast<const T*>(p.a);
  const int64_t total = p.m * p.n;
  for (int64_t at = static_cast<int64_t>(blockIdx.x) * kShortKThreads + threadIdx.x; at < total;
       at += static_cast<int64_t>(gridDim.x) * kShortKThreads) {
    const int64_t r = at / p.n, j = at % p.n;
    // Every operand loaded before the first product (k < kShortK, unrolled): one load's latency a
    // thread, not k in a row. The products are summed in order, as before.
    float x[kShortK - 1], w[kShortK - 1];
#pragma unroll
    for (int i = 0; i < kShortK - 1; ++i) {
      x[i] = i < p.k ? Value(a, r * p.k + i) : 0.0f;
      w[i] = i < p.k ? Value(p.w, p.w_nk ? j * p.k + i : i * p.n + j) : 0.0f;
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kShortK - 1; ++i) {
      if (i < p.k) sum = fmaf(x[i], w[i], sum);
    }
    const float addend = (p.beta != 0.0f ? p.beta * p.c[at] : 0.0f) + (p.bias ? p.bias[j] : 0.0f);
    const float y = Activate(p.activation, p.alpha * sum + addend);
    if (p.d) {
      static_cast<__nv_bfloat16*>(p.d)[at] = __float2bfloat16_rn(y);
    } else {
      p.c[at] = y;
    }
  }
}

}  // namespace

Status ShortKGemm(cudaStream_t stream, const ShortKProduct& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.k >= kShortK || (!p.c && !p.d) || (p.beta != 0.0f && !p.c)) {
    return Internal("a product the short-k kernel does not take");
  }
  const int64_t blocks = std::min<int64_t>((p.m * p.n + kShortKThreads - 1) / kShortKThreads, int64_t{1} << 16);
  if (p.a_bf16) {
    ShortKKernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), kShortKThreads, 0, stream>>>(p);
  } else {
    ShortKKernel<float><<<static_cast<unsigned>(blocks), kShortKThreads, 0, stream>>>(p);
  }
  return Check(cudaGetLastError(), "ShortKGemm");
}

}  // namespace rankd::cuda

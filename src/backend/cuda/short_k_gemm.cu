// The short-k product kernel (short_k_gemm.h): a thread per kCols consecutive outputs of a row,
// over a grid that strides across them; a warp's threads share A's row (loads broadcast) and read
// consecutive columns of a [k, n] weight, 16 bytes at a time where kCols is 4. Each operand is
// rounded to bf16 (round to nearest even) as read, and every output sums its k products in order,
// as with one output a thread. (Threads that each took four rows of a column, its weights in
// registers, were slower on an H200: 6.8 against 3.5 µs at 64 rows of W1's first layer, 7.5
// against 5.7 at 512.)
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/short_k_gemm.h"

namespace rankd::cuda {
namespace {

constexpr int kShortKThreads = 256;

__device__ inline float Rounded(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ inline float Value(const float* p, int64_t i) { return Rounded(p[i]); }
__device__ inline float Value(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

// W(i, j0 + c) for c < kCols, rounded.
template <int kCols>
__device__ void LoadWeights(const ShortKProduct& p, int64_t i, int64_t j0, float (&w)[kCols]) {
  if (kCols == 4 && !p.w_nk) {
    const float4 v = *reinterpret_cast<const float4*>(p.w + i * p.n + j0);
    w[0] = Rounded(v.x), w[1] = Rounded(v.y), w[2] = Rounded(v.z), w[3] = Rounded(v.w);
  } else {
#pragma unroll
    for (int c = 0; c < kCols; ++c) w[c] = Value(p.w, p.w_nk ? (j0 + c) * p.k + i : i * p.n + j0 + c);
  }
}

// kCols is 4 only where n is a multiple of 4 and the weight (when [k, n]) and the output are
// 16- (fp32) or 8-byte (bf16) aligned.
template <typename T, int kCols>
__global__ void __launch_bounds__(kShortKThreads) ShortKKernel(const ShortKProduct p) {
  const T* a = static_cast<const T*>(p.a);
  const int64_t per_row = p.n / kCols, total = p.m * per_row;
  for (int64_t at = static_cast<int64_t>(blockIdx.x) * kShortKThreads + threadIdx.x; at < total;
       at += static_cast<int64_t>(gridDim.x) * kShortKThreads) {
    const int64_t r = at / per_row, j0 = (at % per_row) * kCols, out = r * p.n + j0;
    float sum[kCols] = {};
    for (int64_t i = 0; i < p.k; ++i) {
      const float x = Value(a, r * p.k + i);
      float w[kCols];
      LoadWeights<kCols>(p, i, j0, w);
#pragma unroll
      for (int c = 0; c < kCols; ++c) sum[c] = fmaf(x, w[c], sum[c]);
    }
    float y[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const float addend = (p.beta != 0.0f ? p.beta * p.c[out + c] : 0.0f) + (p.bias ? p.bias[j0 + c] : 0.0f);
      y[c] = Activate(p.activation, p.alpha * sum[c] + addend);
    }
    if constexpr (kCols == 4) {
      if (p.d) {
        const __nv_bfloat162 lo = __float22bfloat162_rn(make_float2(y[0], y[1]));
        const __nv_bfloat162 hi = __float22bfloat162_rn(make_float2(y[2], y[3]));
        *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.d) + out) =
            make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      } else {
        *reinterpret_cast<float4*>(p.c + out) = make_float4(y[0], y[1], y[2], y[3]);
      }
    } else {
      if (p.d) {
        static_cast<__nv_bfloat16*>(p.d)[out] = __float2bfloat16_rn(y[0]);
      } else {
        p.c[out] = y[0];
      }
    }
  }
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int kCols>
void Launch(cudaStream_t stream, const ShortKProduct& p) {
  const int64_t threads = p.m * (p.n / kCols);
  const int64_t blocks = std::min<int64_t>((threads + kShortKThreads - 1) / kShortKThreads, int64_t{1} << 16);
  if (p.a_bf16) {
    ShortKKernel<__nv_bfloat16, kCols><<<static_cast<unsigned>(blocks), kShortKThreads, 0, stream>>>(p);
  } else {
    ShortKKernel<float, kCols><<<static_cast<unsigned>(blocks), kShortKThreads, 0, stream>>>(p);
  }
}

}  // namespace

Status ShortKGemm(cudaStream_t stream, const ShortKProduct& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.k >= kShortK || (!p.c && !p.d) || (p.beta != 0.0f && !p.c)) {
    return Internal("a product the short-k kernel does not take");
  }
  const bool quads = p.n % 4 == 0 && (p.w_nk || Aligned(p.w, 16)) && (p.d ? Aligned(p.d, 8) : Aligned(p.c, 16));
  if (quads) {
    Launch<4>(stream, p);
  } else {
    Launch<1>(stream, p);
  }
  return Check(cudaGetLastError(), "ShortKGemm");
}

}  // namespace rankd::cuda

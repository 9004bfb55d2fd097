// The few-rows product kernel (small_rows_gemm.h): groups of kColumns output columns, each taken
// by one to eight warps that split k, their lanes striding along it in 16-byte pieces of the
// weight's rows, every row of A against each piece; a butterfly over the lanes, then the warps'
// sums in shared memory. The weight is read once, with no reduction kernel after.
#include <cuda_bf16.h>

#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/small_rows_gemm.h"

namespace rankd::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarps = 8;    // per block, splitting k
constexpr int kColumns = 2;  // output columns per warp group (2: 56 µs of W1's products at one pair, 4: 63, 8: 76)
constexpr int kPiece = 8;    // k values in one 16-byte load of bf16
constexpr unsigned kAllLanes = 0xffffffffu;

__device__ inline void Bf16x8(const uint4& raw, float (&v)[kPiece]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x, v[2 * i + 1] = f.y;
  }
}

// Eight consecutive values of an operand as its bf16 copy holds them.
template <typename T>
struct Piece;
template <>
struct Piece<float> {
  __device__ static void Load(const float* p, float (&v)[kPiece]) {
    const float4 x = *reinterpret_cast<const float4*>(p), y = *reinterpret_cast<const float4*>(p + 4);
    const float f[kPiece] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
    for (int i = 0; i < kPiece; ++i) v[i] = __bfloat162float(__float2bfloat16_rn(f[i]));
  }
};
template <>
struct Piece<__nv_bfloat16> {
  __device__ static void Load(const __nv_bfloat16* p, float (&v)[kPiece]) {
    Bf16x8(*reinterpret_cast<const uint4*>(p), v);
  }
};

// Warps that split a column group's k: as many as leave each lane a piece or more to load.
int SplitFor(int64_t k) {
  int split = 1;
  while (split < kWarps && split * 2 * kWarp <= k / kPiece) split *= 2;
  return split;
}

// R: rows rounded up to a power of two (the accumulators a lane holds per column). A block's
// warps take kWarps / split groups of kColumns columns, `split` warps to a group, which split k
// evenly (each lane loading its pieces of the columns' rows at once) and meet through shared
// memory in warp order.
template <int R, typename T, typename TW>
__global__ void __launch_bounds__(kWarp* kWarps) SmallRowsKernel(const SmallRowsProduct p, int split) {
  __shared__ float partial[kWarps][kColumns][R];
  WaitForPrevious();  // A's producer (dependent_launch.cuh)
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int part = warp % split;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * (kWarps / split) + warp / split) * kColumns;
  const T* a = static_cast<const T*>(p.a);
  const TW* w = static_cast<const TW*>(p.w);
  float acc[kColumns][R] = {};
  const int64_t pieces = p.k / kPiece;
  const int64_t end = first < p.n ? pieces * (part + 1) / split : 0;
#pragma unroll 2
  for (int64_t piece = pieces * part / split + lane; piece < end; piece += kWarp) {
    const int64_t at = piece * kPiece;
    float wv[kColumns][kPiece];
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
      if (first + c < p.n) {
        Piece<TW>::Load(w + (first + c) * p.k + at, wv[c]);
      } else {
#pragma unroll
        for (int e = 0; e < kPiece; ++e) wv[c][e] = 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= p.m) break;
      float x[kPiece];
      Piece<T>::Load(a + r * p.k + at, x);
#pragma unroll
      for (int c = 0; c < kColumns; ++c) {
#pragma unroll
        for (int e = 0; e < kPiece; ++e) acc[c][r] = fmaf(x[e], wv[c][e], acc[c][r]);
      }
    }
  }
#pragma unroll
  for (int distance = kWarp / 2; distance > 0; distance /= 2) {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
#pragma unroll
      for (int r = 0; r < R; ++r) acc[c][r] += __shfl_xor_sync(kAllLanes, acc[c][r], distance);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
#pragma unroll
      for (int r = 0; r < R; ++r) partial[warp][c][r] = acc[c][r];
    }
  }
  __syncthreads();
  // Thread (g · R + r) · kColumns + c writes row r of group g's column c.
  const int t = static_cast<int>(threadIdx.x), column = t % kColumns, row = t / kColumns % R,
            group = t / (kColumns * R);
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * (kWarps / split) + group) * kColumns + column;
  if (group >= kWarps / split || row >= p.m || j >= p.n) return;
  float sum = 0.0f;
  for (int from = group * split; from < (group + 1) * split; ++from) sum += partial[from][column][row];
  const int64_t at = row * (p.row_stride ? p.row_stride : p.n) + j * p.column_stride;
  const float addend = (p.beta != 0.0f ? p.beta * p.c[at] : 0.0f) + (p.bias ? p.bias[p.bias_by_row ? row : j] : 0.0f);
  const float y = Activate(p.activation, p.alpha * sum + addend);
  if (p.d) {
    static_cast<__nv_bfloat16*>(p.d)[at] = __float2bfloat16_rn(y);
  } else {
    p.c[at] = y;
  }
}

template <int R, typename T>
void LaunchFor(cudaStream_t stream, const SmallRowsProduct& p, unsigned blocks, int split) {
  LaunchDependent(p.w_f32 ? SmallRowsKernel<R, T, float> : SmallRowsKernel<R, T, __nv_bfloat16>, dim3(blocks),
                  dim3(kWarp * kWarps), 0, stream, nullptr, p, split);
}

template <int R>
void Launch(cudaStream_t stream, const SmallRowsProduct& p) {
  const int split = SplitFor(p.k);
  const int64_t columns_per_block = static_cast<int64_t>(kWarps / split) * kColumns;
  const unsigned blocks = static_cast<unsigned>((p.n + columns_per_block - 1) / columns_per_block);
  if (p.a_bf16) {
    LaunchFor<R, __nv_bfloat16>(stream, p, blocks, split);
  } else {
    LaunchFor<R, float>(stream, p, blocks, split);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool SmallRowsFit(const SmallRowsProduct& p) {
  return p.m >= 1 && p.m <= kSmallRows && p.n >= 1 && p.k >= kPiece && p.k % kPiece == 0 && Aligned16(p.a) &&
         Aligned16(p.w) && (p.c || p.d) && (p.beta == 0.0f || p.c);
}

Status SmallRowsGemm(cudaStream_t stream, const SmallRowsProduct& p) {
  if (!SmallRowsFit(p)) return Internal("a product the few-rows kernel does not take");
  if (p.m == 1) {
    Launch<1>(stream, p);
  } else if (p.m == 2) {
    Launch<2>(stream, p);
  } else if (p.m <= 4) {
    Launch<4>(stream, p);
  } else {
    Launch<8>(stream, p);
  }
  return Check(cudaGetLastError(), "SmallRowsGemm");
}

}  // namespace rankd::cuda

// The bf16 attention kernel's block (attention_mma.cu): its constants, its shared memory's layout,
// the loads that fill it, its parameters and the MLP shapes its products are built for. Device-code
// header, included by attention_mma.cu alone.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/attention.cuh"

namespace rankd::cuda::attention {

// store(r, c, load(r, c)) for r < rows and c < cols over the block's threads, kStage loads in
// flight per thread before any store: these loops read global memory (L2 mostly), and one load at
// a time would leave a block waiting on latency, not bandwidth. Each thread steps its (r, c)
// without dividing.
constexpr int kStage = 8;
template <typename Load, typename Store>
__device__ void Staged(int rows, int cols, Load load, Store store) {
  using Value = decltype(load(0, 0));
  const int step_r = blockDim.x / cols, step_c = blockDim.x % cols;
  int r = threadIdx.x / cols, c = threadIdx.x % cols;
  while (r < rows) {
    Value v[kStage];
    int at_r[kStage], at_c[kStage];
#pragma unroll
    for (int b = 0; b < kStage; ++b) {
      at_r[b] = r;
      at_c[b] = c;
      v[b] = r < rows ? load(r, c) : Value{};
      c += step_c;
      r += step_r;
      if (c >= cols) c -= cols, ++r;
    }
#pragma unroll
    for (int b = 0; b < kStage; ++b) {
      if (at_r[b] < rows) store(at_r[b], at_c[b], v[b]);
    }
  }
}

// With mma.sync's fragments (mma.cuh), a layer's accumulators for columns 16k..16k+15 (its n-tiles
// 2k and 2k+1) are, paired and rounded, the next layer's A fragment for k-tile k: a warp takes a
// strip of 16 positions through every layer with its activations in registers. Weights sit in
// shared memory transposed ([out][in], B's column pairs adjacent), rows padded by 8 bf16 so a
// fragment load meets no bank twice.
constexpr int kMma = 16;
constexpr int kStrip = 16;  // positions per warp product
constexpr int kStripsPerTile = static_cast<int>(kTileRows) / kStrip;
constexpr int kMaxStripsPerItem = 2;  // strips a warp scores at once (ScoreStrips' S)
constexpr int kMmaWarps = 4;
constexpr int kChunk = 8;      // candidates scored at a time (their queries and partial sums in shared memory)
constexpr int kMaxGroup = 32;  // candidates per block, in chunks: the weights and each user's tile loaded once
constexpr int kMaxNTiles = static_cast<int>(kMaxWidth) / 8;
constexpr int kMaxKTiles = static_cast<int>(kMaxWidth) / kMma;

__host__ __device__ constexpr int Pad16(int x) { return (x + kMma - 1) / kMma * kMma; }
__host__ __device__ constexpr int Align16(int bytes) { return (bytes + 15) / 16 * 16; }

// The bf16 kernel's shared memory: byte offsets (each on 16 bytes) and row strides in elements.
// A block holds one user's tile (keys and key projections in fp32, the mask), the query and query
// projection of each candidate of its group, every weight, and each (candidate, strip)'s pooled
// partial sum.
struct MmaLayout {
  int dim_p = 0, width_p = 0;
  int ldk = 0, ldp = 0, ldq = 0, ld0 = 0;
  int keys = 0, proj = 0, mask = 0, queries = 0, scores = 0, partial = 0, cross = 0, last = 0, total = 0;
  int hidden[kMaxLayers] = {}, hidden_ld[kMaxLayers] = {}, bias[kMaxLayers] = {}, out_p[kMaxLayers] = {};
};

inline MmaLayout PlanMma(int dim, int width, const Layer* layers, int layer_count) {
  MmaLayout m;
  m.dim_p = Pad16(dim);
  m.width_p = Pad16(width);
  m.ldk = m.dim_p + 8;
  m.ldp = m.width_p + 8;
  m.ldq = m.dim_p + m.width_p;
  m.ld0 = m.dim_p + 8;
  int at = 0;
  auto take = [&](int bytes) {
    int offset = at;
    at += Align16(bytes);
    return offset;
  };
  m.keys = take(4 * static_cast<int>(kTileRows) * m.ldk);
  m.proj = take(4 * static_cast<int>(kTileRows) * m.ldp);
  m.mask = take(4 * static_cast<int>(kTileRows));
  m.queries = take(4 * kChunk * m.ldq);
  m.scores = take(4 * kMmaWarps * kStrip * kMaxStripsPerItem);
  m.partial = take(4 * kChunk * kStripsPerTile * dim);
  m.cross = take(2 * m.width_p * m.ld0);
  int in_p = m.width_p;
  for (int l = 0; l + 1 < layer_count; ++l) {
    m.out_p[l] = Pad16(layers[l].out);
    m.hidden_ld[l] = in_p + 8;
    m.hidden[l] = take(2 * m.out_p[l] * m.hidden_ld[l]);
    m.bias[l] = take(4 * m.out_p[l]);
    in_p = m.out_p[l];
  }
  m.last = take(4 * in_p);
  m.total = at;
  return m;
}

// Element (r, c) of the row-major [rows, cols] matrix at src, and the 4 from (r, 4 q) on (cols a
// multiple of 4, src on 16 bytes); zeros past its end, where the padded copies read.
__device__ inline float At(const float* src, int rows, int cols, int r, int c) {
  return r < rows && c < cols ? src[r * cols + c] : 0.0f;
}
__device__ inline float4 QuadAt(const float* src, int rows, int cols, int r, int q) {
  return r < rows && 4 * q < cols ? *reinterpret_cast<const float4*>(src + r * cols + 4 * q) : float4{};
}

// dst[r * ld + c] = r < rows && c < cols ? src[r * cols + c] : 0 for r < rows_p and c < cols_p;
// with vec, cols and cols_p are multiples of 4 and src and dst on 16 bytes.
__device__ inline void LoadRows(float* dst, int ld, const float* src, int rows, int cols, int rows_p, int cols_p,
                                bool vec) {
  if (vec) {
    Staged(
        rows_p, cols_p / 4, [&](int r, int q) { return QuadAt(src, rows, cols, r, q); },
        [&](int r, int q, float4 v) { *reinterpret_cast<float4*>(dst + r * ld + 4 * q) = v; });
  } else {
    Staged(
        rows_p, cols_p, [&](int r, int c) { return At(src, rows, cols, r, c); },
        [&](int r, int c, float v) { dst[r * ld + c] = v; });
  }
}

// dst[c * ld + k] = bf16(src[k * out + c]) for k < in_p and c < out_p, zeros past in and out.
__device__ inline void LoadWeightT(__nv_bfloat16* dst, int ld, const float* src, int in, int out, int in_p, int out_p,
                                   bool vec) {
  if (vec) {
    Staged(
        in_p, out_p / 4, [&](int k, int q) { return QuadAt(src, in, out, k, q); },
        [&](int k, int q, float4 v) {
          __nv_bfloat16* at = dst + 4 * q * ld + k;
          at[0] = __float2bfloat16_rn(v.x);
          at[ld] = __float2bfloat16_rn(v.y);
          at[2 * ld] = __float2bfloat16_rn(v.z);
          at[3 * ld] = __float2bfloat16_rn(v.w);
        });
  } else {
    Staged(
        in_p, out_p, [&](int k, int c) { return At(src, in, out, k, c); },
        [&](int k, int c, float v) { dst[c * ld + k] = __float2bfloat16_rn(v); });
  }
}

// The same weight as wgmma's K-major core matrices (hopper.cuh, CoreDescriptor): element (c, k)
// at byte ((c / 8) * (in_p / 8) + k / 8) * 128 + (c % 8) * 16 + (k % 8) * 2.
__device__ inline void LoadWeightCore(__nv_bfloat16* dst, const float* src, int in, int out, int in_p, int out_p) {
  Staged(
      in_p, out_p, [&](int k, int c) { return At(src, in, out, k, c); },
      [&](int k, int c, float v) {
        dst[((c / 8) * (in_p / 8) + k / 8) * 64 + (c % 8) * 8 + k % 8] = __float2bfloat16_rn(v);
      });
}

struct MmaParams {
  Params p;
  MmaLayout m;
  int64_t candidates;
  int group;               // consecutive candidates per block
  bool vec;                // dims and widths multiples of 4, every array on 16 bytes: float4 loads
  const float* last_bias;  // the last layer's, or null
};

// The tile counts of a strip's products, compile-time for the shapes MmaTileKernel is built for
// (DIN's attention MLP, whatever its embedding width) and read from the layout otherwise. With
// runtime counts every product is unrolled to the widest allowed, guarded, and the guards and
// indexed parameters cost several times the arithmetic.
template <int KT0, int NT0, int NT1>
struct StripShape {
  static constexpr bool kFixed = KT0 > 0;  // then exactly one hidden layer
  __device__ static int DimTiles(const MmaLayout& m) { return kFixed ? KT0 : m.dim_p / kMma; }
  __device__ static int WidthTiles(const MmaLayout& m) { return kFixed ? NT0 : m.width_p / 8; }
  __device__ static int Hidden(const Params& p) { return kFixed ? 1 : p.layer_count - 1; }
  __device__ static int OutTiles(const MmaLayout& m, int l) { return kFixed ? NT1 : m.out_p[l] / 8; }
};
using AnyShape = StripShape<0, 0, 0>;
// A fixed shape's tile counts as constants (the wgmma products').
template <typename Shape>
struct Tiles;
template <int KT0, int NT0, int NT1>
struct Tiles<StripShape<KT0, NT0, NT1>> {
  static constexpr int kDim = KT0, kWidth = NT0, kOut = NT1;
};

}  // namespace rankd::cuda::attention

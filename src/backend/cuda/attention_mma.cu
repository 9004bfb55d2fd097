// The bf16 tile kernel of TargetAttention on the tensor cores (attention.cuh; attention.cu has
// the fp32 kernel and the host side, cpu/attention.cc the reference).
#include <cuda_bf16.h>

#include <algorithm>
#include <iterator>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/settings.h"

namespace rankd::cuda::attention {
namespace {

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

MmaLayout PlanMma(int dim, int width, const Layer* layers, int layer_count) {
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
__device__ void LoadRows(float* dst, int ld, const float* src, int rows, int cols, int rows_p, int cols_p, bool vec) {
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
__device__ void LoadWeightT(__nv_bfloat16* dst, int ld, const float* src, int in, int out, int in_p, int out_p,
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
__device__ void LoadWeightCore(__nv_bfloat16* dst, const float* src, int in, int out, int in_p, int out_p) {
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

// The end of a warp's S strips, from each lane's partial scores of its rows g and g + 8 of every
// strip (the last layer's dot product over its columns): the scores, masked, into `scores`, and
// their weighted sum of the keys into `pooled`.
template <int S>
__device__ void FinishStrips(const MmaParams& mp, const char* shared, float (&top)[S], float (&bottom)[S], int r0,
                             int rows, float* scores, float* pooled) {
  const Params& p = mp.p;
  const MmaLayout& m = mp.m;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const float* keys = reinterpret_cast<const float*>(shared + m.keys);
#pragma unroll
  for (int s = 0; s < S; ++s) {
    for (int o = 1; o < 4; o *= 2) {
      top[s] += __shfl_xor_sync(0xffffffffu, top[s], o);
      bottom[s] += __shfl_xor_sync(0xffffffffu, bottom[s], o);
    }
  }
  const float* mask = reinterpret_cast<const float*>(shared + m.mask);
  if (t == 0) {
    const float b = mp.last_bias ? *mp.last_bias : 0.0f;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int r = r0 + kStrip * s + g;
      scores[kStrip * s + g] = r < rows ? (top[s] + b) * mask[r] : 0.0f;
      scores[kStrip * s + g + 8] = r + 8 < rows ? (bottom[s] + b) * mask[r + 8] : 0.0f;
    }
  }
  __syncwarp();
  for (int d = lane; d < p.dim; d += kWarp) {
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kStrip * S; ++r) sum += scores[r] * keys[(r0 + r) * m.ldk + d];
    pooled[d] = sum;
  }
  __syncwarp();  // the scores are read before the warp's next strips write them
}

// Scores S strips of 16 positions (rows r0.. of the tile in shared memory, 16 S of them) for a
// candidate with query and query projection q, and writes their mask-weighted sum of the keys to
// `pooled`. Each weight fragment is read from shared memory once for the S strips: the products
// of one strip read all the MLP's weights (about 17 KB) for 16 positions, which left the kernel
// bound by shared memory's bandwidth rather than by the tensor cores.
template <typename Shape, int S>
__device__ void ScoreStrips(const MmaParams& mp, const char* shared, const float* q, int r0, int rows, float* scores,
                            float* pooled) {
  const Params& p = mp.p;
  const MmaLayout& m = mp.m;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const float* keys = reinterpret_cast<const float*>(shared + m.keys);
  const float* proj = reinterpret_cast<const float*>(shared + m.proj);
  const float* qp = q + m.dim_p;
  // The first layer: key_proj + query_proj + (query * keys) cross.
  float acc[S][kMaxNTiles][4];
  int n_tiles = Shape::WidthTiles(m);
  const int k_tiles0 = Shape::DimTiles(m);
#pragma unroll
  for (int j = 0; j < kMaxNTiles; ++j) {
    if (j < n_tiles) {
      const int c = 8 * j + 2 * t;
      const float2 add = *reinterpret_cast<const float2*>(qp + c);
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int r = r0 + kStrip * s + g;
        const float2 top = *reinterpret_cast<const float2*>(proj + r * m.ldp + c);
        const float2 bottom = *reinterpret_cast<const float2*>(proj + (r + 8) * m.ldp + c);
        acc[s][j][0] = top.x + add.x;
        acc[s][j][1] = top.y + add.y;
        acc[s][j][2] = bottom.x + add.x;
        acc[s][j][3] = bottom.y + add.y;
      }
    }
  }
  const auto* cross = reinterpret_cast<const __nv_bfloat16*>(shared + m.cross);
#pragma unroll
  for (int kk = 0; kk < kMaxKTiles; ++kk) {
    if (kk < k_tiles0) {
      const int c = kMma * kk + 2 * t;
      const float2 q0 = *reinterpret_cast<const float2*>(q + c), q8 = *reinterpret_cast<const float2*>(q + c + 8);
      uint32_t a[S][4];
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int r = r0 + kStrip * s + g;
        const float2* top = reinterpret_cast<const float2*>(keys + r * m.ldk + c);
        const float2* bottom = reinterpret_cast<const float2*>(keys + (r + 8) * m.ldk + c);
        const float2 t0 = top[0], t8 = top[4], b0 = bottom[0], b8 = bottom[4];
        a[s][0] = Pack(t0.x * q0.x, t0.y * q0.y);
        a[s][1] = Pack(b0.x * q0.x, b0.y * q0.y);
        a[s][2] = Pack(t8.x * q8.x, t8.y * q8.y);
        a[s][3] = Pack(b8.x * q8.x, b8.y * q8.y);
      }
#pragma unroll
      for (int j = 0; j < kMaxNTiles; ++j) {
        if (j < n_tiles) {
          const __nv_bfloat16* b = cross + (8 * j + g) * m.ld0 + c;
          const uint32_t b0 = Load32(b), b1 = Load32(b + 8);
#pragma unroll
          for (int s = 0; s < S; ++s) Mma(acc[s][j], a[s], b0, b1);
        }
      }
    }
  }
  // The hidden layers, each from the previous one's accumulators.
  const int hidden = Shape::Hidden(p);
  for (int l = 0; l < hidden; ++l) {
    uint32_t a[S][kMaxKTiles][4];
#pragma unroll
    for (int s = 0; s < S; ++s) {
#pragma unroll
      for (int kk = 0; kk < kMaxKTiles; ++kk) {
        if (2 * kk < n_tiles) {
          const float(&lo)[4] = acc[s][2 * kk];
          const float(&hi)[4] = acc[s][2 * kk + 1];
          a[s][kk][0] = Pack(Relu(lo[0]), Relu(lo[1]));
          a[s][kk][1] = Pack(Relu(lo[2]), Relu(lo[3]));
          a[s][kk][2] = Pack(Relu(hi[0]), Relu(hi[1]));
          a[s][kk][3] = Pack(Relu(hi[2]), Relu(hi[3]));
        }
      }
    }
    const int k_tiles = n_tiles / 2;
    const auto* weight = reinterpret_cast<const __nv_bfloat16*>(shared + m.hidden[l]);
    const float* bias = reinterpret_cast<const float*>(shared + m.bias[l]);
    const int ld = m.hidden_ld[l];
    n_tiles = Shape::OutTiles(m, l);
#pragma unroll
    for (int j = 0; j < kMaxNTiles; ++j) {
      if (j < n_tiles) {
        const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * t);
#pragma unroll
        for (int s = 0; s < S; ++s) {
          acc[s][j][0] = b.x;
          acc[s][j][1] = b.y;
          acc[s][j][2] = b.x;
          acc[s][j][3] = b.y;
        }
      }
    }
#pragma unroll
    for (int kk = 0; kk < kMaxKTiles; ++kk) {
      if (kk < k_tiles) {
#pragma unroll
        for (int j = 0; j < kMaxNTiles; ++j) {
          if (j < n_tiles) {
            const __nv_bfloat16* b = weight + (8 * j + g) * ld + kMma * kk + 2 * t;
            const uint32_t b0 = Load32(b), b1 = Load32(b + 8);
#pragma unroll
            for (int s = 0; s < S; ++s) Mma(acc[s][j], a[s][kk], b0, b1);
          }
        }
      }
    }
  }
  // The last layer's score per position, in fp32 from the fp32 accumulators.
  const float* last = reinterpret_cast<const float*>(shared + m.last);
  float top[S], bottom[S];
#pragma unroll
  for (int s = 0; s < S; ++s) top[s] = bottom[s] = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxNTiles; ++j) {
    if (j < n_tiles) {
      const float2 w = *reinterpret_cast<const float2*>(last + 8 * j + 2 * t);
#pragma unroll
      for (int s = 0; s < S; ++s) {
        top[s] += Relu(acc[s][j][0]) * w.x + Relu(acc[s][j][1]) * w.y;
        bottom[s] += Relu(acc[s][j][2]) * w.x + Relu(acc[s][j][3]) * w.y;
      }
    }
  }
  FinishStrips<S>(mp, shared, top, bottom, r0, rows, scores, pooled);
}

// A warp's strip as wgmma's products read it (ScoreGroupStrip): the fp32 keys of its rows g and
// g + 8 at the A fragment's columns (2t, 2t + 1, 2t + 8, 2t + 9 of each k-tile; top row first) and
// their projections at the C fragments' (mma.cuh).
template <typename Shape>
struct StripOperands {
  float keys[Tiles<Shape>::kDim][8];
  float proj[Tiles<Shape>::kWidth][4];
};

template <typename Shape>
__device__ void LoadStrip(const MmaLayout& m, const char* shared, int r0, StripOperands<Shape>& o) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4, r = r0 + g;
  const float* keys = reinterpret_cast<const float*>(shared + m.keys);
  const float* proj = reinterpret_cast<const float*>(shared + m.proj);
#pragma unroll
  for (int kk = 0; kk < Tiles<Shape>::kDim; ++kk) {
    const int c = kMma * kk + 2 * t;
    const float2 t0 = *reinterpret_cast<const float2*>(keys + r * m.ldk + c);
    const float2 t8 = *reinterpret_cast<const float2*>(keys + r * m.ldk + c + 8);
    const float2 b0 = *reinterpret_cast<const float2*>(keys + (r + 8) * m.ldk + c);
    const float2 b8 = *reinterpret_cast<const float2*>(keys + (r + 8) * m.ldk + c + 8);
    o.keys[kk][0] = t0.x, o.keys[kk][1] = t0.y, o.keys[kk][2] = t8.x, o.keys[kk][3] = t8.y;
    o.keys[kk][4] = b0.x, o.keys[kk][5] = b0.y, o.keys[kk][6] = b8.x, o.keys[kk][7] = b8.y;
  }
#pragma unroll
  for (int j = 0; j < Tiles<Shape>::kWidth; ++j) {
    const int c = 8 * j + 2 * t;
    const float2 top = *reinterpret_cast<const float2*>(proj + r * m.ldp + c);
    const float2 bottom = *reinterpret_cast<const float2*>(proj + (r + 8) * m.ldp + c);
    o.proj[j][0] = top.x, o.proj[j][1] = top.y, o.proj[j][2] = bottom.x, o.proj[j][3] = bottom.y;
  }
}

// ScoreStrips for DIN's shapes on sm_90a, one strip a warp, with the block's four warps calling it
// together, each for its own strip (of any candidate) held in `o`: their products are wgmma's of
// 64 rows, every weight read from shared memory once for the four strips (a warp's own products
// read them once for 16 rows). A warp with nothing to score (!active) takes part in the products
// and writes nothing.
template <typename Shape>
__device__ void ScoreGroupStrip(const MmaParams& mp, const char* shared, const StripOperands<Shape>& o, const float* q,
                                int r0, int rows, bool active, float* scores, float* pooled) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const MmaLayout& m = mp.m;
  const int t = threadIdx.x % kWarp % 4;
  constexpr int kKTiles = Tiles<Shape>::kDim, kNTiles = Tiles<Shape>::kWidth, kOutTiles = Tiles<Shape>::kOut;
  // The first layer: key_proj + query_proj + (query * keys) cross.
  float acc[kNTiles][4];
  const float* qp = q + m.dim_p;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const float2 add = *reinterpret_cast<const float2*>(qp + 8 * j + 2 * t);
    acc[j][0] = o.proj[j][0] + add.x;
    acc[j][1] = o.proj[j][1] + add.y;
    acc[j][2] = o.proj[j][2] + add.x;
    acc[j][3] = o.proj[j][3] + add.y;
  }
  uint32_t a[kKTiles][4];
#pragma unroll
  for (int kk = 0; kk < kKTiles; ++kk) {
    const int c = kMma * kk + 2 * t;
    const float2 q0 = *reinterpret_cast<const float2*>(q + c), q8 = *reinterpret_cast<const float2*>(q + c + 8);
    a[kk][0] = Pack(o.keys[kk][0] * q0.x, o.keys[kk][1] * q0.y);
    a[kk][1] = Pack(o.keys[kk][4] * q0.x, o.keys[kk][5] * q0.y);
    a[kk][2] = Pack(o.keys[kk][2] * q8.x, o.keys[kk][3] * q8.y);
    a[kk][3] = Pack(o.keys[kk][6] * q8.x, o.keys[kk][7] * q8.y);
  }
  const auto* cross = reinterpret_cast<const __nv_bfloat16*>(shared + m.cross);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < kKTiles; ++kk) WgmmaM64N80K16(acc, a[kk], CoreDescriptor(cross, kMma * kk, m.dim_p));
  WgmmaCommit();
  WgmmaWait<0>();
  // The hidden layer.
  uint32_t h[kNTiles / 2][4];
#pragma unroll
  for (int kk = 0; kk < kNTiles / 2; ++kk) {
    h[kk][0] = Pack(Relu(acc[2 * kk][0]), Relu(acc[2 * kk][1]));
    h[kk][1] = Pack(Relu(acc[2 * kk][2]), Relu(acc[2 * kk][3]));
    h[kk][2] = Pack(Relu(acc[2 * kk + 1][0]), Relu(acc[2 * kk + 1][1]));
    h[kk][3] = Pack(Relu(acc[2 * kk + 1][2]), Relu(acc[2 * kk + 1][3]));
  }
  float out[kOutTiles][4];
  const float* bias = reinterpret_cast<const float*>(shared + m.bias[0]);
#pragma unroll
  for (int j = 0; j < kOutTiles; ++j) {
    const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * t);
    out[j][0] = b.x, out[j][1] = b.y, out[j][2] = b.x, out[j][3] = b.y;
  }
  const auto* weight = reinterpret_cast<const __nv_bfloat16*>(shared + m.hidden[0]);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < kNTiles / 2; ++kk) WgmmaM64N48K16(out, h[kk], CoreDescriptor(weight, kMma * kk, 8 * kNTiles));
  WgmmaCommit();
  WgmmaWait<0>();
  // The last layer's score per position.
  const float* last = reinterpret_cast<const float*>(shared + m.last);
  float top[1] = {0.0f}, bottom[1] = {0.0f};
#pragma unroll
  for (int j = 0; j < kOutTiles; ++j) {
    const float2 w = *reinterpret_cast<const float2*>(last + 8 * j + 2 * t);
    top[0] += Relu(out[j][0]) * w.x + Relu(out[j][1]) * w.y;
    bottom[0] += Relu(out[j][2]) * w.x + Relu(out[j][3]) * w.y;
  }
  if (active) FinishStrips<1>(mp, shared, top, bottom, r0, rows, scores, pooled);
#endif
}

// A block per (group of consecutive candidates, tile): the weights converted into shared memory
// once; then, kChunk candidates of one user at a time, that user's tile loaded when it is not the
// one already there and every (candidate, strip) of the chunk scored by a warp; each candidate's
// strips are added in order. With kGroup the weights are wgmma's core matrices and the warps
// score their strips together (ScoreStrips).
template <typename Shape, int S, bool kGroup>
__global__ void __launch_bounds__(kMmaWarps* kWarp) MmaTileKernel(MmaParams mp) {
  extern __shared__ float4 shared4[];
  char* shared = reinterpret_cast<char*>(shared4);
  const Params& p = mp.p;
  const MmaLayout& m = mp.m;
  const int tile = static_cast<int>(blockIdx.x % p.tiles);
  const int64_t first = blockIdx.x / p.tiles * mp.group;
  const int64_t end = min(first + mp.group, mp.candidates);
  const int64_t l0 = tile * kTileRows;
  const int rows = static_cast<int>(p.length - l0 < kTileRows ? p.length - l0 : kTileRows);
  const int items = (rows + kStrip * S - 1) / (kStrip * S);  // a warp's S strips each

  const auto load_weight = [&](int offset, int ld, const float* src, int in, int out, int in_p, int out_p) {
    auto* dst = reinterpret_cast<__nv_bfloat16*>(shared + offset);
    if constexpr (kGroup) {
      LoadWeightCore(dst, src, in, out, in_p, out_p);
    } else {
      LoadWeightT(dst, ld, src, in, out, in_p, out_p, mp.vec);
    }
  };
  load_weight(m.cross, m.ld0, p.cross, p.dim, p.width, m.dim_p, m.width_p);
  for (int l = 0, in = p.width, in_p = m.width_p; l + 1 < p.layer_count; in = p.layers[l].out, in_p = m.out_p[l], ++l) {
    const Layer& layer = p.layers[l];
    load_weight(m.hidden[l], m.hidden_ld[l], layer.weight, in, layer.out, in_p, m.out_p[l]);
    float* bias = reinterpret_cast<float*>(shared + m.bias[l]);
    for (int c = threadIdx.x; c < m.out_p[l]; c += blockDim.x)
      bias[c] = layer.bias && c < layer.out ? layer.bias[c] : 0.0f;
  }
  {
    const int in = p.layer_count > 1 ? p.layers[p.layer_count - 2].out : p.width;
    const int in_p = p.layer_count > 1 ? m.out_p[p.layer_count - 2] : m.width_p;
    float* last = reinterpret_cast<float*>(shared + m.last);
    for (int c = threadIdx.x; c < in_p; c += blockDim.x)
      last[c] = c < in ? p.layers[p.layer_count - 1].weight[c] : 0.0f;
  }

  float* queries = reinterpret_cast<float*>(shared + m.queries);
  float* partial = reinterpret_cast<float*>(shared + m.partial);
  const int warp = threadIdx.x / kWarp;
  float* scores = reinterpret_cast<float*>(shared + m.scores) + warp * kStrip * S;
  int64_t loaded = -1;  // the user whose tile is in shared memory
  for (int64_t n0 = first; n0 < end;) {
    const int64_t u = p.key_rows ? p.key_rows[n0] : n0;
    int64_t n1 = n0 + 1;
    while (n1 < end && n1 - n0 < kChunk && (p.key_rows ? p.key_rows[n1] : n1) == u) ++n1;
    const int count = static_cast<int>(n1 - n0);
    if (u < 0 || u >= p.users) {  // the same for the whole block
      if (threadIdx.x == 0) ReportBadData(p.error, p.step);
      for (int i = threadIdx.x; i < count * p.dim; i += blockDim.x) {
        p.sums[((n0 + i / p.dim) * p.tiles + tile) * p.dim + i % p.dim] = 0.0f;
      }
      n0 = n1;
      continue;
    }
    __syncthreads();  // the previous chunk has read the tile, the queries and the partial sums
    if (u != loaded) {
      LoadRows(reinterpret_cast<float*>(shared + m.keys), m.ldk, p.keys + (u * p.length + l0) * p.dim, rows, p.dim,
               static_cast<int>(kTileRows), m.dim_p, mp.vec);
      LoadRows(reinterpret_cast<float*>(shared + m.proj), m.ldp, p.key_proj + (u * p.length + l0) * p.width, rows,
               p.width, static_cast<int>(kTileRows), m.width_p, mp.vec);
      float* mask = reinterpret_cast<float*>(shared + m.mask);
      for (int r = threadIdx.x; r < kTileRows; r += blockDim.x) {
        mask[r] = p.mask && r < rows ? p.mask[u * p.length + l0 + r] : 1.0f;
      }
      loaded = u;
    }
    LoadRows(queries, m.ldq, p.query + n0 * p.dim, count, p.dim, count, m.dim_p, mp.vec);
    LoadRows(queries + m.dim_p, m.ldq, p.query_proj + n0 * p.width, count, p.width, count, m.width_p, mp.vec);
    __syncthreads();
    if constexpr (kGroup) {      // every warp in each product, with a strip or none
      if (items == kMmaWarps) {  // a whole tile: warp w scores strip w of each candidate, its operands loaded once
        StripOperands<Shape> o;
        LoadStrip(m, shared, warp * kStrip, o);
        for (int c = 0; c < count; ++c) {
          ScoreGroupStrip(mp, shared, o, queries + c * m.ldq, warp * kStrip, rows, true, scores,
                          partial + (c * items + warp) * p.dim);
        }
      } else {
        for (int first_item = 0; first_item < count * items; first_item += kMmaWarps) {
          const int item = first_item + warp;
          const bool active = item < count * items;
          const int c = active ? item / items : 0, at = active ? item % items : 0;
          StripOperands<Shape> o;
          LoadStrip(m, shared, at * kStrip, o);
          ScoreGroupStrip(mp, shared, o, queries + c * m.ldq, at * kStrip, rows, active, scores,
                          partial + item * p.dim);
        }
      }
    } else {
      for (int item = warp; item < count * items; item += kMmaWarps) {
        const int c = item / items, at = item % items;
        ScoreStrips<Shape, S>(mp, shared, queries + c * m.ldq, at * kStrip * S, rows, scores, partial + item * p.dim);
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < count * p.dim; i += blockDim.x) {
      const int c = i / p.dim, d = i % p.dim;
      float sum = 0.0f;
      for (int s = 0; s < items; ++s) sum += partial[(c * items + s) * p.dim + d];
      p.sums[((n0 + c) * p.tiles + tile) * p.dim + d] = sum;
    }
    n0 = n1;
  }
}

using MmaKernel = void (*)(MmaParams);
// DIN's attention MLP (80, 40, 1) with embeddings up to 32, 48, 64 and 128 wide, one strip and two
// strips a warp at once and (sm_90a) one a warp in wgmma's products of the block's four strips
// (S = 4 below), then any shape (one strip: its runtime-sized fragments would not fit twice in
// registers).
template <int S>
constexpr MmaKernel kDinKernels[] = {MmaTileKernel<StripShape<2, 10, 6>, S == 4 ? 1 : S, S == 4>,
                                     MmaTileKernel<StripShape<3, 10, 6>, S == 4 ? 1 : S, S == 4>,
                                     MmaTileKernel<StripShape<4, 10, 6>, S == 4 ? 1 : S, S == 4>,
                                     MmaTileKernel<StripShape<8, 10, 6>, S == 4 ? 1 : S, S == 4>};
constexpr MmaKernel kAnyShapeKernel = MmaTileKernel<AnyShape, 1, false>;

MmaKernel PickMmaKernel(const MmaLayout& m, int layer_count) {
  if (layer_count == 2 && m.width_p == 80 && m.out_p[0] == 48) {
    const int strips = AttentionStrips() == 4 && HopperSmCount() == 0 ? 1 : AttentionStrips();
    const MmaKernel* kernels = strips == 4 ? kDinKernels<4> : strips == 2 ? kDinKernels<2> : kDinKernels<1>;
    switch (m.dim_p) {
      case 32:
        return kernels[0];
      case 48:
        return kernels[1];
      case 64:
        return kernels[2];
      case 128:
        return kernels[3];
      default:
        break;
    }
  }
  return kAnyShapeKernel;
}

bool Aligned16(const void* at) { return reinterpret_cast<uintptr_t>(at) % 16 == 0; }

}  // namespace

int MmaSharedBytes(const Params& p) { return PlanMma(p.dim, p.width, p.layers, p.layer_count).total; }

cudaError_t AllowMmaSharedMemory(int bytes) {
  const auto allow = [bytes](MmaKernel kernel) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  };
  for (size_t i = 0; i < std::size(kDinKernels<1>); ++i) {
    for (MmaKernel kernel : {kDinKernels<1>[i], kDinKernels<2>[i], kDinKernels<4>[i]}) {
      if (cudaError_t e = allow(kernel); e != cudaSuccess) return e;
    }
  }
  if (cudaError_t e = allow(kAnyShapeKernel); e != cudaSuccess) return e;
  return cudaSuccess;
}

void LaunchMmaTiles(const Params& p, int64_t candidates, int multiprocessors, cudaStream_t stream) {
  bool vec = p.dim % 4 == 0 && p.width % 4 == 0;
  for (const float* at : {p.keys, p.query, p.key_proj, p.query_proj, p.cross}) vec = vec && Aligned16(at);
  for (int i = 0; i + 1 < p.layer_count; ++i) vec = vec && p.layers[i].out % 4 == 0 && Aligned16(p.layers[i].weight);
  const MmaLayout layout = PlanMma(p.dim, p.width, p.layers, p.layer_count);
  // Enough candidates per block to fill the device about twice over, each block converting the
  // weights once and loading a user's tile once for all of its candidates (up to kMaxGroup, scored
  // kChunk at a time): a merged batch's blocks then take 32 candidates, not 8, and W2 merged five
  // requests at a time serves 34,000-35,000 requests/s on an H200 where it served 29,500-29,800
  // (docs/log/benchmarks.md, "W2 merged: the attention kernel's blocks take up to 32 candidates").
  const int64_t pairs = candidates * p.tiles, wanted = 2 * static_cast<int64_t>(std::max(multiprocessors, 1));
  const int group = static_cast<int>(std::clamp<int64_t>((pairs + wanted - 1) / wanted, 1, kMaxGroup));
  const MmaParams mp{p, layout, candidates, group, vec, p.layers[p.layer_count - 1].bias};
  const auto blocks = static_cast<unsigned>((candidates + group - 1) / group * p.tiles);
  PickMmaKernel(layout, p.layer_count)<<<blocks, kMmaWarps * kWarp, layout.total, stream>>>(mp);
}

}  // namespace rankd::cuda::attention

// A warp's strips of the bf16 attention kernel on mma.sync (attention_mma.cu's MmaTileKernel), and
// the end every strip shares: its scores and their pooled sum. Device-code header, included by
// attention_mma.cu alone.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/attention_mma_block.cuh"
#include "backend/cuda/mma.cuh"

namespace rankd::cuda::attention {

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

}  // namespace rankd::cuda::attention

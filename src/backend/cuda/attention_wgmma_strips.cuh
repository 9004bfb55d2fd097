// The bf16 attention kernel's strips on wgmma (sm_90a): the block's four warps in products of 64
// positions (attention_mma.cu's MmaTileKernel with kGroup). Device-code header, included by
// attention_mma.cu alone.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/attention_mma_block.cuh"
#include "backend/cuda/attention_mma_strips.cuh"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"

namespace rankd::cuda::attention {

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

}  // namespace rankd::cuda::attention

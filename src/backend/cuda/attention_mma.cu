// The bf16 tile kernel of TargetAttention on the tensor cores (attention.cuh; attention.cu has
// the fp32 kernel and the host side, cpu/attention.cc the reference): the block's layout in
// attention_mma_block.cuh, a warp's strips on mma.sync in attention_mma_strips.cuh, the block's
// four warps' on wgmma in attention_wgmma_strips.cuh.
#include <cuda_bf16.h>

#include <algorithm>
#include <iterator>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/attention_mma_block.cuh"
#include "backend/cuda/attention_mma_strips.cuh"
#include "backend/cuda/attention_wgmma_strips.cuh"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/settings.h"

namespace rankd::cuda::attention {
namespace {

// A block per (group of consecutive candidates, tile): the weights converted into shared memory
// once; then, kChunk candidates of one user at a time, that user's tile loaded when it is not the
// one already there and every (candidate, strip) of the chunk scored by a warp; each candidate's
// strips are added in order. With kGroup the weights are wgmma's core matrices and the warps
// score their strips together (ScoreGroupStrip).
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
template <int KT0, int S>
constexpr MmaKernel kDinKernel = MmaTileKernel<StripShape<KT0, 10, 6>, S == 4 ? 1 : S, S == 4>;
template <int S>
constexpr MmaKernel kDinKernels[] = {kDinKernel<2, S>, kDinKernel<3, S>, kDinKernel<4, S>, kDinKernel<8, S>};
constexpr MmaKernel kAnyShapeKernel = MmaTileKernel<AnyShape, 1, false>;

MmaKernel PickMmaKernel(const MmaLayout& m, int layer_count) {
  if (layer_count == 2 && m.width_p == 80 && m.out_p[0] == 48) {
    const int strips = AttentionStrips();
    const MmaKernel* kernels = strips == 4 && HopperSmCount() > 0 ? kDinKernels<4>
                               : strips == 2                      ? kDinKernels<2>
                                                                  : kDinKernels<1>;
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

// CUDA kernel of DotInteraction (model/ops/dot_interaction.h; cpu/dot_interaction.cc is the
// reference). A block of four warps takes one row:
// - it copies the row's feature vectors into shared memory by cp.async, every copy in flight at
//   once (a loop of loads and stores waited on each load: 0.65 ms for DLRM at 32,768 rows on an
//   H200), a field to a row of an odd stride, so that the lanes of a warp reading different
//   fields at one d hit different banks, and the fields padded with zeros to a multiple of 4;
// - each lane takes 4 x 4 tiles of the row's Gram matrix on or below the diagonal, 16 sums in
//   registers (8 shared loads for 16 multiply-adds a step of d), each warp over a quarter of d,
//   and stores its partial sums (four rows a block, a warp each over all of d, kept 12 warps on
//   an SM: 0.42 ms at 32,768 rows, latency-bound; a row a block keeps up to 40);
// - the block adds each pair's four partial sums in warp order and writes the dense part and the
//   pairs out, coalesced.
// Rows whose fields do not fit in shared memory take a thread per (row, output column) reading
// global memory. Every pair was checked against the fields when the plan was built.
#include <algorithm>

#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/per_device.h"
#include "model/ops/dot_interaction.h"

namespace rankd::cuda {
namespace {

using namespace dot_interaction;

constexpr int kWarp = 32;
constexpr int kWarps = 4;  // a block's, each over a quarter of d

struct Params {
  const float* features = nullptr;
  const int64_t* pairs = nullptr;
  const float* dense = nullptr;
  float* out = nullptr;
  int64_t rows = 0;
  int fields = 0, dim = 0, count = 0, width = 0;
  int padded_fields = 0;  // fields rounded up to a multiple of 4
  int stride = 0;         // floats between two fields' vectors in shared memory: odd, >= dim
  int tiles = 0;          // 4 x 4 tiles on or below the Gram matrix's diagonal
};

// Floats of shared memory a block takes: the row's padded fields, then each warp's partial sums
// ([warp][entry of a tile][tile], so that a warp's lanes store to consecutive words).
__host__ __device__ inline int64_t BlockFloats(const Params& p) {
  return int64_t{p.padded_fields} * p.stride + int64_t{kWarps} * 16 * p.tiles;
}

__global__ void __launch_bounds__(kWarps* kWarp) DotInteractionTiled(Params p) {
  extern __shared__ float smem[];
  const int64_t n = blockIdx.x;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* partial = smem + p.padded_fields * p.stride;
  for (int f = warp; f < p.padded_fields; f += kWarps) {
    float* dst = smem + f * p.stride;
    if (f < p.fields) {
      const float* src = p.features + (n * p.fields + f) * p.dim;
      for (int d = lane; d < p.dim; d += kWarp) {
        const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst + d));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to), "l"(src + d));
      }
    } else {
      for (int d = lane; d < p.dim; d += kWarp) dst[d] = 0.0f;
    }
  }
  asm volatile("cp.async.wait_all;\n" ::);
  __syncthreads();
  const int chunk = (p.dim + kWarps - 1) / kWarps;
  const int d0 = min(p.dim, warp * chunk), d1 = min(p.dim, d0 + chunk);
  for (int t = lane; t < p.tiles; t += kWarp) {
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= t) ++ti;
    const int tj = t - ti * (ti + 1) / 2;
    const float* a = smem + 4 * ti * p.stride;
    const float* b = smem + 4 * tj * p.stride;
    float acc[4][4] = {};
#pragma unroll 4
    for (int d = d0; d < d1; ++d) {
      float av[4], bv[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        av[k] = a[k * p.stride + d];
        bv[k] = b[k * p.stride + d];
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
#pragma unroll
        for (int l = 0; l < 4; ++l) acc[k][l] = fmaf(av[k], bv[l], acc[k][l]);
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int l = 0; l < 4; ++l) partial[(warp * 16 + k * 4 + l) * p.tiles + t] = acc[k][l];
    }
  }
  __syncthreads();
  const int out_width = p.width + p.count;
  float* out = p.out + n * out_width;
  for (int w = threadIdx.x; w < p.width; w += blockDim.x) out[w] = p.dense[n * p.width + w];
  const longlong2* pairs = reinterpret_cast<const longlong2*>(p.pairs);
  for (int q = threadIdx.x; q < p.count; q += blockDim.x) {
    const longlong2 pair = pairs[q];
    int i = static_cast<int>(pair.x), j = static_cast<int>(pair.y);
    if (i / 4 < j / 4) {  // only tiles on or below the diagonal were computed; the dot commutes
      const int s = i;
      i = j;
      j = s;
    }
    const int t = (i / 4) * (i / 4 + 1) / 2 + j / 4, entry = (i % 4) * 4 + j % 4;
    float dot = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) dot += partial[(w * 16 + entry) * p.tiles + t];
    out[p.width + q] = dot;
  }
}

// A thread per (row, output column), the fields read from global memory.
__global__ void DotInteractionGlobal(Params p) {
  const int out_width = p.width + p.count;
  const int64_t total = p.rows * out_width;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = e / out_width;
    const int c = static_cast<int>(e % out_width);
    if (c < p.width) {
      p.out[e] = p.dense[n * p.width + c];
      continue;
    }
    const int q = c - p.width;
    const float* row = p.features + n * p.fields * static_cast<int64_t>(p.dim);
    const float *a = row + p.pairs[2 * q] * p.dim, *b = row + p.pairs[2 * q + 1] * p.dim;
    float dot = 0.0f;
    for (int d = 0; d < p.dim; ++d) dot = fmaf(a[d], b[d], dot);
    p.out[e] = dot;
  }
}

int shared_limit = 0;  // bytes of shared memory a block may opt in to; set by the prepare

StatusOr<std::shared_ptr<const KernelState>> PrepareDotInteraction(const Node&) {
  static PerDevice<cudaError_t> per_device;
  const cudaError_t set = per_device.Get([] {
    int device = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(DotInteractionTiled, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (e == cudaSuccess) shared_limit = optin;
    return e;
  });
  RANKD_CUDA_RETURN(set);
  return std::shared_ptr<const KernelState>();
}

Status DotInteraction(const KernelArgs& k) {
  const Tensor& features = k.In(kFeatures);
  Params p;
  p.rows = features.dim(0);
  p.fields = static_cast<int>(features.dim(1));
  p.dim = static_cast<int>(features.dim(2));
  p.count = static_cast<int>(k.In(kPairs).dim(0));
  p.width = k.HasIn(kDense) ? static_cast<int>(k.In(kDense).dim(1)) : 0;
  if (p.rows == 0 || p.width + p.count == 0) return Status::Ok();
  p.features = features.data<float>();
  p.pairs = k.In(kPairs).data<int64_t>();
  p.dense = k.HasIn(kDense) ? k.In(kDense).data<float>() : nullptr;
  p.out = k.Out(0).data<float>();
  p.padded_fields = (p.fields + 3) / 4 * 4;
  p.stride = p.dim | 1;
  p.tiles = (p.padded_fields / 4) * (p.padded_fields / 4 + 1) / 2;
  const int64_t block_bytes = BlockFloats(p) * static_cast<int64_t>(sizeof(float));
  if (block_bytes <= shared_limit && p.dim > 0 && p.rows <= 0x7fffffff) {
    DotInteractionTiled<<<static_cast<unsigned>(p.rows), kWarps * kWarp, block_bytes, k.device->stream>>>(p);
  } else {
    DotInteractionGlobal<<<Blocks(p.rows * (p.width + p.count)), kThreads, 0, k.device->stream>>>(p);
  }
  return Launched(k);
}

}  // namespace

void AppendDotInteractionKernels(KernelTable& out) { out["DotInteraction"] = {DotInteraction, PrepareDotInteraction}; }

}  // namespace rankd::cuda

// CUDA kernel of DotInteraction (compile/ops/dot_interaction.h; cpu/dot_interaction.cc is the
// reference). A block takes up to four rows, a warp each:
// - the block copies its rows' feature vectors into shared memory (cp.async, coalesced, every
//   copy in flight at once: a loop of loads and stores waited on each load, 0.65 ms for DLRM at
//   32,768 rows on an H200), a field to a row of an odd stride (so the lanes of a warp reading
//   different fields at one d hit different banks) and the fields padded with zeros to a
//   multiple of 4;
// - each lane takes 4 x 4 tiles of the row's Gram matrix on or below the diagonal, 16 sums in
//   registers over d in order (8 shared loads a step for 16 multiply-adds), and writes them to
//   the warp's Gram buffer;
// - the lanes copy the dense part and then each pair's entry of the Gram matrix to the output,
//   coalesced.
// Rows whose fields do not fit in shared memory take a thread per (row, pair) reading global
// memory. Every pair was checked against the fields when the plan was built.
#include <algorithm>

#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "compile/ops/dot_interaction.h"

namespace rankd::cuda {
namespace {

using namespace dot_interaction;

constexpr int kWarp = 32;
constexpr int kMaxWarps = 4;  // rows a block

struct Params {
  const float* features = nullptr;
  const int64_t* pairs = nullptr;
  const float* dense = nullptr;
  float* out = nullptr;
  int64_t rows = 0;
  int fields = 0, dim = 0, count = 0, width = 0;
  int padded_fields = 0;  // fields rounded up to a multiple of 4
  int stride = 0;         // floats between two fields' vectors in shared memory: odd, >= dim
};

// Floats of shared memory a row takes: its padded fields, then its Gram matrix.
__host__ __device__ inline int64_t RowFloats(const Params& p) {
  return int64_t{p.padded_fields} * p.stride + int64_t{p.padded_fields} * p.padded_fields;
}

__global__ void __launch_bounds__(kMaxWarps* kWarp) DotInteractionTiled(Params p, int warps) {
  extern __shared__ float smem[];
  const int64_t first = blockIdx.x * static_cast<int64_t>(warps);
  const int rows = static_cast<int>(min(static_cast<int64_t>(warps), p.rows - first));
  const int row_floats = static_cast<int>(RowFloats(p));
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  // Load: a warp a field's vector at a time, by asynchronous 4-byte copies (a field's row in
  // shared memory has an odd stride, so it cannot take 16-byte ones), all in flight at once;
  // the padding fields zeros.
  for (int rf = warp; rf < rows * p.padded_fields; rf += warps) {
    const int r = rf / p.padded_fields, f = rf % p.padded_fields;
    float* dst = smem + r * row_floats + f * p.stride;
    if (f < p.fields) {
      const float* src = p.features + ((first + r) * p.fields + f) * p.dim;
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
  if (warp >= rows) return;
  const float* x = smem + warp * row_floats;
  float* gram = smem + warp * row_floats + p.padded_fields * p.stride;
  const int blocks = p.padded_fields / 4, tiles = blocks * (blocks + 1) / 2;
  for (int t = lane; t < tiles; t += kWarp) {
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= t) ++ti;
    const int tj = t - ti * (ti + 1) / 2;
    const float* a = x + 4 * ti * p.stride;
    const float* b = x + 4 * tj * p.stride;
    float acc[4][4] = {};
#pragma unroll 4
    for (int d = 0; d < p.dim; ++d) {
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
      for (int l = 0; l < 4; ++l) gram[(4 * ti + k) * p.padded_fields + 4 * tj + l] = acc[k][l];
    }
  }
  __syncwarp();
  const int64_t n = first + warp;
  const int out_width = p.width + p.count;
  float* out = p.out + n * out_width;
  for (int w = lane; w < p.width; w += kWarp) out[w] = p.dense[n * p.width + w];
  for (int q = lane; q < p.count; q += kWarp) {
    int i = static_cast<int>(p.pairs[2 * q]), j = static_cast<int>(p.pairs[2 * q + 1]);
    if (i / 4 < j / 4) {  // only tiles on or below the diagonal were computed; the dot commutes
      const int s = i;
      i = j;
      j = s;
    }
    out[p.width + q] = gram[i * p.padded_fields + j];
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
  static const cudaError_t set = [] {
    int device = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(DotInteractionTiled, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               optin);
    if (e == cudaSuccess) shared_limit = optin;
    return e;
  }();
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
  const int64_t row_bytes = RowFloats(p) * static_cast<int64_t>(sizeof(float));
  const int warps = static_cast<int>(
      std::min<int64_t>(kMaxWarps, shared_limit / std::max<int64_t>(row_bytes, 1)));
  if (warps >= 1 && p.dim > 0) {
    const int64_t blocks = (p.rows + warps - 1) / warps;
    DotInteractionTiled<<<static_cast<unsigned>(blocks), warps * kWarp, warps * row_bytes,
                          k.device->stream>>>(p, warps);
  } else {
    DotInteractionGlobal<<<Blocks(p.rows * (p.width + p.count)), kThreads, 0, k.device->stream>>>(
        p);
  }
  return Launched(k);
}

}  // namespace

void AppendDotInteractionKernels(KernelTable& out) {
  out["DotInteraction"] = {DotInteraction, PrepareDotInteraction};
}

}  // namespace rankd::cuda

// CUDA kernels of TargetAttention (model/ops/target_attention.h; cpu/attention.cc is the
// reference). Positions are scored in tiles of kTileRows; nothing of size [candidates, length,
// width] reaches device memory, and with several tiles a second launch adds each candidate's tile
// sums in order, so every run gives the same bits.
//
// Two variants of the tile kernel:
// - fp32 on the CUDA cores (precision fp32 and tf32), here: a block per (candidate, tile), the
//   keys and the cross weight scaled by the query in shared memory, every layer a register-tiled
//   product into shared memory.
// - bf16 on the tensor cores (attention_mma.cu; bf16 operands as every bf16 product here has,
//   fp32 accumulators, epilogues and sums): a block per (group of candidates, tile) with every
//   weight resident in shared memory; a warp takes 16 positions of one candidate through the
//   whole MLP with the activations in registers (on sm_90a, DIN's shapes, the block's four warps
//   in wgmma's products of 64 positions).
#include <algorithm>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/per_device.h"

namespace rankd::cuda {
namespace {

using namespace attention;

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = static_cast<int>(kTileRows) / kWarps;

__host__ __device__ constexpr int Pad4(int x) { return (x + 3) & ~3; }

// Shared memory: the keys tile, the scaled cross weight and two activation buffers, each starting
// on 16 bytes.
__host__ __device__ constexpr int SharedFloats(int dim, int width, int widest) {
  return static_cast<int>(kTileRows) * Pad4(dim) + Pad4(dim * width) + 2 * static_cast<int>(kTileRows) * Pad4(widest);
}

// out[r][c] = epilogue(r, c, sum over k of a[r][k] * b[k][c]) for this warp's rows r and the
// columns c = lane + 32 j; a's rows are padded with zeros to a multiple of 4 (float4 loads, the
// same address across the warp), b is [k_count, cols] (shared or global memory). Columns from
// cols up to the padded width are written as zeros, so the next layer's padding reads zeros.
template <int J, typename Epilogue>
__device__ void WarpProduct(const float* a, int a_stride, int k_count, const float* b, int cols, float* out,
                            int out_stride, int row0, Epilogue epilogue) {
  const int lane = threadIdx.x % kWarp;
  float acc[kRowsPerWarp][J] = {};
  for (int k0 = 0; k0 < k_count; k0 += 4) {
    float bk[4][J];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int j = 0; j < J; ++j) {
        int c = lane + kWarp * j;
        bk[kk][j] = k0 + kk < k_count && c < cols ? b[(k0 + kk) * cols + c] : 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float4 av = *reinterpret_cast<const float4*>(a + (row0 + r) * a_stride + k0);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        acc[r][j] += av.x * bk[0][j];
        acc[r][j] += av.y * bk[1][j];
        acc[r][j] += av.z * bk[2][j];
        acc[r][j] += av.w * bk[3][j];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int j = 0; j < J; ++j) {
      int c = lane + kWarp * j;
      if (c < Pad4(cols)) out[(row0 + r) * out_stride + c] = c < cols ? epilogue(row0 + r, c, acc[r][j]) : 0.0f;
    }
  }
}

template <typename Epilogue>
__device__ void Product(const float* a, int a_stride, int k_count, const float* b, int cols, float* out, int out_stride,
                        int row0, Epilogue epilogue) {
  switch ((cols + kWarp - 1) / kWarp) {
    case 1:
      WarpProduct<1>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue);
      break;
    case 2:
      WarpProduct<2>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue);
      break;
    case 3:
      WarpProduct<3>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue);
      break;
    default:
      WarpProduct<4>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue);
      break;
  }
}

// Candidate n's user row, or -1 (reported, the block's sums zeroed) when the row is bad.
__device__ int64_t UserOf(const Params& p, int64_t n, float* sums) {
  const int64_t u = p.key_rows ? p.key_rows[n] : n;
  if (u >= 0 && u < p.users) return u;
  if (threadIdx.x == 0) ReportBadData(p.error, p.step);
  for (int d = threadIdx.x; d < p.dim; d += blockDim.x) sums[d] = 0.0f;
  return -1;
}

__global__ void __launch_bounds__(kWarps* kWarp) TileKernel(Params p) {
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  const int64_t n = blockIdx.x / p.tiles;
  const int tile = static_cast<int>(blockIdx.x % p.tiles);
  const int64_t l0 = tile * kTileRows;
  const int rows = static_cast<int>(p.length - l0 < kTileRows ? p.length - l0 : kTileRows);
  const int dim = p.dim, width = p.width, kd = Pad4(dim), kw = Pad4(p.widest);
  float* sums = p.sums + (n * p.tiles + tile) * dim;
  const int64_t u = UserOf(p, n, sums);
  if (u < 0) return;                       // the same for the whole block
  float* keys = shared;                    // [kTileRows, kd]
  float* cross = keys + kTileRows * kd;    // [dim, width]: the cross weight scaled by the query
  float* act = cross + Pad4(dim * width);  // [kTileRows, kw]
  float* next = act + kTileRows * kw;      // [kTileRows, kw]
  const float* key_rows_at = p.keys + (u * p.length + l0) * dim;
  for (int i = threadIdx.x; i < kTileRows * kd; i += blockDim.x) {
    int r = i / kd, d = i % kd;
    keys[i] = r < rows && d < dim ? key_rows_at[r * dim + d] : 0.0f;
  }
  const float* q = p.query + n * dim;
  for (int i = threadIdx.x; i < dim * width; i += blockDim.x) cross[i] = q[i / width] * p.cross[i];
  __syncthreads();

  const int row0 = (threadIdx.x / kWarp) * kRowsPerWarp;
  const float* key_proj = p.key_proj + (u * p.length + l0) * width;
  const float* query_proj = p.query_proj + n * width;
  Product(keys, kd, dim, cross, width, act, kw, row0,
          [&](int r, int c, float v) { return r < rows ? Relu((key_proj[r * width + c] + v) + query_proj[c]) : 0.0f; });
  __syncthreads();
  int in_width = width;
  for (int i = 0; i < p.layer_count; ++i) {
    const Layer layer = p.layers[i];
    const bool relu = i + 1 < p.layer_count;
    Product(act, kw, in_width, layer.weight, layer.out, next, kw, row0, [&](int, int c, float v) {
      float h = layer.bias ? v + layer.bias[c] : v;
      return relu ? Relu(h) : h;
    });
    __syncthreads();
    float* t = act;
    act = next;
    next = t;
    in_width = layer.out;
  }
  // act[r * kw]: position l0 + r's score.
  const float* mask = p.mask ? p.mask + u * p.length + l0 : nullptr;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) {
      float s = mask ? act[r * kw] * mask[r] : act[r * kw];
      sum += s * keys[r * kd + d];
    }
    sums[d] = sum;
  }
}

// out[n][d] = the sum over tiles of sums[n][tile][d], in order.
__global__ void SumTilesKernel(const float* sums, int64_t candidates, int tiles, int dim, float* out) {
  RANKD_GRID_LOOP(i, candidates * dim) {
    int64_t n = i / dim, d = i % dim;
    const float* s = sums + n * tiles * dim + d;
    float acc = 0.0f;
    for (int t = 0; t < tiles; ++t) acc += s[t * dim];
    out[i] = acc;
  }
}

constexpr int kMaxSharedBytes = SharedFloats(kMaxWidth, kMaxWidth, kMaxWidth) * 4;

// The shared memory a block may have on this device (opted in above the default 48 KB for both
// tile kernels) and its multiprocessors; 0 before the first prepare.
int shared_limit = 0;
int multiprocessors = 0;

StatusOr<std::shared_ptr<const KernelState>> PrepareTargetAttention(const Node&) {
  static PerDevice<cudaError_t> per_device;
  const cudaError_t set = per_device.Get([] {
    int device = 0, optin = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(TileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               std::min(optin, kMaxSharedBytes));
    if (e == cudaSuccess) e = AllowMmaSharedMemory(optin);
    if (e == cudaSuccess) {
      shared_limit = optin;
      multiprocessors = sms;
    }
    return e;
  });
  RANKD_CUDA_RETURN(set);
  return std::shared_ptr<const KernelState>();
}

Status TargetAttention(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  const Tensor& keys = k.In(0);
  Params p{};
  p.users = keys.dim(0);
  p.length = keys.dim(1);
  p.dim = static_cast<int>(keys.dim(2));
  p.width = static_cast<int>(k.In(5).dim(1));
  const int64_t candidates = out.dim(0);
  if (candidates == 0) return Status::Ok();
  p.tiles = static_cast<int>(target_attention::Tiles(p.length));
  if (p.tiles == 0) {
    RANKD_CUDA_RETURN(cudaMemsetAsync(out.data<float>(), 0, out.bytes(), k.device->stream));
    return Status::Ok();
  }
  p.keys = keys.data<float>();
  p.key_rows = k.HasIn(1) ? k.In(1).data<int64_t>() : nullptr;
  p.query = k.In(2).data<float>();
  p.key_proj = k.In(3).data<float>();
  p.query_proj = k.In(4).data<float>();
  p.cross = k.In(5).data<float>();
  p.mask = k.HasIn(6) ? k.In(6).data<float>() : nullptr;
  p.layer_count = (k.node.NumInputs() - kFirstLayerInput) / 2;
  p.widest = p.width;
  for (int i = 0; i < p.layer_count; ++i) {
    const Tensor& w = k.In(kFirstLayerInput + 2 * i);
    const int bias = kFirstLayerInput + 2 * i + 1;
    p.layers[i] = {w.data<float>(), k.HasIn(bias) ? k.In(bias).data<float>() : nullptr, static_cast<int>(w.dim(1))};
    p.widest = std::max(p.widest, p.layers[i].out);
  }
  p.sums = p.tiles == 1 ? out.data<float>() : static_cast<float*>(k.scratch);
  p.error = k.device->error;
  p.step = k.step;
  const size_t shared = static_cast<size_t>(SharedFloats(p.dim, p.width, p.widest)) * 4;
  // With bf16 on the tensor cores, unless its block (every weight resident) does not fit here.
  const bool mma = Bf16Products(k.device->precision) && MmaSharedBytes(p) <= shared_limit;
  if (!mma && shared > static_cast<size_t>(shared_limit)) {
    return Unimplemented(k.node.Describe() + ": needs " + std::to_string(shared) + " bytes of shared memory per block");
  }
  if (mma) {
    LaunchMmaTiles(p, candidates, multiprocessors, k.device->stream);
  } else {
    TileKernel<<<static_cast<unsigned>(candidates * p.tiles), kWarps * kWarp, shared, k.device->stream>>>(p);
  }
  if (p.tiles > 1) {
    SumTilesKernel<<<Blocks(candidates * p.dim), kThreads, 0, k.device->stream>>>(p.sums, candidates, p.tiles, p.dim,
                                                                                  out.data<float>());
  }
  return Launched(k);
}

}  // namespace

void AppendAttentionKernels(KernelTable& out) { out["TargetAttention"] = {TargetAttention, PrepareTargetAttention}; }

}  // namespace rankd::cuda

// CUDA kernel of TargetAttention (compile/ops/target_attention.h; cpu/attention.cc is the
// reference). A block scores one candidate against a tile of kTileRows positions of its user's
// sequence: the keys and the cross weight scaled by the query in shared memory, every layer of the
// attention MLP a register-tiled product into shared memory, then the tile's mask-weighted sum of
// the keys. Nothing of size [candidates, length, width] reaches device memory; with several
// tiles, a second launch adds each candidate's tile sums in order.
//
// Two variants of the tile kernel: exact fp32 on the CUDA cores (precision fp32 and tf32), and
// with precision bf16 the products on the tensor cores (WMMA 16x16x16, bf16 operands as every
// bf16 product here has, fp32 accumulators, epilogues and sums), operands padded to 16 in shared
// memory.
#include <mma.h>
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "compile/ops/target_attention.h"

namespace rankd::cuda {
namespace {

using target_attention::kFirstLayerInput;
using target_attention::kMaxLayers;
using target_attention::kMaxWidth;
using target_attention::kTileRows;

constexpr int kWarp = 32;
constexpr int kWarps = 8;
constexpr int kRowsPerWarp = static_cast<int>(kTileRows) / kWarps;

struct Layer {
  const float* weight;  // [in, out]
  const float* bias;    // [out] or null
  int out;
};

struct Params {
  const float *keys, *query, *key_proj, *query_proj, *cross, *mask;
  const int64_t* key_rows;
  Layer layers[kMaxLayers];
  int layer_count;
  int64_t users, length;
  int dim, width, widest, tiles;
  int parts, tiles_per_block;  // a block per (candidate, part); the fp32 kernel: a part per tile
  int weight_elems;            // the bf16 kernel: the hidden layers' padded weights
  float* sums;  // [candidates, parts, dim]: each part's sum (the output itself with one part)
  int* error;
  int step;
};

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
    case 1: WarpProduct<1>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue); break;
    case 2: WarpProduct<2>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue); break;
    case 3: WarpProduct<3>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue); break;
    default: WarpProduct<4>(a, a_stride, k_count, b, cols, out, out_stride, row0, epilogue); break;
  }
}

__device__ inline float Relu(float x) { return x > 0.0f ? x : 0.0f; }

// Candidate n's user row, or -1 (reported, the block's sums zeroed) when the row is bad.
__device__ int64_t UserOf(const Params& p, int64_t n, float* sums) {
  const int64_t u = p.key_rows ? p.key_rows[n] : n;
  if (u >= 0 && u < p.users) return u;
  if (threadIdx.x == 0) ReportBadData(p.error, p.step);
  for (int d = threadIdx.x; d < p.dim; d += blockDim.x) sums[d] = 0.0f;
  return -1;
}

// store(i, load(i)) for i < count over the block's threads, kStage loads in flight per thread
// before any store: these loops read global memory (L2 mostly), and one load at a time would
// leave a block waiting on latency, not bandwidth.
constexpr int kStage = 8;
template <typename Load, typename Store>
__device__ void Staged(int count, Load load, Store store) {
  for (int base = threadIdx.x; base < count; base += kStage * blockDim.x) {
    float v[kStage];
#pragma unroll
    for (int b = 0; b < kStage; ++b) {
      int i = base + b * blockDim.x;
      v[b] = i < count ? load(i) : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kStage; ++b) {
      int i = base + b * blockDim.x;
      if (i < count) store(i, v[b]);
    }
  }
}

__global__ void __launch_bounds__(kWarps * kWarp) TileKernel(Params p) {
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  const int64_t n = blockIdx.x / p.parts;
  const int tile = static_cast<int>(blockIdx.x % p.parts);
  const int64_t l0 = tile * kTileRows;
  const int rows = static_cast<int>(p.length - l0 < kTileRows ? p.length - l0 : kTileRows);
  const int dim = p.dim, width = p.width, kd = Pad4(dim), kw = Pad4(p.widest);
  float* sums = p.sums + (n * p.parts + tile) * dim;
  const int64_t u = UserOf(p, n, sums);
  if (u < 0) return;  // the same for the whole block
  float* keys = shared;                        // [kTileRows, kd]
  float* cross = keys + kTileRows * kd;        // [dim, width]: the cross weight scaled by the query
  float* act = cross + Pad4(dim * width);      // [kTileRows, kw]
  float* next = act + kTileRows * kw;          // [kTileRows, kw]
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
  Product(keys, kd, dim, cross, width, act, kw, row0, [&](int r, int c, float v) {
    return r < rows ? Relu((key_proj[r * width + c] + v) + query_proj[c]) : 0.0f;
  });
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


// ---------------------------------------------------------------- bf16 on the tensor cores
constexpr int kMma = 16;

__host__ __device__ constexpr int Pad16(int x) { return (x + kMma - 1) / kMma * kMma; }
__host__ __device__ constexpr size_t Align128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// The bf16 kernel's shared memory, in bytes from the start (each region on 128 bytes); `weights`
// is the bf16 elements of every hidden layer's padded weight matrix.
struct MmaLayout {
  int kd = 0, kw = 0;  // padded dim and widest width
  size_t keys = 0, keys16 = 0, cross16 = 0, weight16 = 0, act = 0, act16 = 0, total = 0;
  __host__ __device__ constexpr MmaLayout(int dim, int widest, int weights) : kd(Pad16(dim)), kw(Pad16(widest)) {
    keys16 = keys + Align128(sizeof(float) * kTileRows * kd);       // keys: fp32 [kTileRows, kd]
    cross16 = keys16 + Align128(2 * kTileRows * kd);                // bf16 [kTileRows, kd]
    weight16 = cross16 + Align128(2 * static_cast<size_t>(kd) * kw);  // bf16 [kd, kw]: the scaled cross weight
    act = weight16 + Align128(2 * static_cast<size_t>(weights));      // bf16: the hidden layers' weights
    act16 = act + Align128(sizeof(float) * kTileRows * kw);          // fp32 [kTileRows, kw]
    total = act16 + Align128(2 * kTileRows * kw);                   // bf16 [kTileRows, kw]
  }
};

// act[64, cols_p] = a16[64, k_p] b16[k_p, cols_p] (row-major, ld = the padded widths), a warp per
// 16x16 output tile.
__device__ void MmaProduct(const __nv_bfloat16* a16, int lda, int k_p, const __nv_bfloat16* b16, int ldb, int cols_p,
                           float* act, int ldc) {
  using namespace nvcuda;
  const int col_tiles = cols_p / kMma, tiles = static_cast<int>(kTileRows / kMma) * col_tiles;
  for (int t = threadIdx.x / kWarp; t < tiles; t += kWarps) {
    const int rt = t / col_tiles, ct = t % col_tiles;
    wmma::fragment<wmma::accumulator, kMma, kMma, kMma, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int k = 0; k < k_p; k += kMma) {
      wmma::fragment<wmma::matrix_a, kMma, kMma, kMma, __nv_bfloat16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, kMma, kMma, kMma, __nv_bfloat16, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, a16 + rt * kMma * lda + k, lda);
      wmma::load_matrix_sync(fb, b16 + k * ldb + ct * kMma, ldb);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(act + rt * kMma * ldc + ct * kMma, c, ldc, wmma::mem_row_major);
  }
}

// A block per (candidate, group of kTilesPerBlock consecutive tiles): the scaled cross weight and
// the hidden layers' weights are converted into shared memory once, then each tile's positions are
// scored and pooled into the threads' sums (thread d: output column d).
__global__ void __launch_bounds__(kWarps * kWarp) MmaTileKernel(Params p) {
  extern __shared__ float4 shared4[];
  char* shared = reinterpret_cast<char*>(shared4);
  const int64_t n = blockIdx.x / p.parts;
  const int part = static_cast<int>(blockIdx.x % p.parts);
  const int dim = p.dim, width = p.width, width_p = Pad16(width);
  const MmaLayout m(dim, p.widest, p.weight_elems);
  const int kd = m.kd, kw = m.kw;
  float* sums = p.sums + (n * p.parts + part) * dim;
  const int64_t u = UserOf(p, n, sums);
  if (u < 0) return;  // the same for the whole block
  float* keys = reinterpret_cast<float*>(shared + m.keys);
  auto* keys16 = reinterpret_cast<__nv_bfloat16*>(shared + m.keys16);
  auto* cross16 = reinterpret_cast<__nv_bfloat16*>(shared + m.cross16);
  auto* weight16 = reinterpret_cast<__nv_bfloat16*>(shared + m.weight16);
  float* act = reinterpret_cast<float*>(shared + m.act);
  auto* act16 = reinterpret_cast<__nv_bfloat16*>(shared + m.act16);
  const float* q = p.query + n * dim;
  Staged(
      kd * width_p,
      [&](int i) {
        int d = i / width_p, j = i % width_p;
        return d < dim && j < width ? q[d] * p.cross[d * width + j] : 0.0f;
      },
      [&](int i, float v) { cross16[i] = __float2bfloat16_rn(v); });
  for (int l = 0, offset = 0, in = width; l + 1 < p.layer_count; offset += Pad16(in) * Pad16(p.layers[l].out), in = p.layers[l].out, ++l) {
    const Layer layer = p.layers[l];
    const int out_p = Pad16(layer.out);
    Staged(
        Pad16(in) * out_p,
        [&](int i) {
          int k = i / out_p, c = i % out_p;
          return k < in && c < layer.out ? layer.weight[k * layer.out + c] : 0.0f;
        },
        [&](int i, float v) { weight16[offset + i] = __float2bfloat16_rn(v); });
  }
  const float* query_proj = p.query_proj + n * width;
  const Layer last = p.layers[p.layer_count - 1];
  float* scores = reinterpret_cast<float*>(shared + m.keys16);  // after a tile's products: the keys16 room
  float pooled = 0.0f;                                          // thread d < dim: output column d
  const int first = part * p.tiles_per_block, end = min(first + p.tiles_per_block, p.tiles);
  for (int tile = first; tile < end; ++tile) {
    const int64_t l0 = tile * kTileRows;
    const int rows = static_cast<int>(p.length - l0 < kTileRows ? p.length - l0 : kTileRows);
    const float* key_rows_at = p.keys + (u * p.length + l0) * dim;
    __syncthreads();  // the previous tile's pooling has read keys and scores
    Staged(
        kTileRows * kd,
        [&](int i) {
          int r = i / kd, d = i % kd;
          return r < rows && d < dim ? key_rows_at[r * dim + d] : 0.0f;
        },
        [&](int i, float v) {
          keys[i] = v;
          keys16[i] = __float2bfloat16_rn(v);
        });
    __syncthreads();
    MmaProduct(keys16, kd, kd, cross16, width_p, width_p, act, kw);
    __syncthreads();
    const float* key_proj = p.key_proj + (u * p.length + l0) * width;
    Staged(
        kTileRows * kw,
        [&](int i) {
          int r = i / kw, c = i % kw;
          return r < rows && c < width ? (key_proj[r * width + c] + act[i]) + query_proj[c] : 0.0f;
        },
        [&](int i, float v) {
          act[i] = Relu(v);
          act16[i] = __float2bfloat16_rn(Relu(v));
        });
    int in_width = width;
    for (int l = 0, offset = 0; l + 1 < p.layer_count; offset += Pad16(in_width) * Pad16(p.layers[l].out), in_width = p.layers[l].out, ++l) {
      const Layer layer = p.layers[l];
      __syncthreads();
      MmaProduct(act16, kw, Pad16(in_width), weight16 + offset, Pad16(layer.out), Pad16(layer.out), act, kw);
      __syncthreads();
      Staged(
          kTileRows * kw,
          [&](int i) {
            int c = i % kw;
            return c < layer.out ? (layer.bias ? act[i] + layer.bias[c] : act[i]) : 0.0f;
          },
          [&](int i, float v) {
            act[i] = Relu(v);
            act16[i] = __float2bfloat16_rn(Relu(v));
          });
    }
    __syncthreads();
    // The last layer's one score per position, in fp32 from the fp32 activations: a warp per row,
    // its weights and its rows' mask values loaded once.
    const int lane = threadIdx.x % kWarp;
    float w[kMaxWidth / kWarp];
#pragma unroll
    for (int j = 0; j < kMaxWidth / kWarp; ++j) w[j] = lane + kWarp * j < in_width ? last.weight[lane + kWarp * j] : 0.0f;
    const int my_row = threadIdx.x / kWarp + kWarps * lane;  // lane j holds the mask of the warp's j-th row
    const float my_mask = p.mask && lane < kRowsPerWarp && my_row < rows ? p.mask[u * p.length + l0 + my_row] : 1.0f;
    const float bias = last.bias ? last.bias[0] : 0.0f;
    for (int j = 0; j < kRowsPerWarp; ++j) {
      const int r = threadIdx.x / kWarp + kWarps * j;
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < kMaxWidth / kWarp; ++c) {
        if (lane + kWarp * c < in_width) s += act[r * kw + lane + kWarp * c] * w[c];
      }
      for (int o = kWarp / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
      const float m = __shfl_sync(0xffffffffu, my_mask, j);
      if (lane == 0) scores[r] = last.bias ? (s + bias) * m : s * m;
    }
    __syncthreads();
    if (threadIdx.x < dim) {
      for (int r = 0; r < rows; ++r) pooled += scores[r] * keys[r * kd + threadIdx.x];
    }
  }
  if (threadIdx.x < dim) sums[threadIdx.x] = pooled;
}

// out[n][d] = the sum over parts of sums[n][part][d], in order.
__global__ void SumPartsKernel(const float* sums, int64_t candidates, int parts, int dim, float* out) {
  RANKD_GRID_LOOP(i, candidates * dim) {
    int64_t n = i / dim, d = i % dim;
    const float* s = sums + n * parts * dim + d;
    float acc = 0.0f;
    for (int t = 0; t < parts; ++t) acc += s[t * dim];
    out[i] = acc;
  }
}

constexpr int kMaxSharedBytes = SharedFloats(kMaxWidth, kMaxWidth, kMaxWidth) * 4;
constexpr int kMaxMmaSharedBytes = static_cast<int>(
    MmaLayout(kMaxWidth, kMaxWidth, (kMaxLayers - 1) * Pad16(kMaxWidth) * Pad16(kMaxWidth)).total);
static_assert(kMaxMmaSharedBytes <= 227 * 1024, "the widest model's bf16 tile must fit an SM's shared memory");
constexpr int kTilesPerBlock = 4;  // the bf16 kernel: tiles one block scores

// The shared memory a block may have on this device (opted in above the default 48 KB for both
// tile kernels, up to what the widest allowed model needs); 0 before the first prepare.
int shared_limit = 0;

StatusOr<std::shared_ptr<const KernelState>> PrepareTargetAttention(const Node&) {
  static const cudaError_t set = [] {
    int device = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(TileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, std::min(optin, kMaxSharedBytes));
    if (e == cudaSuccess) e = cudaFuncSetAttribute(MmaTileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, std::min(optin, kMaxMmaSharedBytes));
    if (e == cudaSuccess) shared_limit = optin;
    return e;
  }();
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
  for (int i = 0, in = p.width; i + 1 < p.layer_count; in = p.layers[i].out, ++i) {
    p.weight_elems += Pad16(in) * Pad16(p.layers[i].out);
  }
  const size_t mma_shared = MmaLayout(p.dim, p.widest, p.weight_elems).total;
  const size_t shared = static_cast<size_t>(SharedFloats(p.dim, p.width, p.widest)) * 4;
  // With bf16 on the tensor cores, unless its tile (the hidden weights resident) does not fit here.
  const bool mma = k.device->precision == Precision::kBf16 && mma_shared <= static_cast<size_t>(shared_limit);
  if (!mma && shared > static_cast<size_t>(shared_limit)) {
    return Unimplemented(k.node.Describe() + ": needs " + std::to_string(shared) + " bytes of shared memory per block");
  }
  p.tiles_per_block = mma ? kTilesPerBlock : 1;
  p.parts = (p.tiles + p.tiles_per_block - 1) / p.tiles_per_block;
  p.sums = p.parts == 1 ? out.data<float>() : static_cast<float*>(k.scratch);
  p.error = k.device->error;
  p.step = k.step;
  const unsigned blocks = static_cast<unsigned>(candidates * p.parts);
  if (mma) {
    MmaTileKernel<<<blocks, kWarps * kWarp, mma_shared, k.device->stream>>>(p);
  } else {
    TileKernel<<<blocks, kWarps * kWarp, shared, k.device->stream>>>(p);
  }
  if (p.parts > 1) {
    SumPartsKernel<<<Blocks(candidates * p.dim), kThreads, 0, k.device->stream>>>(p.sums, candidates, p.parts, p.dim,
                                                                                 out.data<float>());
  }
  return Launched(k);
}

}  // namespace

void AppendAttentionKernels(KernelTable& out) { out["TargetAttention"] = {TargetAttention, PrepareTargetAttention}; }

}  // namespace rankd::cuda

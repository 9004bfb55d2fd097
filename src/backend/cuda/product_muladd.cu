// Products with a multiply-add epilogue (product_muladd.h): the fused bf16 kernel and the choice
// between it and the product followed by a MulAdd kernel. The CPU twin is cpu/matmul.cc's
// ProductEpilogue.
#include <cuda_bf16.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/activation.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/product_muladd.h"

namespace rankd::cuda {
namespace {

// A block computes a 128 x 128 tile of the output in k-slices of 32, two slices in shared memory
// (the next one copied asynchronously while the tensor cores take this one). Its eight warps take
// 64 x 32 each (2 x 4 of them): 4 x 4 mma tiles of 16 x 8. Shared rows are padded by 8 bf16 (80
// bytes), so the eight rows a fragment load touches fall in distinct banks.
constexpr int kTileM = 128, kTileN = 128, kTileK = 32;
constexpr int kLd = kTileK + 8;
constexpr int kWarps = 8;
constexpr int kBlockThreads = kWarps * 32;

struct ProductMulAddParams {
  const __nv_bfloat16* a;   // [m, k] row-major
  const __nv_bfloat16* w;   // [n, k]: the weight's rows
  const float* bias;        // [n] or null
  const float* multiplier;  // [m, n]
  const float* addend;      // [m, n]
  float* out;               // [m, n]
  __nv_bfloat162* copy;     // [m, n / 2] or null
  int m, n, k;
  Activation activation;
};

struct Stages {
  __nv_bfloat16 a[2][kTileM][kLd];
  __nv_bfloat16 w[2][kTileN][kLd];
};

// 16 bytes from global to shared memory without the registers; none read (zeros written) when
// !valid, `from` still pointing into the operand.
__device__ inline void CopyAsync16(void* to, const void* from, bool valid) {
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(from),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void CommitAsync() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Shared memory written by this thread's copies, but for the last kPending groups, is there (the
// other threads' copies once a __syncthreads follows).
template <int kPending>
__device__ inline void WaitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Queues the copy of k-slice [k0, k0 + kTileK) of A's rows [m0, m0 + kTileM) and W's rows
// [n0, n0 + kTileN) into stage s: per operand 128 rows of four 16-byte chunks, two per thread.
// Chunks past m, n or k read as zeros (k is a multiple of 8, so a chunk is in or out whole).
__device__ void LoadSlice(Stages& st, int s, const ProductMulAddParams& p, int m0, int n0, int k0) {
  for (int c = static_cast<int>(threadIdx.x); c < kTileM * 4; c += kBlockThreads) {
    const int row = c >> 2, col = (c & 3) * 8, k = k0 + col;
    const bool a_in = m0 + row < p.m && k < p.k, w_in = n0 + row < p.n && k < p.k;
    CopyAsync16(&st.a[s][row][col], a_in ? p.a + static_cast<int64_t>(m0 + row) * p.k + k : p.a,
                a_in);
    CopyAsync16(&st.w[s][row][col], w_in ? p.w + static_cast<int64_t>(n0 + row) * p.k + k : p.w,
                w_in);
  }
}

__global__ void __launch_bounds__(kBlockThreads) ProductMulAddKernel(ProductMulAddParams p) {
  __shared__ __align__(16) Stages st;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
  const int m0 = static_cast<int>(blockIdx.y) * kTileM, n0 = static_cast<int>(blockIdx.x) * kTileN;
  float acc[4][4][4] = {};
  const int slices = (p.k + kTileK - 1) / kTileK;
  LoadSlice(st, 0, p, m0, n0, 0);
  CommitAsync();
  for (int slice = 0; slice < slices; ++slice) {
    const int s = slice & 1;
    if (slice + 1 < slices) {
      LoadSlice(st, s ^ 1, p, m0, n0, (slice + 1) * kTileK);
      CommitAsync();
      WaitAsync<1>();  // this slice's copy is done, the next one's may not be
    } else {
      WaitAsync<0>();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __nv_bfloat16* at = &st.a[s][wm + i * 16 + g][kk + 2 * t];
        a[i][0] = Load32(at);
        a[i][1] = Load32(at + 8 * kLd);
        a[i][2] = Load32(at + 8);
        a[i][3] = Load32(at + 8 * kLd + 8);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __nv_bfloat16* at = &st.w[s][wn + j * 8 + g][kk + 2 * t];
        b[j][0] = Load32(at);
        b[j][1] = Load32(at + 8);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) Mma(acc[i][j], a[i], b[j][0], b[j][1]);
      }
    }
    __syncthreads();  // the stage is overwritten by the copy queued in the next iteration
  }
  // The epilogue on the accumulators: two adjacent columns per register pair.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int col = n0 + wn + j * 8 + 2 * t;
    if (col >= p.n) continue;
    const float2 bias =
        p.bias ? *reinterpret_cast<const float2*>(p.bias + col) : make_float2(0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm + i * 16 + g + 8 * h;
        if (row >= p.m) continue;
        const int64_t at = static_cast<int64_t>(row) * p.n + col;
        const float2 m = *reinterpret_cast<const float2*>(p.multiplier + at);
        const float2 c = *reinterpret_cast<const float2*>(p.addend + at);
        const float x = Activate(p.activation, acc[i][j][2 * h] + bias.x);
        const float y = Activate(p.activation, acc[i][j][2 * h + 1] + bias.y);
        const float2 r = make_float2(fmaf(m.x, x, c.x), fmaf(m.y, y, c.y));
        *reinterpret_cast<float2*>(p.out + at) = r;
        if (p.copy) p.copy[at / 2] = __float22bfloat162_rn(r);
      }
    }
  }
}

std::atomic<int> mode_override{-1};

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

ProductMulAddMode CurrentProductMulAddMode() {
  const int forced = mode_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<ProductMulAddMode>(forced);
  static const ProductMulAddMode from_env = [] {
    const char* v = std::getenv("RANKD_CUDA_PRODUCT_MULADD");
    const std::string s = v ? v : "";
    return s == "fused" ? ProductMulAddMode::kFused
           : s == "1"   ? ProductMulAddMode::kTwoKernels
                        : ProductMulAddMode::kOff;
  }();
  return from_env;
}

void SetProductMulAddMode(ProductMulAddMode mode) {
  mode_override.store(static_cast<int>(mode), std::memory_order_relaxed);
}

Status ProductMulAdd(DeviceContext& ctx, const GemmShape& g, const float* a, const float* b,
                     float* out, float alpha, float beta, const float* bias, const float* m,
                     const float* c, void* copy) {
  if (ctx.precision != Precision::kBf16) copy = nullptr;
  const Activation activation = ActivationOf(g.epilogue);
  const bool wanted =
      CurrentProductMulAddMode() == ProductMulAddMode::kFused && ctx.precision == Precision::kBf16;
  const void* weight = wanted ? Bf16WeightRows(ctx, b, g.trans_b) : nullptr;
  const bool fused =
      weight && g.batch == 1 &&
      !g.trans_a && alpha == 1.0f && beta == 0.0f && g.m >= 16 && g.k > 0 && g.k % 8 == 0 &&
      g.n % 2 == 0 && g.m <= INT32_MAX && g.n <= INT32_MAX && g.k <= INT32_MAX &&
      (HasBias(g.epilogue) == (bias != nullptr)) && Aligned(weight, 16) && Aligned(out, 8) &&
      Aligned(m, 8) && Aligned(c, 8) && Aligned(bias, 8) && Aligned(copy, 4);
  if (!fused) {
    RETURN_IF_ERROR(Sgemm(ctx, g, a, b, out, alpha, beta, bias, nullptr));
    return MulAddSameShape(ctx.stream, m, out, c, out, g.m * g.n, copy);
  }
  ASSIGN_OR_RETURN(const void* rows, Bf16Activation(ctx, a, g.m * g.k));
  if (!Aligned(rows, 16)) return Internal("a product's bf16 A operand is not on 16 bytes");
  ProductMulAddParams p{static_cast<const __nv_bfloat16*>(rows),
                        static_cast<const __nv_bfloat16*>(weight),
                        bias,
                        m,
                        c,
                        out,
                        static_cast<__nv_bfloat162*>(copy),
                        static_cast<int>(g.m),
                        static_cast<int>(g.n),
                        static_cast<int>(g.k),
                        activation};
  const dim3 grid(static_cast<unsigned>((g.n + kTileN - 1) / kTileN),
                  static_cast<unsigned>((g.m + kTileM - 1) / kTileM));
  ProductMulAddKernel<<<grid, kBlockThreads, 0, ctx.stream>>>(p);
  return Check(cudaGetLastError(), "ProductMulAddKernel");
}

}  // namespace rankd::cuda

// Products of a few rows with a bf16 weight, in one kernel that streams the weight's rows once
// (small_rows_gemm.cu). cuBLASLt's tiles are built for many rows: at one row it took 4 to 7 µs a
// product, plus a split-K reduction, for weights the memory reads in about 2 (docs/log/benchmarks.md).
// Sgemm (gemm.h) routes bf16 products of at most kSmallRows rows here, and those of at most
// kSmallRows columns taken transposed (Cᵀ = W · Aᵀ: the weight's rows are the few rows, A's rows
// are streamed, the output written through strides).
#pragma once

#include <cstdint>

#include "backend/activation.h"
#include "backend/cuda/device.h"

namespace rankd::cuda {

// Rows up to which a product takes this kernel: the shape buckets of one to eight candidates.
constexpr int64_t kSmallRows = 8;
// A [K, N] weight of up to this many elements also gets a transposed bf16 copy ([N, K]) at load,
// which is what this kernel reads.
constexpr int64_t kSmallRowsMaxTransposed = int64_t{1} << 24;

// y[r, j] = act(alpha · Σ_i A[r, i] · W[j, i] + beta · C[r, j] + bias[j or r]) for r < m, j < n,
// with fp32 operands rounded to bf16 as the cuBLASLt path rounds them and the sums in fp32; y[r, j]
// is element r · row_stride + j · column_stride of C (or D).
struct SmallRowsProduct {
  const void* a = nullptr;  // [m, k] row-major: fp32, or bf16 when a_bf16
  bool a_bf16 = false;
  const void* w = nullptr;  // [n, k] row-major: bf16, or fp32 when w_f32
  bool w_f32 = false;
  const float* bias = nullptr;  // [n], [m] when bias_by_row, or null
  bool bias_by_row = false;
  float alpha = 1.0f, beta = 0.0f;  // beta != 0: C holds its addend (read before it is written)
  Activation activation = Activation::kNone;
  int64_t m = 0, n = 0, k = 0;
  int64_t row_stride = 0, column_stride = 1;  // row_stride 0: n
  float* c = nullptr;                         // fp32 output (and addend), or
  void* d = nullptr;                          // bf16 output (then c is not written)
};

// Whether the kernel takes this product: 1 to kSmallRows rows, k a multiple of 8, A and W
// 16-byte aligned.
bool SmallRowsFit(const SmallRowsProduct& p);

Status SmallRowsGemm(cudaStream_t stream, const SmallRowsProduct& p);

}  // namespace rankd::cuda

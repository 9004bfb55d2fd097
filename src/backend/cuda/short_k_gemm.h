// Products over a short k (fewer than kShortK), such as W1's first bottom layer over its 13 dense
// features. Tensor cores gain nothing there, and with bf16 precision cuBLASLt's path took three
// launches at 64 rows (A's conversion, the product, a split-K reduction: 10 µs on an H200). This
// kernel takes such a product of up to kShortKMaxRows rows in one launch, a thread per output,
// its operands rounded to bf16 as the cuBLASLt path rounds them and the sums in fp32, so a bf16
// copy of A its producer wrote gives the same bits (short_k_gemm.cu).
#pragma once

#include <cstdint>

#include "backend/activation.h"
#include "backend/cuda/device.h"

namespace rankd::cuda {

// k below this takes the kernel (bf16 precision, Sgemm in gemm.h), up to kShortKMaxRows rows:
// a thread per output loses to cuBLASLt on many rows (W1's first layer under ncu on an H200:
// 5.7 against 7.1 µs at 512 rows, 182 against 37 µs at 32,768).
constexpr int64_t kShortK = 16;
constexpr int64_t kShortKMaxRows = 512;

// y[r, j] = act(alpha · Σ_i A[r, i] · W(i, j) + beta · C[r, j] + bias[j]) for r < m, j < n.
struct ShortKProduct {
  const void* a = nullptr;  // [m, k] row-major: fp32, or bf16 when a_bf16 (its producer's copy)
  bool a_bf16 = false;
  const float* w = nullptr;  // fp32 W(i, j) at w[i · n + j] ([k, n]), or at w[j · k + i] when w_nk ([n, k])
  bool w_nk = false;
  const float* bias = nullptr;      // [n], or null
  float alpha = 1.0f, beta = 0.0f;  // beta != 0: C holds its addend (read before it is written)
  Activation activation = Activation::kNone;
  int64_t m = 0, n = 0, k = 0;
  float* c = nullptr;  // fp32 output [m, n] (and addend), or
  void* d = nullptr;   // bf16 output (then c is not written)
};

Status ShortKGemm(cudaStream_t stream, const ShortKProduct& p);

}  // namespace rankd::cuda

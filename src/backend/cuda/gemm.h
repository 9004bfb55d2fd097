// Row-major fp32 matrix products through cuBLASLt, with the plan (descriptors, layouts and an
// algorithm) cached per shape in the executor, so a warmed shape costs one call. The algorithm is
// the fastest of the heuristic's first kGemmCandidates, timed on the first product of the shape
// (at warm-up, before any capture) by the first executor to meet it, and taken by the others.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "backend/activation.h"
#include "backend/cuda/device.h"

namespace rankd::cuda {

// GELU: the tanh approximation. cuBLASLt has no sigmoid: Sgemm applies it after the product
// unless its own kernel runs the product.
enum class Epilogue { kNone, kBias, kBiasRelu, kRelu, kBiasGelu, kGelu, kBiasSigmoid, kSigmoid };

inline bool HasBias(Epilogue e) {
  return e == Epilogue::kBias || e == Epilogue::kBiasRelu || e == Epilogue::kBiasGelu || e == Epilogue::kBiasSigmoid;
}

// The epilogue of a product with or without a bias row and with the fused activation.
inline Epilogue EpilogueOf(bool bias, Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return bias ? Epilogue::kBiasRelu : Epilogue::kRelu;
    case Activation::kGeluTanh:
      return bias ? Epilogue::kBiasGelu : Epilogue::kGelu;
    case Activation::kSigmoid:
      return bias ? Epilogue::kBiasSigmoid : Epilogue::kSigmoid;
    case Activation::kNone:
      break;
  }
  return bias ? Epilogue::kBias : Epilogue::kNone;
}

// The activation an epilogue applies (EpilogueOf's inverse, less the bias).
inline Activation ActivationOf(Epilogue e) {
  if (e == Epilogue::kBiasRelu || e == Epilogue::kRelu) return Activation::kRelu;
  if (e == Epilogue::kBiasGelu || e == Epilogue::kGelu) return Activation::kGeluTanh;
  if (e == Epilogue::kBiasSigmoid || e == Epilogue::kSigmoid) return Activation::kSigmoid;
  return Activation::kNone;
}

// Algorithms the heuristic is asked for per product shape; they are timed on first use.
constexpr int kGemmCandidates = 6;

// Turns the timed choice off (the heuristic's first is kept) or on again, for products whose
// shape is first met from now on; RANKD_GEMM_TUNING=0 keeps it off. For tests that count
// launches: a choice by timing may pick a split-K algorithm, one launch more, by a margin of noise.
void EnableGemmTuning(bool on);

// The products the process has timed, and those an executor took from another's timing (each
// timed once a process, per device: gemm.cc).
struct GemmTunings {
  int64_t timed = 0, reused = 0;
};
GemmTunings CountGemmTunings();

// What a cached product writes: fp32, or bf16 with a bf16 or an fp32 bias.
enum class GemmOutput { kF32, kBf16, kBf16F32Bias };

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch items; 0 broadcasts
  Epilogue epilogue = Epilogue::kNone;
};

// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (+ bias[n]) (then ReLU, GELU or sigmoid), all dense row-major:
// A is m x k (k x m when trans_a), B is k x n (n x k when trans_b), C is m x n. With bf16
// precision A and B are rounded to bf16 first (a weight's bf16 copy is used as is), into
// ctx.bf16_operands, which must hold Bf16OperandBytes of both. With `bf16_d` (bf16 precision) the
// result goes there in bf16 instead of to C (bf16_copies.h), with the bias's bf16 copy where it has
// one, or, where cuBLASLt cannot write it so (beta != 0, no algorithm, a sigmoid after it), to C
// and then converted there. Products the few-rows kernel takes (small_rows_gemm.h) skip cuBLASLt,
// and so do products over a short k (short_k_gemm.h), which round their operands as they read them,
// and products whose output tiles are too few to fill the GPU (split_k_gemm.h).
Status Sgemm(DeviceContext& ctx, const GemmShape& shape, const float* a, const float* b, float* c, float alpha,
             float beta, const float* bias = nullptr, void* bf16_d = nullptr);

// Whether Sgemm runs this product (bf16 precision) in one of its own kernels (few rows or
// columns, small_rows_gemm.h; a short k, short_k_gemm.h), which, unlike cuBLASLt, take a bias on
// an output of one column.
bool OwnProductKernel(const DeviceContext& ctx, const GemmShape& shape, const float* a, const float* b, float* c);

// The model's bf16 copy of weight matrix b as [N, K] rows (its own copy when trans_b, else the
// transposed one), or null where it holds none (not bf16 precision, a computed B, a [K, N]
// weight of more than kSmallRowsMaxTransposed elements).
const void* Bf16WeightRows(const DeviceContext& ctx, const float* b, bool trans_b);

// Bytes an operand of `elements` values takes in the bf16 operand buffer.
inline size_t Bf16OperandBytes(int64_t elements) { return (static_cast<size_t>(elements) * 2 + 255) / 256 * 256; }

class GemmCache {
 public:
  GemmCache() = default;
  GemmCache(const GemmCache&) = delete;
  GemmCache& operator=(const GemmCache&) = delete;
  ~GemmCache();

  // Transposes, m, n, k, batch, strides, epilogue, alignment, precision, output (GemmOutput).
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int>;
  struct Entry {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    // The heuristic's runners-up, until the first product with this entry times them against its
    // first choice and keeps the fastest in `algo` (RANKD_GEMM_TUNING=0: never).
    std::vector<cublasLtMatmulAlgo_t> untried;
    bool unsupported = false;  // no algorithm for this key (a bf16 output): computed another way
  };
  std::map<Key, Entry> entries;
};

}  // namespace rankd::cuda

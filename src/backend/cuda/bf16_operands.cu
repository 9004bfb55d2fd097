// Converting fp32 product operands to bf16 for the bf16 tensor-core path of Sgemm (gemm.cc), rows
// padded with zeros where k is not a multiple of 8, and
// the sigmoid Sgemm applies after a cuBLASLt product (which has no such epilogue).
#include <cuda_bf16.h>

#include "backend/activation.h"
#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"

namespace rankd::cuda {
namespace {

// Two values per thread step: one 8-byte load, one 4-byte store.
__global__ void ConvertPairsKernel(const float2* in, __nv_bfloat162* out, int64_t pairs) {
  RANKD_GRID_LOOP(i, pairs) out[i] = __float22bfloat162_rn(in[i]);
}

__global__ void ConvertKernel(const float* in, __nv_bfloat16* out, int64_t n) {
  RANKD_GRID_LOOP(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

// Row r's k values, then zeros up to `padded`: a thread per output element.
__global__ void ConvertPaddedKernel(const float* in, __nv_bfloat16* out, int64_t rows, int64_t k, int64_t padded) {
  RANKD_GRID_LOOP(i, rows * padded) {
    const int64_t r = i / padded, c = i - r * padded;
    out[i] = c < k ? __float2bfloat16_rn(in[r * k + c]) : __float2bfloat16_rn(0.0f);
  }
}

__global__ void SigmoidKernel(float* x, __nv_bfloat16* copy, int64_t n) {
  RANKD_GRID_LOOP(i, n) {
    const float y = Activate(Activation::kSigmoid, x[i]);
    x[i] = y;
    if (copy) copy[i] = __float2bfloat16_rn(y);
  }
}

}  // namespace

Status SigmoidInPlace(cudaStream_t stream, float* x, void* bf16_copy, int64_t n) {
  if (n <= 0) return Status::Ok();
  SigmoidKernel<<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<__nv_bfloat16*>(bf16_copy), n);
  return Check(cudaGetLastError(), "SigmoidInPlace");
}

Status ConvertToBf16(cudaStream_t stream, const float* in, void* out, int64_t n) {
  if (n <= 0) return Status::Ok();
  bool paired = n % 2 == 0 && reinterpret_cast<uintptr_t>(in) % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0;
  if (paired) {
    ConvertPairsKernel<<<Blocks(n / 2), kThreads, 0, stream>>>(reinterpret_cast<const float2*>(in),
                                                               static_cast<__nv_bfloat162*>(out), n / 2);
  } else {
    ConvertKernel<<<Blocks(n), kThreads, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), n);
  }
  return Check(cudaGetLastError(), "ConvertToBf16");
}

Status ConvertToBf16Padded(cudaStream_t stream, const float* in, void* out, int64_t rows, int64_t k, int64_t padded) {
  if (rows <= 0 || padded <= 0) return Status::Ok();
  ConvertPaddedKernel<<<Blocks(rows * padded), kThreads, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), rows, k,
                                                                      padded);
  return Check(cudaGetLastError(), "ConvertToBf16Padded");
}

}  // namespace rankd::cuda

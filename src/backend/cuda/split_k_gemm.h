// Products of tens to hundreds of rows over a long k, in one Hopper kernel of rankd's own
// (split_k_gemm.cu). W1's down-projections (k = 3,456 to 512 columns) and its top MLP's first
// layer (to 1,024) at 64 to 256 pairs make 4 to 16 output tiles of 128 × 128: cuBLASLt split k
// and launched a reduction after (W1 at 64 pairs: 6.4 + 3.0 µs a down-projection, docs/log/benchmarks.md).
// Here a tile's k is split over the eight blocks of a thread block cluster, each loading its
// share with TMA into a pipeline of stages and multiplying with wgmma; the blocks then add their
// sums through distributed shared memory, each finishing a slice of the tile's rows (bias,
// activation, fp32 or bf16 out). One launch, no workspace, and the sums' order is fixed.
#pragma once

#include <cstdint>

#include "backend/activation.h"
#include "backend/cuda/device.h"

namespace rankd::cuda {

// y[r, j] = act(Σ_i A[r, i] · W[j, i] + bias[j]) for r < m, j < n, the sums in fp32.
struct SplitKProduct {
  const void* a = nullptr;      // [m, k] bf16, row-major
  const void* w = nullptr;      // [n, k] bf16, row-major (a weight's [N, K] rows)
  const float* bias = nullptr;  // [n], or null
  Activation activation = Activation::kNone;
  int64_t m = 0, n = 0, k = 0;
  float* c = nullptr;  // fp32 output [m, n], or
  void* d = nullptr;   // bf16 output [m, n] (then c is not written)
};

// Whether the kernel takes p: an sm_90 device (and a build for sm_90a), n a multiple of 128, k of
// 64 and at least 2,048, operands 16-byte aligned, and no more tiles than clusters of eight
// blocks the device runs at once (more tiles: cuBLASLt's kernels were faster).
bool SplitKFits(const SplitKProduct& p);

Status SplitKGemm(cudaStream_t stream, const SplitKProduct& p);

// Sets the kernel up (its shared memory, the clusters that fit at once) outside any capture.
void PrepareSplitKGemm();

// For tests: false leaves every product to cuBLASLt (as RANKD_SPLIT_K=0 does); how many products
// ran as this kernel.
void EnableSplitKGemm(bool on);
int64_t SplitKGemmRuns();

}  // namespace rankd::cuda

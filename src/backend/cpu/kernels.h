// Registration hooks of the CPU kernel families, and helpers they share.
#pragma once

#include <map>
#include <string>

#include "backend/backend.h"

namespace rankd::cpu {

void AppendElementwiseKernels(KernelTable& out);
void AppendTensorKernels(KernelTable& out);
void AppendMatMulKernels(KernelTable& out);
void AppendNormalizationKernels(KernelTable& out);
void AppendReduceKernels(KernelTable& out);
void AppendEmbeddingKernels(KernelTable& out);
void AppendKeyedRowsKernel(KernelTable& out);
void AppendFusedElementwiseKernel(KernelTable& out);
void AppendAttentionKernels(KernelTable& out);
void AppendSoftmaxAttentionKernels(KernelTable& out);
void AppendDotInteractionKernels(KernelTable& out);
void AppendStringKernels(KernelTable& out);

// C[m,n] = alpha * op(A) op(B) + beta * C, all row-major and dense, through the multi-threaded
// sgemm (single-threaded when called inside a parallel region or under kOneThreadSgemmMacs
// multiply-adds).
constexpr int64_t kOneThreadSgemmMacs = int64_t{1} << 20;
void Sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
           float alpha, float beta);

// out = permute(in, perm), both dense row-major; elem_size bytes per element.
void TransposeBytes(const void* in, const Shape& in_shape, const std::vector<int64_t>& perm, size_t elem_size,
                    void* out);

}  // namespace rankd::cpu

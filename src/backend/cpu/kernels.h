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
void AppendFusedElementwiseKernel(KernelTable& out);

// out = permute(in, perm), both dense row-major; elem_size bytes per element.
void TransposeBytes(const void* in, const Shape& in_shape, const std::vector<int64_t>& perm,
                    size_t elem_size, void* out);

}  // namespace rankd::cpu

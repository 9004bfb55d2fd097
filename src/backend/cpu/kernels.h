// Registration hooks of the CPU kernel families, and helpers they share.
#pragma once

#include <map>
#include <string>

#include "backend/backend.h"

namespace rankd::cpu {

void AppendElementwiseKernels(std::map<std::string, KernelFn>& out);
void AppendTensorKernels(std::map<std::string, KernelFn>& out);
void AppendMatMulKernels(std::map<std::string, KernelFn>& out);
void AppendNormalizationKernels(std::map<std::string, KernelFn>& out);
void AppendReduceKernels(std::map<std::string, KernelFn>& out);
void AppendEmbeddingKernels(std::map<std::string, KernelFn>& out);
void AppendFusedElementwiseKernel(std::map<std::string, KernelFn>& out);

// out = permute(in, perm), both dense row-major; elem_size bytes per element.
void TransposeBytes(const void* in, const Shape& in_shape, const std::vector<int64_t>& perm,
                    size_t elem_size, void* out);

}  // namespace rankd::cpu

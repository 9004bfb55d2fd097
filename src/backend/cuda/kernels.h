// Registration hooks of the CUDA kernel families, and device helpers they share. Host-only header.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/geometry.h"

namespace rankd::cuda {

void AppendElementwiseKernels(KernelTable& out);
void AppendTensorKernels(KernelTable& out);
void AppendMatMulKernels(KernelTable& out);
void AppendNormalizationKernels(KernelTable& out);
void AppendReduceKernels(KernelTable& out);
void AppendEmbeddingKernels(KernelTable& out);
void AppendKeyedRowsKernel(KernelTable& out);
void AppendEmbeddingConcatKernels(KernelTable& out);
void AppendFusedElementwiseKernel(KernelTable& out);
void AppendAttentionKernels(KernelTable& out);
void AppendSoftmaxAttentionKernels(KernelTable& out);
void AppendDotInteractionKernels(KernelTable& out);
void AppendStringKernels(KernelTable& out);

// out[idx] = in[base + sum(idx_d * strides_d)] over out_shape, elements of elem_size bytes, on the
// executor's stream. Strides may be 0 (broadcast) or negative (reversed slices).
Status StridedCopy(const KernelArgs& k, const void* in, int64_t base, const Shape& strides, const Shape& out_shape,
                   size_t elem_size, void* out);
// out = permute(in, perm), both dense row-major.
Status TransposeDevice(const KernelArgs& k, const void* in, const Shape& in_shape, const std::vector<int64_t>& perm,
                       size_t elem_size, void* out);
// Broadcasts `in` (numpy rules) into the dense `out_shape`.
Status BroadcastCopy(const KernelArgs& k, const Tensor& in, const Shape& out_shape, void* out);

}  // namespace rankd::cuda

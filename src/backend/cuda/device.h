// What CUDA kernels share: the per-executor DeviceContext, error checking, launch sizes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace rankd {

namespace cuda {
class GemmCache;
}

// A table's device cache as lookup kernels read it (cuda/row_cache.h): slot_of_row[row] is the
// row's slot in `slots` ([capacity, the table's width], the table's dtype), or -1 for a row read
// from the table itself. Both are read past the SM's L1 (__ldcg), whose lines are not kept
// coherent with a slot's new row. Null slot_of_row: no cache.
//
// A lookup whose ids the host placed (runtime/cuda/placed_ids.h) reads `staged` too, the run's rows
// the host gathered for it: an id below -1 is then no id but a staged row, -2 - its offset in
// `staged` in kStagedUnitBytes units (kStagedSlotFrom + that offset is the slot the kernel reads it
// as); -1 is an empty slot of a bag, and an id from 0 up is read as ever. The rows of a table in
// host memory gathered on the device for a run (cuda/host_row_gather.h) are read the same way,
// from a view with no cache and `staged` in device memory.
struct RowCacheView {
  const int32_t* slot_of_row = nullptr;
  const void* slots = nullptr;
  const void* staged = nullptr;  // placed ids only
};
constexpr int32_t kStagedSlotFrom = int32_t{1} << 30;
constexpr size_t kStagedUnitBytes = 16;

// The device caches of a model's tables: by the table's address as kernels see it, the index of
// its view in `views` (host) and `device_views` (the same array in device memory).
struct RowCaches {
  std::unordered_map<const void*, int> index_of;
  std::vector<RowCacheView> views;
  const RowCacheView* device_views = nullptr;

  // The cache of the table kernels read at `table`: its index, or -1.
  int Find(const void* table) const {
    auto it = index_of.find(table);
    return it == index_of.end() ? -1 : it->second;
  }
};

// One executor's device state; kernels launch on `stream` and nothing else.
struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;
  size_t lt_workspace_bytes = 0;
  // A device word: 0, or 1 + the index of the first step that met bad data (an id out of range).
  int* error = nullptr;
  cuda::GemmCache* gemm = nullptr;
  const RowCaches* row_caches = nullptr;  // the model's table caches (never null in a run)
  // The run's placed ids (runtime/cuda/placed_ids.h): where they lie on the device, sorted (null:
  // none), and the rows staged for them, mapped host memory the kernels read in place.
  const std::vector<const void*>* placed_ids = nullptr;
  const void* staged_rows = nullptr;
  // The run's ids of tables in host memory gathered on the device (cuda/host_row_gather.h):
  // where they lie, sorted (null: none), and the rows gathered for them in device memory.
  const std::vector<const void*>* gathered_ids = nullptr;
  const void* gathered_rows = nullptr;
  Precision precision = Precision::kFp32;  // how fp32 products may round (backend.h)
  // With bf16: the model's weight matrices in bf16 (fp32 device copy -> bf16 copy), and a buffer
  // that products convert their other operands into (sized by the executor before any run).
  const std::unordered_map<const void*, const void*>* bf16_weights = nullptr;
  const std::unordered_map<const void*, const void*>* bf16_weights_nk = nullptr;  // [K, N] ones as [N, K]
  // Weights whose k is not a multiple of 8, in bf16 with k padded by zeros (PaddedK), laid out
  // as the fp32 copy is ([K, N] or [N, K]).
  const std::unordered_map<const void*, const void*>* bf16_weights_padded = nullptr;
  void* bf16_operands = nullptr;
  size_t bf16_operand_bytes = 0;
  // Set for the step being launched (bf16_copies.h): where it writes a bf16 copy of its first
  // output (null: no copy wanted), beside the fp32 result or, with bf16_out_alone, instead of it
  // (a product writing bf16 always writes the copy alone); and bf16 copies, already written, of
  // the fp32 arrays bf16_a_source, bf16_b_source and bf16_c_source, for a step whose first,
  // second or third input that is (a product's A operand, a MulAdd's factors and addend).
  void* bf16_out = nullptr;
  bool bf16_out_alone = false;
  const void* bf16_a_source = nullptr;
  const void* bf16_a = nullptr;
  const void* bf16_b_source = nullptr;
  const void* bf16_b = nullptr;
  const void* bf16_c_source = nullptr;
  const void* bf16_c = nullptr;
};

namespace cuda {

// OK; Unavailable for out of device memory (the request may succeed later or alone); else
// Internal naming the failed call and CUDA's message, the error noted if sticky (device_health.h).
Status Check(cudaError_t error, const char* what);
// The cuBLASLt workspace each executor holds.
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
// After a launch: OK, or Internal naming the node (bad launch configuration, say).
Status Launched(const KernelArgs& k);
// out[i] = bf16(in[i]) for i < n, rounded to nearest even, on `stream`.
Status ConvertToBf16(cudaStream_t stream, const float* in, void* out, int64_t n);
// The rows of an fp32 [rows, k] matrix in bf16 as [rows, padded], zeros after column k.
Status ConvertToBf16Padded(cudaStream_t stream, const float* in, void* out, int64_t rows, int64_t k, int64_t padded);
// k rounded up to a multiple of 8: a bf16 row of that many values is 16-byte aligned, which
// cuBLASLt's Hopper kernels need (with k = 13 it fell back to an sm75 kernel, 33 µs for W1's
// first layer at 32,768 rows).
inline int64_t PaddedK(int64_t k) { return (k + 7) / 8 * 8; }
// An operand of MulAddArrays: fp32, or its producer's bf16 copy where `bf16` is set.
struct MulAddOperand {
  const float* f32 = nullptr;
  const void* bf16 = nullptr;
};
// out[i] = a[i] * b[i] + c[i] for i < n (out may be a, b or c; null: the bf16 copy alone), and
// bf16_copy[i] = bf16(out[i]) when bf16_copy is set, on `stream`.
Status MulAddArrays(cudaStream_t stream, MulAddOperand a, MulAddOperand b, MulAddOperand c, float* out, int64_t n,
                    void* bf16_copy);
// x[i] = sigmoid(x[i]) for i < n (a product's epilogue cuBLASLt lacks), and bf16_copy[i] =
// bf16(x[i]) when bf16_copy is set, on `stream`.
Status SigmoidInPlace(cudaStream_t stream, float* x, void* bf16_copy, int64_t n);

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n items.
inline unsigned Blocks(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 65535 * 16));
}

}  // namespace cuda
}  // namespace rankd

#define RANKD_CUDA_RETURN(expr) RANKD_RETURN_IF_ERROR(::rankd::cuda::Check((expr), #expr))

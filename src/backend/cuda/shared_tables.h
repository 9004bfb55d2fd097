// Tables shared by every model state that reads them (the replicas of a model, docs/replicas.md):
// in host memory, read by the GPUs in place, or whole on one GPU, read by the others over NVLink.
//
// A table kept in host memory (embedding/table_budget.h's host tier) is page-locked and mapped
// into every device's address space once for the process (cudaHostRegisterPortable or
// cudaHostAllocPortable), however many replicas of a model read it: a model replicated on two GPUs
// holds one host copy, not two (docs/replicas.md). Each MapHostTable is paired with one
// UnmapHostTable; the last unpins or frees. Called with every capture gate held (both may
// synchronise every device). Thread-safe.
#pragma once

#include <cstddef>

#include "rankd/status.h"

namespace rankd::cuda {

// The device address (valid on every GPU) of the `bytes` bytes at `at`, page-locked in place, or
// copied once into page-locked memory when `copy` (a range in a memory-mapped file: pinning
// page-cache pages made the kernel spin for minutes on an H200 host) or when it cannot be locked
// (a page already locked for a neighbouring table).
StatusOr<void*> MapHostTable(const void* at, size_t bytes, bool copy);
// Gives back one MapHostTable of `at`.
void UnmapHostTable(const void* at);

// The address on GPU `gpu` of a copy of the `bytes` bytes at `at` (host memory), made there once for
// the process, readable by kernels on GPU `reader` (peer access enabled from `reader` to `gpu` when
// they differ). InvalidArgument when `reader` cannot read `gpu`'s memory.
StatusOr<void*> MapGpuTable(const void* at, size_t bytes, int gpu, int reader);
// Gives back one MapGpuTable of `at` on `gpu`; the last frees the copy.
void UnmapGpuTable(const void* at, int gpu);

}  // namespace rankd::cuda

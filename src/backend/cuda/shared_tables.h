// Tables shared by every model state that reads them (the replicas of a model, docs/replicas.md):
// in host memory, read by the GPUs in place, or on named GPUs (its rows split over them), read by
// the others over NVLink.
//
// A table kept in host memory (embedding/table_budget.h's host tier) is page-locked and mapped
// into every device's address space once for the process (cudaHostRegisterPortable, in place or
// of a copy in huge pages), however many replicas of a model read it: a model replicated on two GPUs
// holds one host copy, not two (docs/replicas.md). Each MapHostTable is paired with one
// UnmapHostTable; the last unpins or frees. Called with every capture gate held (both may
// synchronise every device). Thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "rankd/status.h"

namespace rankd::cuda {

// The device address (valid on every GPU) of the `bytes` bytes at `at`, page-locked in place, or
// copied once (by every core, into transparent huge pages) and the copy page-locked when `copy` (a range in a
// memory-mapped file: pinning page-cache pages made the kernel spin for minutes on an H200 host) or when it cannot be
// locked (a page already locked for a neighbouring table).
StatusOr<void*> MapHostTable(const void* at, size_t bytes, bool copy);
// Gives back one MapHostTable of `at`.
void UnmapHostTable(const void* at);
// Where the host reads the bytes a MapHostTable of `at` mapped: `at`, or its page-locked copy
// (the same bytes, which the host reads without touching a file). Null when `at` is not mapped.
const void* MappedHostBytes(const void* at);

// The device address of a copy of the `bytes` bytes at `at` (host memory) spread over `gpus`, made
// once for the process: one address range (CUDA's virtual memory management) whose equal parts, in
// order, are each backed by one GPU's memory, so kernels index it as one array and the rows on
// another GPU are read over NVLink. Readable by kernels on GPU `reader` (access granted on first
// use). InvalidArgument when `reader` cannot read one of `gpus` (no peer access).
StatusOr<void*> MapGpuTable(const void* at, size_t bytes, const std::vector<int>& gpus, int reader);
// Gives back one MapGpuTable of `at` on `gpus`; the last frees the copy.
void UnmapGpuTable(const void* at, const std::vector<int>& gpus);

}  // namespace rankd::cuda

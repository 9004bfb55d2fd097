// Host-memory tables read by the GPU in place, shared by every model state that reads them.
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

}  // namespace rankd::cuda

// The CUDA backend's process-wide settings that are not per model: set by rankd's `--cuda` flags
// (runtime/cuda/cuda_options.h) before the backend is first used; the A/B ones may change between
// runs. Defaults are what the benchmarks chose (docs/cuda.md, "Settings").
#pragma once

#include <cstdint>
#include <string>

#include "rankd/status.h"

namespace rankd::cuda {

// Programmatic dependent launch between kernels of a plan (dependent_launch.cuh). On by default.
void SetDependentLaunches(bool on);
bool DependentLaunches();

// One stderr line per product shape tuned (gemm.cc), naming the candidate chosen. Off by default.
void SetGemmLog(bool on);
bool GemmLog();

// Pinned host memory for request tensors (pinned_pool.h), in MiB; 0 turns the pool off. 2048 by
// default. InvalidArgument for another size once the pool exists (the CUDA backend makes it when it starts).
Status SetPinnedPoolMb(int64_t mb);
int64_t PinnedPoolMb();

// The bf16 attention kernel's strips of 16 positions scored with each weight fragment read from
// shared memory (attention_mma.cu): 1 or 2, a warp's, or 4 (the default), the block's four warps'
// in wgmma's products (sm_90a; 1 elsewhere).
void SetAttentionStrips(int strips);
int AttentionStrips();

// A directory where generated kernels are kept across processes (runtime_compiler.h); empty (the
// default) keeps them in memory only.
void SetKernelCacheDir(const std::string& dir);
std::string KernelCacheDir();

}  // namespace rankd::cuda

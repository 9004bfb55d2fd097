// The CUDA backend's process-wide settings as one options struct, given on rankd's command line
// as `--cuda KEY=VALUE` (repeatable; docs/cuda.md, "Settings"). Applied before the backend is
// first used; most are A/B switches whose defaults the benchmarks chose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankd/status.h"

namespace rankd {

struct CudaOptions {
  int64_t pinned_pool_mb = 2048;       // pinned_pool: pinned host memory for request tensors; 0: off
  int staging_helpers = -1;            // threads helping a request's host work; -1: cores - 1, at most 3
  std::string kernel_cache_dir;        // generated kernels kept here across processes; empty: none
  int graph_lanes = 4;                 // streams a captured plan's independent steps may use (1-16)
  bool copy_kernels = true;            // small runs move inputs and outputs by kernels, not copy nodes
  int64_t copy_kernel_mb = 8;          // ... runs of at most this many MiB of inputs
  bool late_gather = true;             // ... and gather their ids beside the floats' first steps
  bool merged_gather = true;           // ... and a merged batch's ids from its requests' tensors
  bool dependent_launches = true;      // programmatic dependent launch between a plan's kernels
  bool gemm_tuning = true;             // cuBLASLt's candidates timed once per product shape
  bool gemm_log = false;               // a stderr line per tuned product shape
  bool split_k = true;                 // rankd's split-K product kernel where it won
  int attention_strips = 4;            // 16-position strips read each weight of the bf16 attention kernel (1, 2, 4)
  std::string device_wait = "poller";  // how a run's thread waits for the device: spin, block, nap or poller
  int poll_us = 10;                    // device_wait=poller: microseconds between a GPU's poller's rounds
  int64_t placed_ids_from = 262144;    // runs with this many cached tables' ids have them placed by the host; -1: none
  int64_t staged_rows_mb = 256;        // an executor's room for the rows placed ids stage; 0: none
  int64_t gathered_rows_mb = 0;        // an executor's device room for rows of host tables it gathers; 0: none
  // Fault injection (backend/cuda/faults.h), only in builds with RANKD_FAULT_INJECTION; -1: off.
  int64_t fault_fail_allocations_over_mb = -1;
  int64_t fault_poison_after_runs = -1;
  int64_t fault_poison_device = -1;
  int64_t fault_poison_simulated = -1;
  int64_t fault_device_mb = -1;
  int64_t fault_host_mb = -1;
};

// Sets one option from "key=value" (booleans: on/off, true/false, 1/0); InvalidArgument names an
// unknown key or a bad value.
Status ParseCudaOption(const std::string& key_value, CudaOptions& options);
StatusOr<CudaOptions> ParseCudaOptions(const std::vector<std::string>& key_values);

// Applies `options` to the process. InvalidArgument when the pinned pool or the helpers already run
// with other sizes; a build without CUDA accepts only the defaults.
Status ApplyCudaOptions(const CudaOptions& options);

}  // namespace rankd

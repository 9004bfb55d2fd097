#include "runtime/cuda_options.h"

#include <charconv>

#include "common/helping_pool.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/faults.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/settings.h"
#include "backend/cuda/split_k_gemm.h"
#include "runtime/cuda/cuda_executor.h"
#endif

namespace rankd {
namespace {

StatusOr<bool> ParseSwitch(const std::string& key, const std::string& value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  return InvalidArgument("--cuda " + key + ": expected on or off, got '" + value + "'");
}

StatusOr<int64_t> ParseCount(const std::string& key, const std::string& value, int64_t lo, int64_t hi) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi) {
    return InvalidArgument("--cuda " + key + ": expected an integer from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", got '" + value + "'");
  }
  return n;
}

}  // namespace

Status ParseCudaOption(const std::string& key_value, CudaOptions& o) {
  const size_t eq = key_value.find('=');
  if (eq == std::string::npos) return InvalidArgument("--cuda takes KEY=VALUE, got '" + key_value + "'");
  const std::string key = key_value.substr(0, eq), value = key_value.substr(eq + 1);
  bool* flag = key == "copy_kernels"         ? &o.copy_kernels
               : key == "late_gather"        ? &o.late_gather
               : key == "merged_gather"      ? &o.merged_gather
               : key == "dependent_launches" ? &o.dependent_launches
               : key == "gemm_tuning"        ? &o.gemm_tuning
               : key == "gemm_log"           ? &o.gemm_log
               : key == "split_k"            ? &o.split_k
                                             : nullptr;
  if (flag) {
    RANKD_ASSIGN_OR_RETURN(*flag, ParseSwitch(key, value));
  } else if (key == "pinned_pool_mb") {
    RANKD_ASSIGN_OR_RETURN(o.pinned_pool_mb, ParseCount(key, value, 0, int64_t{1} << 20));
  } else if (key == "staging_helpers") {
    RANKD_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, value, 0, 64));
    o.staging_helpers = static_cast<int>(n);
  } else if (key == "attention_strips") {
    if (value != "1" && value != "2" && value != "4") {
      return InvalidArgument("--cuda attention_strips: expected 1, 2 or 4, got '" + value + "'");
    }
    o.attention_strips = value[0] - '0';
  } else if (key == "graph_lanes") {
    RANKD_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, value, 1, 16));
    o.graph_lanes = static_cast<int>(n);
  } else if (key == "device_wait") {
    if (value != "spin" && value != "block" && value != "nap" && value != "poller")
      return InvalidArgument("--cuda device_wait: expected spin, block, nap or poller, got '" + value + "'");
    o.device_wait = value;
  } else if (key == "poll_us") {
    RANKD_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, value, 1, 1000));
    o.poll_us = static_cast<int>(n);
  } else if (key == "placed_ids_from") {
    RANKD_ASSIGN_OR_RETURN(o.placed_ids_from, ParseCount(key, value, -1, int64_t{1} << 40));
  } else if (key == "copy_kernel_mb") {
    RANKD_ASSIGN_OR_RETURN(o.copy_kernel_mb, ParseCount(key, value, 0, int64_t{1} << 10));
  } else if (key == "staged_rows_mb") {
    RANKD_ASSIGN_OR_RETURN(o.staged_rows_mb, ParseCount(key, value, 0, int64_t{1} << 14));
  } else if (key == "gathered_rows_mb") {
    RANKD_ASSIGN_OR_RETURN(o.gathered_rows_mb, ParseCount(key, value, 0, int64_t{1} << 14));
  } else if (key == "kernel_cache_dir") {
    o.kernel_cache_dir = value;
  } else if (key.starts_with("fault_")) {
#if RANKD_FAULT_INJECTION
    int64_t* fault = key == "fault_fail_allocations_over_mb" ? &o.fault_fail_allocations_over_mb
                     : key == "fault_poison_after_runs"      ? &o.fault_poison_after_runs
                     : key == "fault_poison_device"          ? &o.fault_poison_device
                     : key == "fault_poison_simulated"       ? &o.fault_poison_simulated
                     : key == "fault_device_mb"              ? &o.fault_device_mb
                     : key == "fault_host_mb"                ? &o.fault_host_mb
                                                             : nullptr;
    if (!fault) return InvalidArgument("--cuda: unknown fault '" + key + "'");
    RANKD_ASSIGN_OR_RETURN(*fault, ParseCount(key, value, 0, int64_t{1} << 30));
#else
    return InvalidArgument("--cuda " + key +
                           ": fault injection is only in builds configured with RANKD_FAULT_INJECTION");
#endif
  } else {
    return InvalidArgument(
        "--cuda: unknown setting '" + key +
        "' (expected pinned_pool_mb, staging_helpers, kernel_cache_dir, graph_lanes, copy_kernels, "
        "copy_kernel_mb, late_gather, merged_gather, dependent_launches, gemm_tuning, gemm_log, split_k, "
        "attention_strips, device_wait, poll_us, placed_ids_from, staged_rows_mb or "
        "gathered_rows_mb)");
  }
  return Status::Ok();
}

StatusOr<CudaOptions> ParseCudaOptions(const std::vector<std::string>& key_values) {
  CudaOptions options;
  for (const std::string& kv : key_values) RANKD_RETURN_IF_ERROR(ParseCudaOption(kv, options));
  return options;
}

Status ApplyCudaOptions(const CudaOptions& o) {
  if (o.staging_helpers >= 0 && !HelpingPool::SetSharedHelpers(o.staging_helpers))
    return InvalidArgument("--cuda staging_helpers: the helping pool already runs with another count");
#if RANKD_HAVE_CUDA
  RANKD_RETURN_IF_ERROR(cuda::SetPinnedPoolMb(o.pinned_pool_mb));
  cuda::SetKernelCacheDir(o.kernel_cache_dir);
  cuda::SetGraphLanes(o.graph_lanes);
  cuda::SetCopyKernels(o.copy_kernels);
  cuda::SetCopyKernelBytes(static_cast<size_t>(o.copy_kernel_mb) << 20);
  cuda::SetLateGather(o.late_gather);
  cuda::SetMergedGather(o.merged_gather);
  cuda::SetPlacedIdsFrom(o.placed_ids_from);
  cuda::SetStagedRowsBytes(static_cast<size_t>(o.staged_rows_mb) << 20);
  cuda::SetGatheredRowsBytes(static_cast<size_t>(o.gathered_rows_mb) << 20);
  cuda::SetDependentLaunches(o.dependent_launches);
  cuda::EnableGemmTuning(o.gemm_tuning);
  cuda::SetGemmLog(o.gemm_log);
  cuda::EnableSplitKGemm(o.split_k);
  cuda::SetAttentionStrips(o.attention_strips);
  cuda::SetDeviceWait(o.device_wait == "spin"    ? cuda::DeviceWait::kSpin
                      : o.device_wait == "block" ? cuda::DeviceWait::kBlock
                      : o.device_wait == "nap"   ? cuda::DeviceWait::kNap
                                                 : cuda::DeviceWait::kPoller);
  cuda::SetPollStep(std::chrono::microseconds(o.poll_us));
  cuda::DeviceFaults faults;
  faults.fail_allocations_over_mb = o.fault_fail_allocations_over_mb;
  faults.poison_after_runs = o.fault_poison_after_runs;
  faults.poison_device = o.fault_poison_device;
  faults.poison_simulated = o.fault_poison_simulated;
  faults.device_mb = o.fault_device_mb;
  faults.host_mb = o.fault_host_mb;
  cuda::SetDeviceFaults(faults);
  return Status::Ok();
#else
  CudaOptions defaults;
  defaults.staging_helpers = o.staging_helpers;
  const bool same = o.pinned_pool_mb == defaults.pinned_pool_mb && o.kernel_cache_dir.empty() &&
                    o.graph_lanes == defaults.graph_lanes && o.copy_kernels &&
                    o.copy_kernel_mb == defaults.copy_kernel_mb && o.late_gather && o.merged_gather &&
                    o.dependent_launches && o.gemm_tuning && !o.gemm_log && o.split_k &&
                    o.attention_strips == defaults.attention_strips && o.device_wait == defaults.device_wait &&
                    o.poll_us == defaults.poll_us && o.placed_ids_from == defaults.placed_ids_from &&
                    o.staged_rows_mb == defaults.staged_rows_mb && o.gathered_rows_mb == defaults.gathered_rows_mb;
  return same ? Status::Ok() : InvalidArgument("--cuda: this build of rankd has no cuda backend");
#endif
}

}  // namespace rankd

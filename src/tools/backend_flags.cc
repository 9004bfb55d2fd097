#include "tools/backend_flags.h"

#include <CLI/CLI.hpp>

#include "runtime/backends.h"
#include "runtime/cuda_options.h"
#include "runtime/op_profile.h"

namespace rankd {

void AddBackendFlags(CLI::App* command, BackendFlags& flags, const std::string& backend_help) {
  command->add_option("--backend", flags.backend, backend_help)->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  command->add_option("--device", flags.device, "The GPU's index for --backend cuda or auto (CUDA's numbering)")
      ->check(CLI::Range(0, 63));
  command->add_option("--gpus", flags.gpus,
                      "all | 0,1,...: replicate each model on these GPUs (--backend cuda or auto) unless its config "
                      "names its own gpus (docs/replicas.md); default --device alone");
  command->add_option(
      "--cuda", flags.cuda,
      "KEY=VALUE: a CUDA backend setting (docs/cuda.md: pinned_pool_mb, staging_helpers, "
      "kernel_cache_dir, graph_lanes, copy_kernels, copy_kernel_mb, late_gather, merged_gather, dependent_launches, "
      "gemm_tuning, gemm_log, split_k, attention_strips, device_wait, poll_us, placed_ids_from, staged_rows_mb, "
      "gathered_rows_mb); "
      "repeatable");
  command
      ->add_option("--profile", flags.profile, "off | ops | steps | host: time each op, each step or the host phases")
      ->check(CLI::IsMember({"off", "ops", "steps", "host"}));
}

StatusOr<const Backend*> OpenBackend(const BackendFlags& flags) {
  RANKD_ASSIGN_OR_RETURN(CudaOptions cuda, ParseCudaOptions(flags.cuda));
  RANKD_RETURN_IF_ERROR(ApplyCudaOptions(cuda));
  RANKD_ASSIGN_OR_RETURN(OpProfile::Mode mode, OpProfile::ParseMode(flags.profile));
  OpProfile::SetMode(mode);
  if (!flags.gpus.empty()) RANKD_RETURN_IF_ERROR(ParseGpuSet(flags.gpus).status().WithContext("--gpus"));
  return FindBackend(flags.backend, flags.device);
}

GpuSet GpusFlag(const BackendFlags& flags) {
  if (flags.gpus.empty()) return {};
  auto gpus = ParseGpuSet(flags.gpus);
  return gpus.ok() ? *gpus : GpuSet{};
}

}  // namespace rankd

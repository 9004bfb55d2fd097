// The CPU backend: the reference implementation of every op.
#include <map>
#include <memory>

#include "backend/cpu/host_resources.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/packed_matmuls.h"

namespace rankd {
namespace {

class CpuBackendImpl final : public Backend {
 public:
  CpuBackendImpl() {
    cpu::AppendElementwiseKernels(kernels_);
    cpu::AppendTensorKernels(kernels_);
    cpu::AppendMatMulKernels(kernels_);
    cpu::AppendNormalizationKernels(kernels_);
    cpu::AppendReduceKernels(kernels_);
    cpu::AppendEmbeddingKernels(kernels_);
    cpu::AppendKeyedRowsKernel(kernels_);
    cpu::AppendFusedElementwiseKernel(kernels_);
    cpu::AppendAttentionKernels(kernels_);
    cpu::AppendSoftmaxAttentionKernels(kernels_);
    cpu::AppendDotInteractionKernels(kernels_);
    cpu::AppendStringKernels(kernels_);
  }
  const char* name() const override { return "cpu"; }
  const Kernel* FindKernel(const std::string& op) const override {
    auto it = kernels_.find(op);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph,
                                                         const PrepareOptions& options) const override {
    const int counters = KernelCounters(graph);
    std::unique_ptr<cpu::PackedMatmuls> packed = cpu::PackedMatmuls::Create(graph, Bf16Products(options.precision));
    if (packed->weights() == 0) packed.reset();
    if (counters == 0 && !packed) return std::shared_ptr<ModelResources>();  // the other constants are read in place
    return std::shared_ptr<ModelResources>(std::make_shared<cpu::HostModelResources>(counters, std::move(packed)));
  }
  DeviceKind device_kind() const override { return DeviceKind::kHost; }
  // Merged where the weights side by side are packed (packed_matmuls.h; docs/passes.md).
  int64_t SiblingProductsMinWeights() const override { return cpu::PackedMatmuls::kMinWeights; }

 private:
  KernelTable kernels_;
};

}  // namespace

const Backend& CpuBackend() {
  static const CpuBackendImpl backend;
  return backend;
}

}  // namespace rankd

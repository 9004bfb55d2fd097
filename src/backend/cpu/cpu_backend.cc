// The CPU backend: the reference implementation of every op.
#include <map>

#include "backend/cpu/kernels.h"

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
    cpu::AppendFusedElementwiseKernel(kernels_);
    cpu::AppendAttentionKernels(kernels_);
    cpu::AppendSoftmaxAttentionKernels(kernels_);
    cpu::AppendDotInteractionKernels(kernels_);
  }
  const char* name() const override { return "cpu"; }
  const Kernel* FindKernel(const std::string& op) const override {
    auto it = kernels_.find(op);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph&, const PrepareOptions&) const override {
    return std::shared_ptr<ModelResources>();  // constants are read where they are
  }
  DeviceKind device_kind() const override { return DeviceKind::kHost; }

 private:
  KernelTable kernels_;
};

}  // namespace

const Backend& CpuBackend() {
  static const CpuBackendImpl backend;
  return backend;
}

}  // namespace rankd

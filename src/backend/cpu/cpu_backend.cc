// The CPU backend: the reference implementation of every op.
#include <atomic>
#include <map>
#include <memory>

#include "backend/cpu/kernels.h"

namespace rankd {
namespace {

// What the CPU keeps per model: constants are read where they are, so only the kernels' counters.
class HostModelResources final : public ModelResources {
 public:
  explicit HostModelResources(int counters)
      : count_(counters), counters_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(counters))) {}
  void* kernel_counters() const override { return counters_.get(); }
  std::vector<int64_t> ReadCounters() const override {
    std::vector<int64_t> values;
    for (int c = 0; c < count_; ++c) values.push_back(counters_[static_cast<size_t>(c)].load());
    return values;
  }

 private:
  int count_;
  std::unique_ptr<std::atomic<int64_t>[]> counters_;
};

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
  }
  const char* name() const override { return "cpu"; }
  const Kernel* FindKernel(const std::string& op) const override {
    auto it = kernels_.find(op);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph, const PrepareOptions&) const override {
    const int counters = KernelCounters(graph);
    if (counters == 0) return std::shared_ptr<ModelResources>();  // constants are read where they are
    return std::shared_ptr<ModelResources>(std::make_shared<HostModelResources>(counters));
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

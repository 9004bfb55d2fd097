#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <map>
#include <memory>

#include "backend/cuda/kernels.h"
#include "backend/cuda/model_resources.h"
#include "backend/cuda/pinned_pool.h"

namespace rankd {
namespace {

// Plans up to this size keep each value in its own room, so that a captured plan's independent
// steps run side by side on the executor's lanes (step_lanes.h): W2, W3 and W1 up to a few
// hundred pairs stay below it; four executors holding such a workspace each is a few hundred MB.
constexpr int64_t kSeparateRoomBytes = int64_t{64} << 20;

class CudaBackendImpl final : public Backend {
 public:
  CudaBackendImpl() : kernels_(CudaKernels()) {}
  const char* name() const override { return "cuda"; }
  // With bf16-activations, where the cross layers' x0 and x exist as bf16 copies alone, a
  // product with the multiply-add epilogue runs as one Hopper kernel (product_muladd.h), else as
  // cuBLASLt's product and the MulAdd. Other precisions keep their MulAdds: the fused kernel needs
  // the copies, and two kernels gain nothing from the fusion.
  bool TakesProductMulAdds(Precision precision) const override { return precision == Precision::kBf16Activations; }
  int64_t SeparateRoomBytes() const override { return kSeparateRoomBytes; }
  int DefaultExecutors() const override { return 4; }
  const Kernel* FindKernel(const std::string& op) const override {
    auto it = kernels_.find(op);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph, Precision precision) const override {
    RANKD_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaModelResources> r,
                           cuda::CudaModelResources::Upload(graph, 0, precision));
    // Every kernel's per-step preparation once now, so what is slow in it (compiling a generated
    // kernel) happens at load, never when a plan is first built for a request.
    for (const Node& node : graph.nodes) {
      const Kernel* kernel = FindKernel(node.op);
      if (kernel && kernel->prepare) RANKD_RETURN_IF_ERROR(kernel->prepare(node).status().WithContext(node.Describe()));
    }
    return std::shared_ptr<ModelResources>(std::move(r));
  }
  DeviceKind device_kind() const override { return DeviceKind::kCuda; }

 private:
  KernelTable kernels_;
};

}  // namespace

KernelTable CudaKernels() {
  KernelTable kernels;
  cuda::AppendElementwiseKernels(kernels);
  cuda::AppendTensorKernels(kernels);
  cuda::AppendMatMulKernels(kernels);
  cuda::AppendNormalizationKernels(kernels);
  cuda::AppendReduceKernels(kernels);
  cuda::AppendEmbeddingKernels(kernels);
  cuda::AppendEmbeddingConcatKernels(kernels);
  cuda::AppendFusedElementwiseKernel(kernels);
  cuda::AppendAttentionKernels(kernels);
  cuda::AppendSoftmaxAttentionKernels(kernels);
  cuda::AppendDotInteractionKernels(kernels);
  return kernels;
}

const Backend* CudaBackendIfAvailable(std::string* why) {
  struct Probe {
    const Backend* backend = nullptr;
    std::string why;
  };
  static const Probe probe = [] {
    Probe p;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      p.why = cudaGetErrorString(e);
      cudaGetLastError();  // clear it
    } else if (count == 0) {
      p.why = "no CUDA device";
    } else {
      static const CudaBackendImpl backend;
      p.backend = &backend;
      cuda::PinnedPool::Shared();  // request tensors made from now on are pinned: runs read them in place
    }
    return p;
  }();
  if (!probe.backend && why) *why = probe.why;
  return probe.backend;
}

}  // namespace rankd

#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/device_health.h"
#include "backend/cuda/device_row_slots.h"
#include "backend/cuda/faults.h"
#include "backend/cuda/ipc_memory.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/model_resources.h"
#include "backend/cuda/per_device.h"
#include "backend/cuda/pinned_host_memory.h"
#include "backend/cuda/pinned_pool.h"
#include "backend/table_placement.h"
#include "common/host_memory.h"
#include "model/mapped_file.h"

namespace rankd {
namespace {

// Plans up to this size keep each value in its own room, so that a captured plan's independent
// steps run side by side on the executor's lanes (step_lanes.h): W2, W3 and W1 up to a few
// hundred pairs stay below it; four executors holding such a workspace each is a few hundred MB.
constexpr int64_t kSeparateRoomBytes = int64_t{64} << 20;
// What a load leaves free for the models already serving (their workspaces grow with the
// batches they meet): the larger of this and kKeptFreeShare of the device.
constexpr int64_t kKeptFreeBytes = int64_t{256} << 20;
constexpr int64_t kKeptFreeShare = 50;  // 1/50: 2%
// What page-locking tables' copies leaves of the host's available memory.
constexpr int64_t kKeptHostBytes = int64_t{1} << 30;

// The device memory a table on named GPUs takes is counted in parts of this size (CUDA's usual
// recommended mapping granularity; shared_tables.cc asks the driver for the real one).
constexpr int64_t kNamedTableGrainBytes = int64_t{2} << 20;

int64_t Mb(int64_t bytes) { return (bytes + (1 << 20) - 1) >> 20; }

// The backend of one device: its models' weights, executors and checks are that device's.
class CudaBackendImpl final : public Backend {
 public:
  explicit CudaBackendImpl(int device) : device_(device), kernels_(CudaKernels()) {}
  const char* name() const override { return "cuda"; }
  int device() const override { return device_; }
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
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph,
                                                         const PrepareOptions& options) const override {
    RANKD_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaModelResources> r,
                           cuda::CudaModelResources::Upload(graph, device_, options));
    // Every kernel's per-step preparation once now, so what is slow in it (compiling a generated
    // kernel) happens at load, never when a plan is first built for a request.
    for (const Node& node : graph.nodes) {
      const Kernel* kernel = FindKernel(node.op);
      if (kernel && kernel->prepare) RANKD_RETURN_IF_ERROR(kernel->prepare(node).status().WithContext(node.Describe()));
    }
    return std::shared_ptr<ModelResources>(std::move(r));
  }
  DeviceKind device_kind() const override { return DeviceKind::kCuda; }
  // The tables placed in host memory that lie in mapped files are copied into page-locked memory
  // (model_resources.cc), which cannot be swapped out: refused unless the host has them available
  // with kKeptHostBytes to spare.
  static Status CheckHostRoom(const Graph& graph, const TablePlacement& tables) {
    int64_t copies = 0;
    for (const auto& [id, t] : graph.constants) {
      if (tables.OnHost(id) && MappedFile::Overlaps(t.raw(), t.bytes())) copies += static_cast<int64_t>(t.bytes());
    }
    if (copies == 0) return Status::Ok();
    int64_t available = cuda::InjectedHostBytes();
    if (available < 0) {
      RANKD_ASSIGN_OR_RETURN(available, AvailableHostMemory());
    }
    if (copies + kKeptHostBytes <= available) return Status::Ok();
    return ResourceExhausted("the tables placed in host memory need " + std::to_string(Mb(copies)) +
                             " MB of page-locked host memory; " + std::to_string(Mb(available)) +
                             " MB are available and " + std::to_string(Mb(kKeptHostBytes)) +
                             " MB stay free (a larger tables.gpu_budget_mb keeps more of them on the GPU)");
  }
  Status Health() const override { return cuda::DeviceHealth(device_); }
  StatusOr<std::unique_ptr<SharedDeviceMemory>> OpenSharedMemory(const std::string& handle,
                                                                 uint64_t byte_size) const override {
    return cuda::OpenIpcMemory(device_, handle, byte_size);
  }
  StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(void* data, size_t bytes) const override {
    return cuda::PinHostMemory(device_, data, bytes);
  }
  StatusOr<std::unique_ptr<RowSlots>> CreateRowSlots(int64_t slots, int64_t row_bytes) const override {
    RANKD_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaRowSlots> rows,
                           cuda::CudaRowSlots::Create(device_, slots, row_bytes));
    return std::unique_ptr<RowSlots>(std::move(rows));
  }
  // The weights on the device (tables in host memory take none) with their bf16 copies, and each
  // executor's fixed buffers (cuBLASLt's workspace and a separate-room workspace) against what the
  // device has free, less what the models already serving keep. Plans' workspaces beyond that grow
  // on demand; a growth that fails answers its requests 503 (cuda::Check) and a merged batch's
  // requests then run alone.
  Status CheckRoom(const Graph& graph, const PrepareOptions& options, int executors) const override {
    RANKD_RETURN_IF_ERROR(cuda::DeviceHealth(device_));
    RANKD_RETURN_IF_ERROR(CheckHostRoom(graph, options.tables));
    RANKD_ASSIGN_OR_RETURN(cuda::DeviceMemory memory, cuda::QueryDeviceMemory(device_));
    // Tables on named GPUs: this GPU's parts count with its weights, the other GPUs' parts are
    // checked there (a GPU may hold tables that no replica runs on).
    const std::map<int, int64_t> named = NamedDeviceBytes(graph, options.tables, kNamedTableGrainBytes);
    for (const auto& [device, bytes] : named) {
      if (device == device_) continue;
      RANKD_ASSIGN_OR_RETURN(cuda::DeviceMemory there, cuda::QueryDeviceMemory(device));
      const int64_t kept_there = std::max(kKeptFreeBytes, there.total / kKeptFreeShare);
      if (bytes + kept_there > there.free) {
        return ResourceExhausted("the tables placed on GPU " + std::to_string(device) + " need about " +
                                 std::to_string(Mb(bytes)) + " MB there; " + std::to_string(Mb(there.free)) +
                                 " MB are free of " + std::to_string(Mb(there.total)) + " and " +
                                 std::to_string(Mb(kept_there)) + " MB stay free for the models already serving");
      }
    }
    const int64_t own_named = named.count(device_) ? named.at(device_) : 0;
    const int64_t weights =
        static_cast<int64_t>(cuda::CudaModelResources::DeviceBytes(graph, options, device_)) + own_named;
    const int64_t n = executors > 0 ? executors : DefaultExecutors();
    const int64_t buffers = n * (static_cast<int64_t>(cuda::kLtWorkspaceBytes) + kSeparateRoomBytes);
    const int64_t kept = std::max(kKeptFreeBytes, memory.total / kKeptFreeShare);
    if (weights + buffers + kept <= memory.free) return Status::Ok();
    return ResourceExhausted("the model needs about " + std::to_string(Mb(weights + buffers)) +
                             " MB of device memory (weights " + std::to_string(Mb(weights)) +
                             " MB, tables on named GPUs included, " + std::to_string(n) + " executors' buffers " +
                             std::to_string(Mb(buffers)) + " MB); " + std::to_string(Mb(memory.free)) +
                             " MB are free of " + std::to_string(Mb(memory.total)) + " and " +
                             std::to_string(Mb(kept)) + " MB stay free for the models already serving");
  }

 private:
  const int device_;
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
  cuda::AppendKeyedRowsKernel(kernels);
  cuda::AppendEmbeddingConcatKernels(kernels);
  cuda::AppendFusedElementwiseKernel(kernels);
  cuda::AppendAttentionKernels(kernels);
  cuda::AppendSoftmaxAttentionKernels(kernels);
  cuda::AppendDotInteractionKernels(kernels);
  cuda::AppendStringKernels(kernels);
  return kernels;
}

const Backend* CudaBackendOn(int device, std::string* why) {
  struct Probe {
    int devices = 0;
    std::string why;
  };
  static const Probe probe = [] {
    Probe p;
    cudaError_t e = cudaGetDeviceCount(&p.devices);
    if (e != cudaSuccess) {
      p.devices = 0;
      p.why = cudaGetErrorString(e);
      cudaGetLastError();  // clear it
    } else if (p.devices == 0) {
      p.why = "no CUDA device";
    } else {
      p.devices = std::min(p.devices, cuda::kMaxDevices);
      cuda::PinnedPool::Shared();  // request tensors made from now on are pinned: runs read them in place
    }
    return p;
  }();
  if (probe.devices == 0) {
    if (why) *why = probe.why;
    return nullptr;
  }
  if (device < 0 || device >= probe.devices) {
    if (why) {
      *why = "there is no GPU " + std::to_string(device) + " (" + std::to_string(probe.devices) +
             (probe.devices == 1 ? " device: 0)" : " devices: 0 to " + std::to_string(probe.devices - 1) + ")");
    }
    return nullptr;
  }
  static std::once_flag made[cuda::kMaxDevices];
  static const CudaBackendImpl* backends[cuda::kMaxDevices] = {};
  std::call_once(made[device], [device] { backends[device] = new CudaBackendImpl(device); });  // never destroyed
  return backends[device];
}

}  // namespace rankd

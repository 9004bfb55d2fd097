#include "runtime/backends.h"

#include "runtime/host_executor.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_executor.h"
#endif

namespace rankd {

StatusOr<const Backend*> FindBackend(const std::string& name, int device) {
  if (device < 0) return InvalidArgument("a device index is 0 or more, not " + std::to_string(device));
  if (name == "cpu") {
    if (device != 0) return InvalidArgument("the cpu backend has one device (0), not " + std::to_string(device));
    return &CpuBackend();
  }
  if (name == "cuda" || name == "auto") {
#if RANKD_HAVE_CUDA
    std::string why;
    if (const Backend* cuda = CudaBackendOn(device, &why)) return cuda;
    if (name == "auto" && device == 0) return &CpuBackend();
    return Unavailable("the cuda backend cannot run here: " + why);
#else
    if (name == "auto" && device == 0) return &CpuBackend();
    return Unavailable("this build of rankd has no cuda backend (nvcc was not found at build time)");
#endif
  }
  return InvalidArgument("unknown backend '" + name + "' (expected cpu, cuda or auto)");
}

Status AnyHealthy(const std::vector<const Backend*>& backends) {
  for (const Backend* b : backends) {
    if (b->Health().ok()) return Status::Ok();
  }
  return backends.at(0)->Health();
}

StatusOr<std::vector<const Backend*>> FindReplicaBackends(const Backend& backend, const GpuSet& gpus) {
  if (backend.device_kind() != DeviceKind::kCuda || gpus.empty()) return std::vector<const Backend*>{&backend};
  std::vector<const Backend*> backends;
  if (gpus.all) {
    for (int device = 0; device < 64; ++device) {
      auto found = FindBackend("cuda", device);
      if (!found.ok()) break;
      backends.push_back(*found);
    }
    if (backends.empty()) return Unavailable("gpus: all: no GPU can run the cuda backend here");
    return backends;
  }
  for (int device : gpus.ids) {
    auto found = FindBackend("cuda", device);
    if (!found.ok()) return found.status().WithContext("gpus: GPU " + std::to_string(device));
    backends.push_back(*found);
  }
  return backends;
}

StatusOr<std::unique_ptr<Executor>> NewExecutor(const Backend& backend, std::shared_ptr<ModelResources> resources) {
  switch (backend.device_kind()) {
    case DeviceKind::kHost:
      return NewHostExecutor(std::move(resources));
    case DeviceKind::kCuda: {
#if RANKD_HAVE_CUDA
      auto r = std::dynamic_pointer_cast<cuda::CudaModelResources>(resources);
      if (!r) return Internal("a cuda executor needs the model's cuda resources");
      return cuda::CudaExecutor::Create(std::move(r));
#else
      return Unavailable("this build of rankd has no cuda backend");
#endif
    }
  }
  return Internal("unknown device kind");
}

}  // namespace rankd

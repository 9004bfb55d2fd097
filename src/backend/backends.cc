// Choosing a backend by name.
#include "backend/backend.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace rankd {

StatusOr<Precision> ParsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "bf16-activations") return Precision::kBf16Activations;
  return InvalidArgument("unknown precision '" + name + "' (expected fp32, tf32, bf16 or bf16-activations)");
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
    case Precision::kBf16Activations: return "bf16-activations";
    default: return "fp32";
  }
}

StatusOr<const Backend*> FindBackend(const std::string& name) {
  if (name == "cpu") return &CpuBackend();
  if (name == "cuda" || name == "auto") {
#if RANKD_HAVE_CUDA
    std::string why;
    if (const Backend* cuda = CudaBackendIfAvailable(&why)) return cuda;
    if (name == "auto") return &CpuBackend();
    return Unavailable("the cuda backend cannot run here: " + why);
#else
    if (name == "auto") return &CpuBackend();
    return Unavailable("this build of rankd has no cuda backend (nvcc was not found at build time)");
#endif
  }
  return InvalidArgument("unknown backend '" + name + "' (expected cpu, cuda or auto)");
}

}  // namespace rankd

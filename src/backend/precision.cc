#include "backend/backend.h"

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
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kBf16Activations:
      return "bf16-activations";
    default:
      return "fp32";
  }
}

}  // namespace rankd

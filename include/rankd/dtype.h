// Element types. Names follow KServe v2 ("FP32", "INT64", ...); ONNX codes convert both ways.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rankd {

enum class DType : uint8_t {
  kInvalid = 0,
  kF32,
  kF64,
  kF16,
  kBF16,
  kI8,
  kU8,
  kI32,
  kI64,
  kBool,  // one byte per element, 0 or 1
};

size_t DTypeSize(DType t);
// KServe v2 name, e.g. "FP32". "INVALID" for kInvalid.
const char* DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);
// ONNX TensorProto::DataType code <-> DType; nullopt for types rankd does not hold.
std::optional<DType> DTypeFromOnnx(int onnx_code);
int DTypeToOnnx(DType t);
inline bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16; }
inline bool IsInteger(DType t) { return t == DType::kI8 || t == DType::kU8 || t == DType::kI32 || t == DType::kI64; }

// IEEE half and bfloat16 conversions (round to nearest even).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BF16ToFloat(uint16_t b);
uint16_t FloatToBF16(float f);

}  // namespace rankd

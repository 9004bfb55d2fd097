#include "rankd/dtype.h"

#include <cstring>

namespace rankd {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "FP32";
    case DType::kF64:
      return "FP64";
    case DType::kF16:
      return "FP16";
    case DType::kBF16:
      return "BF16";
    case DType::kI8:
      return "INT8";
    case DType::kU8:
      return "UINT8";
    case DType::kI32:
      return "INT32";
    case DType::kI64:
      return "INT64";
    case DType::kBool:
      return "BOOL";
    case DType::kInvalid:
      return "INVALID";
  }
  return "INVALID";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kU8, DType::kI32, DType::kI64,
                  DType::kBool}) {
    if (name == DTypeName(t)) return t;
  }
  return std::nullopt;
}

// Codes from onnx.proto's TensorProto.DataType.
std::optional<DType> DTypeFromOnnx(int c) {
  switch (c) {
    case 1:
      return DType::kF32;
    case 2:
      return DType::kU8;
    case 3:
      return DType::kI8;
    case 6:
      return DType::kI32;
    case 7:
      return DType::kI64;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kF16;
    case 11:
      return DType::kF64;
    case 16:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

int DTypeToOnnx(DType t) {
  switch (t) {
    case DType::kF32:
      return 1;
    case DType::kU8:
      return 2;
    case DType::kI8:
      return 3;
    case DType::kI32:
      return 6;
    case DType::kI64:
      return 7;
    case DType::kBool:
      return 9;
    case DType::kF16:
      return 10;
    case DType::kF64:
      return 11;
    case DType::kBF16:
      return 16;
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float BF16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace rankd

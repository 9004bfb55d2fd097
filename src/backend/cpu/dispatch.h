// Turning a run-time DType into a compile-time element type, and converting between types.
#pragma once

#include <cstdint>
#include <type_traits>

#include "rankd/dtype.h"
#include "rankd/status.h"

namespace rankd::cpu {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Bool8 {
  uint8_t v;
};

template <typename T>
inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, Half>)
    return HalfToFloat(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BF16ToFloat(v.bits);
  else if constexpr (std::is_same_v<T, Bool8>)
    return v.v ? 1.0 : 0.0;
  else
    return static_cast<double>(v);
}

template <typename To, typename From>
inline To Convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, Bool8>) {
    return Bool8{static_cast<uint8_t>(ToDouble(v) != 0.0)};
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{FloatToHalf(static_cast<float>(ToDouble(v)))};
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16{FloatToBF16(static_cast<float>(ToDouble(v)))};
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) {
    return static_cast<float>(v);
  } else {
    return static_cast<To>(ToDouble(v));
  }
}

// Calls f(T{}) with T the element type of `t`, for every dtype rankd holds.
template <typename F>
Status DispatchAny(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      f(float{});
      break;
    case DType::kF64:
      f(double{});
      break;
    case DType::kF16:
      f(Half{});
      break;
    case DType::kBF16:
      f(BFloat16{});
      break;
    case DType::kI8:
      f(int8_t{});
      break;
    case DType::kU8:
      f(uint8_t{});
      break;
    case DType::kI32:
      f(int32_t{});
      break;
    case DType::kI64:
      f(int64_t{});
      break;
    case DType::kBool:
      f(Bool8{});
      break;
    default:
      return Internal(std::string("no kernel for dtype ") + DTypeName(t));
  }
  return Status::Ok();
}

// Calls f(T{}) for the numeric types element-wise kernels compute in.
template <typename F>
Status DispatchNumeric(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      f(float{});
      break;
    case DType::kF64:
      f(double{});
      break;
    case DType::kI32:
      f(int32_t{});
      break;
    case DType::kI64:
      f(int64_t{});
      break;
    default:
      return Internal(std::string("no numeric kernel for dtype ") + DTypeName(t));
  }
  return Status::Ok();
}

template <typename F>
Status DispatchFloat(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      f(float{});
      break;
    case DType::kF64:
      f(double{});
      break;
    default:
      return Internal(std::string("no float kernel for dtype ") + DTypeName(t));
  }
  return Status::Ok();
}

}  // namespace rankd::cpu

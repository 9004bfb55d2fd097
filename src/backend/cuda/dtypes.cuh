// Element types on the device and conversions between them, mirroring cpu/dispatch.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "rankd/dtype.h"
#include "rankd/status.h"

namespace rankd::cuda {

struct Bool8 {
  uint8_t v;
};

template <typename T>
__device__ inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return static_cast<double>(__half2float(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return static_cast<double>(__bfloat162float(v));
  else if constexpr (std::is_same_v<T, Bool8>)
    return v.v ? 1.0 : 0.0;
  else
    return static_cast<double>(v);
}

template <typename T>
__device__ inline float ToFloat(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return static_cast<float>(v);
}

template <typename To, typename From>
__device__ inline To Convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, Bool8>) {
    return Bool8{static_cast<uint8_t>(ToDouble(v) != 0.0)};
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half(static_cast<float>(ToDouble(v)));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(ToDouble(v)));
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_integral_v<To>) {
    return static_cast<To>(ToDouble(v));  // like the CPU: truncation through double
  } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) {
    return static_cast<float>(v);
  } else {
    return static_cast<To>(ToDouble(v));
  }
}

// f(T{}) returns a Status, which the dispatch returns.
template <typename F>
Status DispatchAny(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kF16:
      return f(__half{});
    case DType::kBF16:
      return f(__nv_bfloat16{});
    case DType::kI8:
      return f(int8_t{});
    case DType::kU8:
      return f(uint8_t{});
    case DType::kI32:
      return f(int32_t{});
    case DType::kI64:
      return f(int64_t{});
    case DType::kBool:
      return f(Bool8{});
    default:
      return Internal(std::string("no cuda kernel for dtype ") + DTypeName(t));
  }
}

template <typename F>
Status DispatchNumeric(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kI32:
      return f(int32_t{});
    case DType::kI64:
      return f(int64_t{});
    default:
      return Internal(std::string("no numeric cuda kernel for dtype ") + DTypeName(t));
  }
}

template <typename F>
Status DispatchFloat(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    default:
      return Internal(std::string("no float cuda kernel for dtype ") + DTypeName(t));
  }
}

}  // namespace rankd::cuda

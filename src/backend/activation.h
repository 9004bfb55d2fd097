// The activation FuseGemmEpilogues gives a product (Gemm, MatMul), as its "activation" attribute,
// and how it is applied: by the CPU and CUDA's few-rows kernel (small_rows_gemm.cu); cuBLASLt has
// the matching epilogue (gemm.h), but for the sigmoid, which a kernel applies after it.
#pragma once

#include <cmath>
#include <string>

#include "common/host_device.h"
#include "model/graph.h"

namespace rankd {

enum class Activation { kNone, kRelu, kGeluTanh, kSigmoid };

inline Activation ProductActivation(const Node& product) {
  const std::string a = product.GetString("activation", "");
  if (a == "Relu") return Activation::kRelu;
  if (a == "GeluTanh") return Activation::kGeluTanh;
  if (a == "Sigmoid") return Activation::kSigmoid;
  return Activation::kNone;
}

// ONNX Gelu with approximate="tanh": x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))); the sigmoid
// as the Sigmoid op computes it (cpu/elementwise.cc).
RANKD_HOST_DEVICE inline float Activate(Activation a, float x) {
  switch (a) {
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    case Activation::kSigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case Activation::kNone:
      break;
  }
  return x;
}

}  // namespace rankd

// CPU kernels of Softmax and LayerNormalization.
#include <algorithm>
#include <cmath>

#include "backend/broadcast.h"
#include "backend/cpu/kernels.h"
#include "backend/geometry.h"

namespace rankd::cpu {
namespace {

Status Softmax(const KernelArgs& k) {
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  const AxisSplit split = SplitAt(x.shape(), k.node.GetInt("axis", -1));
  const int64_t outer = split.outer, dim = split.dim, inner = split.inner;
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelFor(outer * inner, dim * 8, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t o = t / inner, i = t % inner;
      const float* src = px + o * dim * inner + i;
      float* dst = po + o * dim * inner + i;
      float mx = -INFINITY;
      for (int64_t j = 0; j < dim; ++j) mx = std::max(mx, src[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < dim; ++j) {
        float e = std::exp(src[j * inner] - mx);
        dst[j * inner] = e;
        sum += e;
      }
      float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < dim; ++j) dst[j * inner] *= inv;
    }
  });
  return Status::Ok();
}

Status LayerNorm(const KernelArgs& k) {
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  float eps = k.node.GetFloat("epsilon", 1e-5f);
  const AxisSplit split = SplitAt(x.shape(), k.node.GetInt("axis", -1));
  const int64_t axis = split.axis, outer = split.outer, norm = split.dim * split.inner;
  Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  // Scale and bias, materialised over the normalised shape in scratch (they are small).
  float* scale = static_cast<float*>(k.scratch);
  float* bias = scale + (norm + 15) / 16 * 16;
  std::fill(scale, scale + norm, 1.0f);
  std::fill(bias, bias + norm, 0.0f);
  for (int which = 1; which <= 2; ++which) {
    if (!k.HasIn(which)) continue;
    const Tensor& t = k.In(which);
    auto layout = MakeBroadcastLayout<1>(norm_shape, {&t.shape()});
    float* dst = which == 1 ? scale : bias;
    const float* src = t.data<float>();
    ForEachRow<1>(layout,
                  [&](int64_t o, const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
                    for (int64_t i = 0; i < n; ++i) dst[o + i] = src[off[0] + i * st[0]];
                  });
  }
  const float* px = x.data<float>();
  float* po = out.data<float>();
  // Optional outputs 1 and 2: the mean and 1/sqrt(var + eps) of each normalised row.
  float* mean_out = k.out.size() > 1 && k.out[1] ? k.Out(1).data<float>() : nullptr;
  float* inv_std_out = k.out.size() > 2 && k.out[2] ? k.Out(2).data<float>() : nullptr;
  ParallelFor(outer, norm * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* src = px + r * norm;
      float* dst = po + r * norm;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < norm; ++j) mean += src[j];
      mean /= static_cast<double>(std::max<int64_t>(norm, 1));
      for (int64_t j = 0; j < norm; ++j) var += (src[j] - mean) * (src[j] - mean);
      var /= static_cast<double>(std::max<int64_t>(norm, 1));
      float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_std_out) inv_std_out[r] = inv;
      for (int64_t j = 0; j < norm; ++j) {
        dst[j] = (src[j] - static_cast<float>(mean)) * inv * scale[j] + bias[j];
      }
    }
  });
  return Status::Ok();
}

}  // namespace

void AppendNormalizationKernels(KernelTable& out) {
  out["Softmax"] = Softmax;
  out["LayerNormalization"] = LayerNorm;
}

}  // namespace rankd::cpu

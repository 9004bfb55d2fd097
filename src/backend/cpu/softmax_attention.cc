// CPU kernel of SoftmaxAttention (model/ops/softmax_attention.h): per (row, query position,
// head) the scores of the sequence, their softmax and the weighted sum of the values, with
// nothing of size [rows, heads, positions, length] written.
#include "model/ops/softmax_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"
#include "common/parallel.h"

namespace rankd::cpu {
namespace {

using namespace softmax_attention;

Status SoftmaxAttention(const KernelArgs& k) {
  const Tensor &query = k.In(kQuery), &keys = k.In(kKeys), &values = k.In(kValues);
  Tensor& out = k.Out(0);
  const int64_t heads = k.node.GetInt("heads", 1);
  const float scale = k.node.GetFloat("scale", 1.0f), fill = k.node.GetFloat("fill", -1e9f);
  const bool keeps = k.node.GetInt("mask_keeps", 0) == 1;
  const int64_t rows = query.dim(0), positions = query.rank() == 3 ? query.dim(1) : 1;
  const int64_t users = keys.dim(0), length = keys.dim(1), width = keys.dim(2), value_width = values.dim(2);
  const int64_t dim = width / heads, value_dim = value_width / heads;
  const int64_t* key_rows = k.HasIn(kKeyRows) ? k.In(kKeyRows).data<int64_t>() : nullptr;
  for (int64_t n = 0; key_rows && n < rows; ++n) {
    if (key_rows[n] < 0 || key_rows[n] >= users) {
      return InvalidArgument(k.node.Describe() + ": key row " + std::to_string(key_rows[n]) + " of row " +
                             std::to_string(n) + " is outside [0, " + std::to_string(users) + ")");
    }
  }
  const uint8_t* mask = k.HasIn(kMask) ? k.In(kMask).data<uint8_t>() : nullptr;
  const float *pq = query.data<float>(), *pk = keys.data<float>(), *pv = values.data<float>();
  float* po = out.data<float>();

  ParallelFor(rows * positions * heads, length * (width + value_width) / heads + 1, [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(length));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t h = t % heads, nm = t / heads, n = nm / positions;
      const int64_t u = key_rows ? key_rows[n] : n;
      const float* q = pq + nm * width + h * dim;
      float* o = po + nm * value_width + h * value_dim;
      std::fill(o, o + value_dim, 0.0f);
      if (length == 0) continue;
      float mx = -INFINITY;
      for (int64_t l = 0; l < length; ++l) {
        float score = fill;
        if (!mask || (mask[u * length + l] != 0) == keeps) {
          const float* key = pk + (u * length + l) * width + h * dim;
          float dot = 0.0f;
          for (int64_t d = 0; d < dim; ++d) dot += q[d] * key[d];
          score = dot * scale;
        }
        s[static_cast<size_t>(l)] = score;
        mx = std::max(mx, score);
      }
      double sum = 0;
      for (int64_t l = 0; l < length; ++l) {
        float e = std::exp(s[static_cast<size_t>(l)] - mx);
        s[static_cast<size_t>(l)] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t l = 0; l < length; ++l) {
        const float p = s[static_cast<size_t>(l)] * inv;
        const float* v = pv + (u * length + l) * value_width + h * value_dim;
        for (int64_t e = 0; e < value_dim; ++e) o[e] += p * v[e];
      }
    }
  });
  return Status::Ok();
}

}  // namespace

void AppendSoftmaxAttentionKernels(KernelTable& out) { out["SoftmaxAttention"] = SoftmaxAttention; }

}  // namespace rankd::cpu

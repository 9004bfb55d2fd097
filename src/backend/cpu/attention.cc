// CPU kernel of TargetAttention (model/ops/target_attention.h): per candidate, its user's
// sequence in chunks of positions, each layer one small product through Sgemm, nothing of size
// [candidates, length, width] ever written.
#include <algorithm>
#include <array>

#include "backend/cpu/kernels.h"
#include "common/parallel.h"
#include "model/ops/target_attention.h"

namespace rankd::cpu {
namespace {

using target_attention::kFirstLayerInput;
using target_attention::kMaxWidth;

constexpr int64_t kChunk = 32;  // positions scored together

// One chunk's activations: the product input and the two layer buffers, on the stack.
struct ChunkBuffers {
  std::array<float, kChunk * kMaxWidth> x, a, b;
};

Status TargetAttention(const KernelArgs& k) {
  const Tensor& keys = k.In(0);
  const int64_t users = keys.dim(0), length = keys.dim(1), dim = keys.dim(2);
  const int64_t rows = k.Out(0).dim(0), width = k.In(5).dim(1);
  const int64_t* key_rows = k.HasIn(1) ? k.In(1).data<int64_t>() : nullptr;
  for (int64_t n = 0; key_rows && n < rows; ++n) {
    if (key_rows[n] < 0 || key_rows[n] >= users) {
      return InvalidArgument(k.node.Describe() + ": key row " + std::to_string(key_rows[n]) + " of candidate " +
                             std::to_string(n) + " is outside [0, " + std::to_string(users) + ")");
    }
  }
  const float *pk = keys.data<float>(), *query = k.In(2).data<float>(), *key_proj = k.In(3).data<float>();
  const float *query_proj = k.In(4).data<float>(), *cross = k.In(5).data<float>();
  const float* mask = k.HasIn(6) ? k.In(6).data<float>() : nullptr;
  float* out = k.Out(0).data<float>();
  const int layers = (k.node.NumInputs() - kFirstLayerInput) / 2;

  ParallelFor(rows, length * dim * width, [&](int64_t begin, int64_t end) {
    ChunkBuffers buf;
    for (int64_t n = begin; n < end; ++n) {
      const int64_t u = key_rows ? key_rows[n] : n;
      const float* q = query + n * dim;
      const float* qp = query_proj + n * width;
      float* acc = out + n * dim;
      std::fill(acc, acc + dim, 0.0f);
      for (int64_t l0 = 0; l0 < length; l0 += kChunk) {
        const int64_t m = std::min(kChunk, length - l0);
        const float* kt = pk + (u * length + l0) * dim;
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t d = 0; d < dim; ++d) buf.x[static_cast<size_t>(r * dim + d)] = q[d] * kt[r * dim + d];
        }
        // h0 = relu((key_proj + (q * k) cross) + query_proj), summed in the order DIN's graph adds.
        Sgemm(buf.x.data(), cross, buf.a.data(), m, width, dim, false, false, 1.0f, 0.0f);
        const float* kp = key_proj + (u * length + l0) * width;
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < width; ++j) {
            float& h = buf.a[static_cast<size_t>(r * width + j)];
            h = (kp[r * width + j] + h) + qp[j];
            h = h > 0.0f ? h : 0.0f;  // Relu as everywhere here: NaN gives 0
          }
        }
        float *in = buf.a.data(), *next = buf.b.data();
        int64_t in_width = width;
        for (int i = 0; i < layers; ++i) {
          const Tensor& w = k.In(kFirstLayerInput + 2 * i);
          const float* bias =
              k.HasIn(kFirstLayerInput + 2 * i + 1) ? k.In(kFirstLayerInput + 2 * i + 1).data<float>() : nullptr;
          const int64_t out_width = w.dim(1);
          Sgemm(in, w.data<float>(), next, m, out_width, in_width, false, false, 1.0f, 0.0f);
          const bool relu = i + 1 < layers;
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t j = 0; j < out_width; ++j) {
              float& h = next[r * out_width + j];
              if (bias) h += bias[j];
              if (relu) h = h > 0.0f ? h : 0.0f;
            }
          }
          std::swap(in, next);
          in_width = out_width;
        }
        for (int64_t r = 0; r < m; ++r) {  // in[r]: position l0 + r's score
          const float s = mask ? in[r] * mask[u * length + l0 + r] : in[r];
          for (int64_t d = 0; d < dim; ++d) acc[d] += s * kt[r * dim + d];
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace

void AppendAttentionKernels(KernelTable& out) { out["TargetAttention"] = TargetAttention; }

}  // namespace rankd::cpu

// CUDA kernel of SoftmaxAttention (model/ops/softmax_attention.h; cpu/softmax_attention.cc is
// the reference). A warp per (row, query position, head), in one launch:
// - first pass: each lane scores the positions lane, lane + 32, ... and keeps its own running
//   maximum and sum of exponentials; the warp combines them;
// - second pass, 32 positions at a time: each lane scores one position again and weighs it, the
//   weights go round the warp by shuffles, and lane e adds weight * value[e] for its value
//   columns, so the values are read row by row, coalesced.
// Nothing of size [rows, heads, positions, length] is written; scores are recomputed instead (the
// head widths of ranking models are small).
#include <cmath>

#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "model/ops/softmax_attention.h"

namespace rankd::cuda {
namespace {

using namespace softmax_attention;

constexpr int kWarp = 32;
constexpr int kWarps = 4;  // per block: small blocks spread a few hundred rows over the device

struct Params {
  const float* query = nullptr;
  const float* keys = nullptr;
  const float* values = nullptr;
  const uint8_t* mask = nullptr;
  const int64_t* key_rows = nullptr;
  float* out = nullptr;
  int64_t warps = 0;  // rows * positions * heads
  int64_t positions = 1, heads = 1, users = 0, length = 0;
  int64_t width = 0, value_width = 0, dim = 0, value_dim = 0;
  float scale = 1.0f, fill = -1e9f;
  bool keeps = false;
  bool vector4 = false;  // query and key heads start on 16-byte boundaries and dim % 4 == 0
  int* error = nullptr;
  int step = 0;
};

// The score of position l for the query head q (dim floats) against user u's keys.
__device__ float Score(const Params& p, const float* q, int64_t u, int64_t h, int64_t l) {
  if (p.mask && (p.mask[u * p.length + l] != 0) != p.keeps) return p.fill;
  const float* key = p.keys + (u * p.length + l) * p.width + h * p.dim;
  float dot = 0.0f;
  if (p.vector4) {
    const float4* q4 = reinterpret_cast<const float4*>(q);
    const float4* k4 = reinterpret_cast<const float4*>(key);
    for (int64_t d = 0; d < p.dim / 4; ++d) {
      const float4 a = q4[d], b = __ldg(k4 + d);
      dot += a.x * b.x;
      dot += a.y * b.y;
      dot += a.z * b.z;
      dot += a.w * b.w;
    }
  } else {
    for (int64_t d = 0; d < p.dim; ++d) dot += q[d] * __ldg(key + d);
  }
  return dot * p.scale;
}

// R value columns per lane per round: rounds of 32 * R columns until value_dim is covered.
template <int R>
__global__ void __launch_bounds__(kWarps* kWarp) SoftmaxAttentionKernel(Params p) {
  const int64_t w = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (w >= p.warps) return;
  const int64_t h = w % p.heads, nm = w / p.heads, n = nm / p.positions;
  float* out = p.out + nm * p.value_width + h * p.value_dim;
  const int64_t u = p.key_rows ? p.key_rows[n] : n;
  if (u < 0 || u >= p.users) {
    if (lane == 0) ReportBadData(p.error, p.step);
    for (int64_t e = lane; e < p.value_dim; e += kWarp) out[e] = 0.0f;
    return;
  }
  const float* q = p.query + nm * p.width + h * p.dim;

  float mx = -INFINITY, sum = 0.0f;
  for (int64_t l = lane; l < p.length; l += kWarp) {
    const float s = Score(p, q, u, h, l);
    if (s > mx) {
      sum = sum * expf(mx - s) + 1.0f;
      mx = s;
    } else {
      sum += expf(s - mx);
    }
  }
  float top = mx;
  for (int o = kWarp / 2; o > 0; o /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
  sum = mx == -INFINITY ? 0.0f : sum * expf(mx - top);
  for (int o = kWarp / 2; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.0f / sum;

  for (int64_t e0 = 0; e0 < p.value_dim; e0 += kWarp * R) {
    float acc[R] = {};
    for (int64_t l0 = 0; l0 < p.length; l0 += kWarp) {
      const int64_t l = l0 + lane;
      const float weight = l < p.length ? expf(Score(p, q, u, h, l) - top) * inv : 0.0f;
      const int count = static_cast<int>(p.length - l0 < kWarp ? p.length - l0 : kWarp);
      const float* v = p.values + (u * p.length + l0) * p.value_width + h * p.value_dim + e0 + lane;
      for (int j = 0; j < count; ++j) {
        const float wj = __shfl_sync(0xffffffffu, weight, j);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (e0 + lane + r * kWarp < p.value_dim) acc[r] += wj * __ldg(v + j * p.value_width + r * kWarp);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t e = e0 + lane + r * kWarp;
      if (e < p.value_dim) out[e] = acc[r];
    }
  }
}

Status SoftmaxAttention(const KernelArgs& k) {
  const Tensor &query = k.In(kQuery), &keys = k.In(kKeys), &values = k.In(kValues);
  Tensor& out = k.Out(0);
  Params p;
  p.heads = k.node.GetInt("heads", 1);
  p.scale = k.node.GetFloat("scale", 1.0f);
  p.fill = k.node.GetFloat("fill", -1e9f);
  p.keeps = k.node.GetInt("mask_keeps", 0) == 1;
  p.positions = query.rank() == 3 ? query.dim(1) : 1;
  p.users = keys.dim(0);
  p.length = keys.dim(1);
  p.width = keys.dim(2);
  p.value_width = values.dim(2);
  p.dim = p.width / p.heads;
  p.value_dim = p.value_width / p.heads;
  p.warps = query.dim(0) * p.positions * p.heads;
  if (p.warps == 0 || p.value_dim == 0) return Status::Ok();
  if (p.length == 0) {
    RANKD_CUDA_RETURN(cudaMemsetAsync(out.data<float>(), 0, out.bytes(), k.device->stream));
    return Status::Ok();
  }
  p.query = query.data<float>();
  p.keys = keys.data<float>();
  p.values = values.data<float>();
  p.mask = k.HasIn(kMask) ? k.In(kMask).data<uint8_t>() : nullptr;
  p.key_rows = k.HasIn(kKeyRows) ? k.In(kKeyRows).data<int64_t>() : nullptr;
  p.out = out.data<float>();
  p.vector4 =
      p.dim % 4 == 0 && reinterpret_cast<uintptr_t>(p.query) % 16 == 0 && reinterpret_cast<uintptr_t>(p.keys) % 16 == 0;
  p.error = k.device->error;
  p.step = k.step;
  const unsigned blocks = static_cast<unsigned>((p.warps + kWarps - 1) / kWarps);
  if (p.value_dim <= kWarp) {
    SoftmaxAttentionKernel<1><<<blocks, kWarps * kWarp, 0, k.device->stream>>>(p);
  } else if (p.value_dim <= 2 * kWarp) {
    SoftmaxAttentionKernel<2><<<blocks, kWarps * kWarp, 0, k.device->stream>>>(p);
  } else {
    SoftmaxAttentionKernel<4><<<blocks, kWarps * kWarp, 0, k.device->stream>>>(p);
  }
  return Launched(k);
}

}  // namespace

void AppendSoftmaxAttentionKernels(KernelTable& out) { out["SoftmaxAttention"] = {SoftmaxAttention}; }

}  // namespace rankd::cuda

// CUDA kernels of Softmax and LayerNormalization: a warp per row (cpu/normalization.cc is the
// reference; sums of LayerNorm are kept in double like there).
#include <map>

#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"

namespace rankd::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

template <typename T>
__device__ T WarpSum(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Rows of `dim` contiguous floats.
__global__ void SoftmaxRows(int64_t rows, int64_t dim, const float* x, float* out) {
  int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const float* src = x + row * dim;
  float* dst = out + row * dim;
  float mx = -INFINITY;
  for (int64_t j = lane; j < dim; j += kWarp) mx = fmaxf(mx, src[j]);
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j < dim; j += kWarp) {
    float e = expf(src[j] - mx);
    dst[j] = e;
    sum += e;
  }
  float inv = 1.0f / WarpSum(sum);
  for (int64_t j = lane; j < dim; j += kWarp) dst[j] *= inv;
}

// Softmax over a strided axis: one thread per (outer, inner) pair.
__global__ void SoftmaxStrided(int64_t outer, int64_t dim, int64_t inner, const float* x, float* out) {
  RANKD_GRID_LOOP(t, outer * inner) {
    int64_t o = t / inner, i = t % inner;
    const float* src = x + o * dim * inner + i;
    float* dst = out + o * dim * inner + i;
    float mx = -INFINITY;
    for (int64_t j = 0; j < dim; ++j) mx = fmaxf(mx, src[j * inner]);
    float sum = 0.0f;
    for (int64_t j = 0; j < dim; ++j) {
      float e = expf(src[j * inner] - mx);
      dst[j * inner] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < dim; ++j) dst[j * inner] *= inv;
  }
}

unsigned WarpBlocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

Status Softmax(const KernelArgs& k) {
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  const AxisSplit split = SplitAt(x.shape(), k.node.GetInt("axis", -1));
  const int64_t outer = split.outer, dim = split.dim, inner = split.inner;
  if (x.size() == 0) return Status::Ok();
  if (inner == 1) {
    SoftmaxRows<<<WarpBlocks(outer), kWarp * kWarpsPerBlock, 0, k.device->stream>>>(outer, dim, x.data<float>(),
                                                                                    out.data<float>());
  } else {
    SoftmaxStrided<<<Blocks(outer * inner), kThreads, 0, k.device->stream>>>(outer, dim, inner, x.data<float>(),
                                                                             out.data<float>());
  }
  return Launched(k);
}

__global__ void LayerNormRows(int64_t rows, int64_t norm, float eps, const float* x, const float* scale,
                              const float* bias, float* out, float* mean_out, float* inv_std_out) {
  int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const float* src = x + row * norm;
  float* dst = out + row * norm;
  double sum = 0;
  for (int64_t j = lane; j < norm; j += kWarp) sum += src[j];
  double mean = WarpSum(sum) / static_cast<double>(norm > 0 ? norm : 1);
  double sq = 0;
  for (int64_t j = lane; j < norm; j += kWarp) sq += (src[j] - mean) * (src[j] - mean);
  double var = WarpSum(sq) / static_cast<double>(norm > 0 ? norm : 1);
  float inv = static_cast<float>(1.0 / sqrt(var + eps));
  float m = static_cast<float>(mean);
  if (lane == 0 && mean_out) mean_out[row] = m;
  if (lane == 0 && inv_std_out) inv_std_out[row] = inv;
  for (int64_t j = lane; j < norm; j += kWarp) {
    float s = scale ? scale[j] : 1.0f, b = bias ? bias[j] : 0.0f;
    dst[j] = (src[j] - m) * inv * s + b;
  }
}

Status LayerNorm(const KernelArgs& k) {
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  float eps = k.node.GetFloat("epsilon", 1e-5f);
  const AxisSplit split = SplitAt(x.shape(), k.node.GetInt("axis", -1));
  const int64_t axis = split.axis, outer = split.outer, norm = split.dim * split.inner;
  Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  // Scale and bias over the normalised shape: used in place when dense, else broadcast into the
  // scratch the schema reserves (scale, then bias, each rounded up to 16 floats).
  const float* params[2] = {nullptr, nullptr};
  for (int which = 1; which <= 2; ++which) {
    if (!k.HasIn(which)) continue;
    const Tensor& t = k.In(which);
    if (t.size() == norm) {
      params[which - 1] = t.data<float>();
    } else {
      float* dst = static_cast<float*>(k.scratch) + (which - 1) * ((norm + 15) / 16 * 16);
      RANKD_RETURN_IF_ERROR(BroadcastCopy(k, t, norm_shape, dst));
      params[which - 1] = dst;
    }
  }
  float* mean_out = k.out.size() > 1 && k.out[1] ? k.Out(1).data<float>() : nullptr;
  float* inv_std_out = k.out.size() > 2 && k.out[2] ? k.Out(2).data<float>() : nullptr;
  if (outer == 0) return Status::Ok();
  LayerNormRows<<<WarpBlocks(outer), kWarp * kWarpsPerBlock, 0, k.device->stream>>>(
      outer, norm, eps, x.data<float>(), params[0], params[1], out.data<float>(), mean_out, inv_std_out);
  return Launched(k);
}

}  // namespace

void AppendNormalizationKernels(KernelTable& out) {
  out["Softmax"] = Softmax;
  out["LayerNormalization"] = LayerNorm;
}

}  // namespace rankd::cuda

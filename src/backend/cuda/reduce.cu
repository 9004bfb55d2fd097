// CUDA kernels of ReduceSum/Mean/Max/Min over any set of axes: a warp per output element, or a
// thread per output element when each reduces at most kFewReduced elements (MMoE's sum over its
// four experts: a warp would leave 28 lanes idle and read across rows). cpu/reduce.cc is the
// reference; float sums are kept in double like there.
#include <limits>
#include <map>
#include <type_traits>

#include "backend/cuda/device.h"
#include "backend/cuda/dtypes.cuh"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"

namespace rankd::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kFewReduced = 16;
enum class Red { kSum, kMean, kMax, kMin };

template <Red R, typename Acc>
__device__ Acc Combine(Acc a, Acc b) {
  if constexpr (R == Red::kMax)
    return a > b ? a : b;
  else if constexpr (R == Red::kMin)
    return a < b ? a : b;
  else
    return a + b;
}

// Where a reduction starts: floats' max from -inf and min from +inf (a max over -inf alone is
// -inf, not the lowest float), integers' from their limits, sums from 0.
template <Red R, typename T, typename Acc>
__device__ Acc Start() {
  constexpr bool kInf = std::is_floating_point_v<T>;
  if constexpr (R == Red::kMax) {
    return static_cast<Acc>(kInf ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest());
  } else if constexpr (R == Red::kMin) {
    return static_cast<Acc>(kInf ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max());
  } else {
    return Acc(0);
  }
}

// kept: output element -> input offset of its first reduced element; reduced: r -> offset.
template <Red R, typename T>
__global__ void ReduceKernel(IndexMap<1> kept, IndexMap<1> reduced, int64_t n_out, int64_t count, const T* x, T* out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  int64_t o = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (o >= n_out) return;
  int64_t base[1];
  kept.Offsets(o, base);
  Acc acc = Start<R, T, Acc>();
  for (int64_t r = lane; r < count; r += kWarp) {
    int64_t off[1];
    reduced.Offsets(r, off);
    acc = Combine<R>(acc, static_cast<Acc>(x[base[0] + off[0]]));
  }
  for (int s = kWarp / 2; s > 0; s /= 2) acc = Combine<R>(acc, static_cast<Acc>(__shfl_xor_sync(0xffffffffu, acc, s)));
  if (lane == 0) {
    if (R == Red::kMean) acc = count ? static_cast<Acc>(acc / static_cast<Acc>(count)) : Acc(0);
    out[o] = static_cast<T>(acc);
  }
}

// The same with a thread per output element, the reduced elements in order (as the CPU sums).
template <Red R, typename T>
__global__ void ReduceFewKernel(IndexMap<1> kept, IndexMap<1> reduced, int64_t n_out, int64_t count, const T* x,
                                T* out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  RANKD_GRID_LOOP(o, n_out) {
    int64_t base[1];
    kept.Offsets(o, base);
    Acc acc = Start<R, T, Acc>();
    for (int64_t r = 0; r < count; ++r) {
      int64_t off[1];
      reduced.Offsets(r, off);
      acc = Combine<R>(acc, static_cast<Acc>(x[base[0] + off[0]]));
    }
    if (R == Red::kMean) acc = count ? static_cast<Acc>(acc / static_cast<Acc>(count)) : Acc(0);
    out[o] = static_cast<T>(acc);
  }
}

Status Reduce(const KernelArgs& k) {
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  std::vector<int64_t> axes;
  if (k.HasIn(1)) {
    const Tensor* t = k.HostIn(1);
    if (!t) return Unimplemented(k.node.Describe() + ": axes must be a constant on cuda");
    for (int64_t i = 0; i < t->size(); ++i) axes.push_back(t->ScalarAsInt(i));
  } else {
    axes = k.node.GetInts("axes");
  }
  bool noop = axes.empty() && k.node.GetInt("noop_with_empty_axes", 0) != 0;
  std::vector<bool> is_reduced(static_cast<size_t>(x.rank()), axes.empty() && !noop);
  for (int64_t a : axes) is_reduced[static_cast<size_t>(a < 0 ? a + x.rank() : a)] = true;
  Shape strides = RowMajorStrides(x.shape());
  Shape kept_dims, kept_strides, red_dims, red_strides;
  for (size_t d = 0; d < is_reduced.size(); ++d) {
    (is_reduced[d] ? red_dims : kept_dims).push_back(x.shape()[d]);
    (is_reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
  }
  RANKD_ASSIGN_OR_RETURN(IndexMap<1> kept, StridedMap(kept_dims, kept_strides));
  RANKD_ASSIGN_OR_RETURN(IndexMap<1> reduced, StridedMap(red_dims, red_strides));
  int64_t n_out = out.size(), count = NumElements(red_dims);
  if (n_out == 0) return Status::Ok();
  const std::string& op = k.node.op;
  Red red = op == "ReduceSum" ? Red::kSum : op == "ReduceMean" ? Red::kMean : op == "ReduceMax" ? Red::kMax : Red::kMin;
  unsigned blocks = static_cast<unsigned>((n_out + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return DispatchNumeric(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const bool few = count <= kFewReduced;
    auto launch = [&](auto warp_kernel, auto few_kernel) {
      if (few) {
        few_kernel<<<Blocks(n_out), kThreads, 0, k.device->stream>>>(kept, reduced, n_out, count, x.data<T>(),
                                                                     out.data<T>());
      } else {
        warp_kernel<<<blocks, kWarp * kWarpsPerBlock, 0, k.device->stream>>>(kept, reduced, n_out, count, x.data<T>(),
                                                                             out.data<T>());
      }
    };
    switch (red) {
      case Red::kSum:
        launch(ReduceKernel<Red::kSum, T>, ReduceFewKernel<Red::kSum, T>);
        break;
      case Red::kMean:
        launch(ReduceKernel<Red::kMean, T>, ReduceFewKernel<Red::kMean, T>);
        break;
      case Red::kMax:
        launch(ReduceKernel<Red::kMax, T>, ReduceFewKernel<Red::kMax, T>);
        break;
      default:
        launch(ReduceKernel<Red::kMin, T>, ReduceFewKernel<Red::kMin, T>);
        break;
    }
    return Launched(k);
  });
}

}  // namespace

void AppendReduceKernels(KernelTable& out) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) out[op] = Reduce;
}

}  // namespace rankd::cuda

// CPU kernels of ReduceSum, ReduceMean, ReduceMax and ReduceMin.
#include <algorithm>
#include <limits>

#include "backend/broadcast.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels.h"

namespace rankd::cpu {
namespace {

Status Reduce(const KernelArgs& k) {
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  // Which input dims are reduced: those whose size differs from the output's, lined up by
  // re-deriving the keepdims shape.
  Shape axes;  // inline: no allocation a run
  if (k.HasIn(1)) {
    for (int64_t i = 0; i < k.In(1).size(); ++i) axes.push_back(k.In(1).ScalarAsInt(i));
  } else {
    axes = k.node.IntsView("axes");
  }
  bool noop = axes.empty() && k.node.GetInt("noop_with_empty_axes", 0) != 0;
  Shape reduced(static_cast<size_t>(x.rank()), axes.empty() && !noop);  // 0 / 1 a dim
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + x.rank() : a)] = true;
  Shape kept = x.shape();  // the output shape with keepdims
  for (size_t i = 0; i < kept.size(); ++i) {
    if (reduced[i]) kept[i] = 1;
  }
  const std::string& op = k.node.op;
  return DispatchNumeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    int64_t n_out = out.size(), n_in = x.size();
    int64_t count = n_out ? n_in / n_out : 0;
    Acc* acc = static_cast<Acc*>(k.scratch);
    // Floats start from -inf (+inf): a max over -inf alone is -inf, not the lowest float.
    constexpr bool kInf = std::is_floating_point_v<T>;
    Acc init = op == "ReduceMax"
                   ? static_cast<Acc>(kInf ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest())
               : op == "ReduceMin"
                   ? static_cast<Acc>(kInf ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max())
                   : Acc(0);
    std::fill(acc, acc + n_out, init);
    // Split over dim 0 when it is kept (each slice owns its accumulators), then walk each slice's
    // input with the accumulator as a second operand whose strides are 0 on reduced dims.
    bool split = x.rank() > 0 && !reduced[0];
    int64_t slices = split ? x.dim(0) : 1;
    Shape sub_x = x.shape(), sub_kept = kept;
    if (split) {
      sub_x.erase(sub_x.begin());
      sub_kept.erase(sub_kept.begin());
    }
    int64_t slice_in = slices ? n_in / slices : 0, slice_out = slices ? n_out / slices : 0;
    auto layout = MakeBroadcastLayout<2>(sub_x, {&sub_x, &sub_kept});
    int64_t row = layout.dims.back(), rows = NumRows(layout);
    int64_t sx = layout.strides[0].back(), sa = layout.strides[1].back();
    // One loop per op, chosen outside it, and a unit-stride loop where the kept dims are innermost
    // (MMoE's gated sum of its experts: [rows, experts, width] summed over the experts), so that
    // the compiler vectorises them; with the op switched per element, that sum at W4's 64 pairs
    // took 2.5 times as long on one core.
    auto reduce = [&](auto combine) {
      ParallelFor(slices, slice_in, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          const T* px = x.data<T>() + b * slice_in;
          Acc* pa = acc + b * slice_out;
          for (int64_t r = 0; r < rows && row > 0; ++r) {
            auto [ox, oa] = RowOffsets(layout, r);
            const T* from = px + ox;
            Acc* to = pa + oa;
            if (sx == 1 && sa == 1) {
              for (int64_t j = 0; j < row; ++j) to[j] = combine(to[j], static_cast<Acc>(from[j]));
            } else {
              for (int64_t j = 0; j < row; ++j) to[j * sa] = combine(to[j * sa], static_cast<Acc>(from[j * sx]));
            }
          }
        }
      });
    };
    if (op == "ReduceMax") {
      reduce([](Acc a, Acc v) { return std::max(a, v); });
    } else if (op == "ReduceMin") {
      reduce([](Acc a, Acc v) { return std::min(a, v); });
    } else {
      reduce([](Acc a, Acc v) { return a + v; });
    }
    T* po = out.data<T>();
    if (op == "ReduceMean") {  // the op's name compared once, not per element
      for (int64_t i = 0; i < n_out; ++i)
        po[i] = static_cast<T>(count ? static_cast<Acc>(acc[i] / static_cast<Acc>(count)) : Acc(0));
    } else {
      for (int64_t i = 0; i < n_out; ++i) po[i] = static_cast<T>(acc[i]);
    }
  });
}

}  // namespace

void AppendReduceKernels(KernelTable& out) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) out[op] = Reduce;
}

}  // namespace rankd::cpu

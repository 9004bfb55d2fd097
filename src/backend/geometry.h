// Index arithmetic that every backend's kernels share: computed once on the host, so the CPU and
// CUDA twins of an op read their operands the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rankd/tensor.h"

namespace rankd {

// Element strides of a dense row-major shape.
inline Shape RowMajorStrides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// out[idx] = in[base + sum(idx_d * strides_d)]: the layout of a strided read.
struct StridedView {
  int64_t base = 0;
  Shape strides;
};

// ONNX Slice of `in` into `out` (whose shape the schema computed): starts clamped per ONNX rules,
// negative steps reading backwards. `axes` and `steps` may be empty (all leading axes, steps 1).
inline StridedView SliceView(const Shape& in, const Shape& out, const std::vector<int64_t>& starts,
                             std::vector<int64_t> axes, std::vector<int64_t> steps) {
  if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  const int64_t rank = static_cast<int64_t>(in.size());
  Shape in_strides = RowMajorStrides(in);
  StridedView v{0, in_strides};
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t a = static_cast<size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
    int64_t dim = in[a], s = starts[i], step = steps[i];
    if (s < 0) s += dim;
    s = step > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, -1, dim - 1);
    if (out[a] > 0) v.base += s * in_strides[a];
    v.strides[a] = step * in_strides[a];
  }
  return v;
}

// Numpy broadcast of `in` to `out`: strides 0 on broadcast dims.
inline Shape BroadcastStrides(const Shape& in, const Shape& out) {
  Shape in_strides = RowMajorStrides(in), strides(out.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) strides[out.size() - in.size() + i] = in[i] == 1 ? 0 : in_strides[i];
  return strides;
}

}  // namespace rankd

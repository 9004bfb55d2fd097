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
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  const int64_t rank = static_cast<int64_t>(in.size());
  Shape in_strides = RowMajorStrides(in);
  StridedView v{0, in_strides};
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t a = static_cast<size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
    int64_t dim = in[a], s = starts[i], step = steps[i];
    // A step longer than the axis takes one element at most: its stride is never scaled by an
    // index above 0, so it is shortened to the axis (a model's huge step would overflow it).
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
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

// A shape seen as [outer, dim, inner] around one axis (negative axes count from the end).
struct AxisSplit {
  int64_t axis = 0, outer = 1, dim = 1, inner = 1;
};
inline AxisSplit SplitAt(const Shape& s, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(s.size());
  AxisSplit r;
  r.axis = axis < 0 ? axis + rank : axis;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t d = s[static_cast<size_t>(i)];
    if (i < r.axis)
      r.outer *= d;
    else if (i == r.axis)
      r.dim = d;
    else
      r.inner *= d;
  }
  return r;
}

// MatMul's operands with numpy's rules: vectors promoted to matrices, batch dims apart.
struct MatMulGeometry {
  int64_t m = 1, k = 1, n = 1;
  Shape batch_a, batch_b, batch_out;
};
inline MatMulGeometry MatMulShapes(const Shape& a, const Shape& b, const Shape& out) {
  Shape sa = a, sb = b;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  MatMulGeometry g;
  g.m = sa[sa.size() - 2];
  g.k = sa.back();
  g.n = sb.back();
  g.batch_a.assign(sa.begin(), sa.end() - 2);
  g.batch_b.assign(sb.begin(), sb.end() - 2);
  g.batch_out = out;
  g.batch_out.resize(out.size() - (a.size() == 1 ? 0 : 1) - (b.size() == 1 ? 0 : 1));
  return g;
}

}  // namespace rankd

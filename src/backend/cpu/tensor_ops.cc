// CPU kernels of the data-movement ops (schemas in model/ops/tensor_schemas.cc).
#include <algorithm>
#include <cstring>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels.h"
#include "backend/geometry.h"
#include "common/parallel.h"

namespace rankd::cpu {
namespace {

// out[idx] = in[base + sum(idx_d * strides_d)] over out_shape; strides in elements, may be 0 or
// negative. Elements are copied as opaque units of T.
template <typename T>
void StridedCopy(const T* in, int64_t base, std::span<const int64_t> strides, const Shape& out_shape, T* out) {
  size_t rank = out_shape.size();
  if (rank == 0) {
    out[0] = in[base];
    return;
  }
  int64_t row = out_shape.back(), rows = NumElements(out_shape) / std::max<int64_t>(row, 1);
  if (row == 0) return;
  int64_t inner = strides.back();
  ParallelFor(rows, row, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t off = base, rem = r;
      for (size_t i = rank - 1; i-- > 0;) {
        off += (rem % out_shape[i]) * strides[i];
        rem /= out_shape[i];
      }
      T* z = out + r * row;
      if (inner == 1) {
        std::memcpy(z, in + off, static_cast<size_t>(row) * sizeof(T));
      } else {
        for (int64_t j = 0; j < row; ++j) z[j] = in[off + j * inner];
      }
    }
  });
}

void StridedCopyBytes(const void* in, int64_t base, std::span<const int64_t> strides, const Shape& out_shape,
                      size_t elem, void* out) {
  switch (elem) {
    case 1:
      StridedCopy(static_cast<const uint8_t*>(in), base, strides, out_shape, static_cast<uint8_t*>(out));
      break;
    case 2:
      StridedCopy(static_cast<const uint16_t*>(in), base, strides, out_shape, static_cast<uint16_t*>(out));
      break;
    case 4:
      StridedCopy(static_cast<const uint32_t*>(in), base, strides, out_shape, static_cast<uint32_t*>(out));
      break;
    default:
      StridedCopy(static_cast<const uint64_t*>(in), base, strides, out_shape, static_cast<uint64_t*>(out));
      break;
  }
}

Status CopyAlias(const KernelArgs& k) {
  // Planned as an alias (no work); a folded or unaliased run copies.
  if (k.Out(0).raw() != k.In(0).raw()) std::memcpy(k.Out(0).raw(), k.In(0).raw(), k.In(0).bytes());
  return Status::Ok();
}

Status Transpose(const KernelArgs& k) {
  const Tensor& in = k.In(0);
  std::vector<int64_t> perm = k.node.GetInts("perm");
  if (perm.empty()) {
    for (int64_t i = in.rank() - 1; i >= 0; --i) perm.push_back(i);
  }
  for (int64_t& p : perm) {
    if (p < 0) p += in.rank();
  }
  TransposeBytes(in.raw(), in.shape(), perm, DTypeSize(in.dtype()), k.Out(0).raw());
  return Status::Ok();
}

Status Slice(const KernelArgs& k) {
  const Tensor& in = k.In(0);
  Tensor& out = k.Out(0);
  auto ints = [&](int i) {
    std::vector<int64_t> v;
    if (k.HasIn(i))
      for (int64_t j = 0; j < k.In(i).size(); ++j) v.push_back(k.In(i).ScalarAsInt(j));
    return v;
  };
  StridedView v = SliceView(in.shape(), out.shape(), ints(1), ints(3), ints(4));
  if (out.size() == 0) return Status::Ok();
  StridedCopyBytes(in.raw(), v.base, v.strides, out.shape(), DTypeSize(in.dtype()), out.raw());
  return Status::Ok();
}

Status Concat(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  const AxisSplit split = SplitAt(out.shape(), k.node.GetInt("axis", 0));
  const int64_t axis = split.axis, outer = split.outer, inner = split.inner;
  size_t elem = DTypeSize(out.dtype());
  size_t out_row = static_cast<size_t>(out.dim(axis) * inner) * elem;
  auto* dst = static_cast<uint8_t*>(out.raw());
  ParallelFor(outer, out.dim(axis) * inner, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      size_t pos = static_cast<size_t>(o) * out_row;
      for (const Tensor* t : k.in) {
        size_t chunk = static_cast<size_t>(t->dim(axis) * inner) * elem;
        std::memcpy(dst + pos, static_cast<const uint8_t*>(t->raw()) + static_cast<size_t>(o) * chunk, chunk);
        pos += chunk;
      }
    }
  });
  return Status::Ok();
}

Status Gather(const KernelArgs& k) {
  const Tensor &data = k.In(0), &idx = k.In(1);
  Tensor& out = k.Out(0);
  const AxisSplit split = SplitAt(data.shape(), k.node.GetInt("axis", 0));
  const int64_t outer = split.outer, inner = split.inner, dim = split.dim, n = idx.size();
  for (int64_t j = 0; j < n; ++j) {
    int64_t v = idx.ScalarAsInt(j);
    if (v < -dim || v >= dim) {
      return InvalidArgument(k.node.Describe() + ": index " + std::to_string(v) + " is out of range [" +
                             std::to_string(-dim) + ", " + std::to_string(dim) + ")");
    }
  }
  size_t row = static_cast<size_t>(inner) * DTypeSize(data.dtype());
  const auto* src = static_cast<const uint8_t*>(data.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  ParallelFor(outer * n, inner, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t o = t / std::max<int64_t>(n, 1), j = t % std::max<int64_t>(n, 1);
      int64_t v = idx.ScalarAsInt(j);
      if (v < 0) v += dim;
      std::memcpy(dst + static_cast<size_t>(t) * row, src + static_cast<size_t>(o * dim + v) * row, row);
    }
  });
  return Status::Ok();
}

Status Expand(const KernelArgs& k) {
  const Tensor& in = k.In(0);
  Tensor& out = k.Out(0);
  if (out.size() == 0) return Status::Ok();
  StridedCopyBytes(in.raw(), 0, BroadcastStrides(in.shape(), out.shape()), out.shape(), DTypeSize(in.dtype()),
                   out.raw());
  return Status::Ok();
}

Status Tile(const KernelArgs& k) {
  const Tensor& in = k.In(0);
  Tensor& out = k.Out(0);
  size_t elem = DTypeSize(in.dtype());
  Shape in_strides = RowMajorStrides(in.shape());
  int64_t total = out.size();
  const auto* src = static_cast<const uint8_t*>(in.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    for (int64_t d = out.rank() - 1; d >= 0; --d) {
      off += (rem % out.dim(d)) % in.dim(d) * in_strides[static_cast<size_t>(d)];
      rem /= out.dim(d);
    }
    std::memcpy(dst + static_cast<size_t>(i) * elem, src + static_cast<size_t>(off) * elem, elem);
  }
  return Status::Ok();
}

Status ShapeOp(const KernelArgs& k) {
  const Shape& s = k.In(0).shape();
  int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = k.node.GetInt("start", 0);
  if (start < 0) start += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  Tensor& out = k.Out(0);
  for (int64_t i = 0; i < out.size(); ++i) out.data<int64_t>()[i] = s[static_cast<size_t>(start + i)];
  return Status::Ok();
}

Status Range(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  return DispatchNumeric(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T start = k.In(0).data<T>()[0], delta = k.In(2).data<T>()[0];
    for (int64_t i = 0; i < out.size(); ++i) out.data<T>()[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  });
}

Status ConstantOfShape(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  auto it = k.node.attrs.find("value");
  if (it == k.node.attrs.end()) {
    std::memset(out.raw(), 0, out.bytes());
    return Status::Ok();
  }
  const Tensor& v = std::get<Tensor>(it->second);
  size_t elem = DTypeSize(out.dtype());
  for (int64_t i = 0; i < out.size(); ++i) {
    std::memcpy(static_cast<uint8_t*>(out.raw()) + static_cast<size_t>(i) * elem, v.raw(), elem);
  }
  return Status::Ok();
}

}  // namespace

void TransposeBytes(const void* in, const Shape& in_shape, const std::vector<int64_t>& perm, size_t elem_size,
                    void* out) {
  Shape in_strides = RowMajorStrides(in_shape), strides;
  Shape out_shape;
  for (int64_t p : perm) {
    out_shape.push_back(in_shape[static_cast<size_t>(p)]);
    strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  if (NumElements(out_shape) == 0) return;
  StridedCopyBytes(in, 0, strides, out_shape, elem_size, out);
}

void AppendTensorKernels(KernelTable& out) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) out[op] = CopyAlias;
  out["Transpose"] = Transpose;
  out["Slice"] = Slice;
  out["Concat"] = Concat;
  out["Gather"] = Gather;
  out["Expand"] = Expand;
  out["Tile"] = Tile;
  out["Shape"] = ShapeOp;
  out["Range"] = Range;
  out["ConstantOfShape"] = ConstantOfShape;
}

}  // namespace rankd::cpu

// CUDA kernels of the data-movement ops (cpu/tensor_ops.cc is the reference). Index-shaped
// operands (Slice starts, Tile repeats) are plan constants read on the host.
#include <algorithm>
#include <cstring>

#include "backend/cuda/device.h"
#include "backend/cuda/dtypes.cuh"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"

namespace rankd::cuda {

namespace {

template <typename T>
__global__ void StridedCopyKernel(IndexMap<1> m, int64_t n, const T* in, int64_t base, T* out) {
  RANKD_GRID_LOOP(i, n) {
    int64_t off[1];
    m.Offsets(i, off);
    out[i] = in[base + off[0]];
  }
}

}  // namespace

Status StridedCopy(const KernelArgs& k, const void* in, int64_t base, const Shape& strides, const Shape& out_shape,
                   size_t elem_size, void* out) {
  int64_t n = NumElements(out_shape);
  if (n == 0) return Status::Ok();
  RANKD_ASSIGN_OR_RETURN(IndexMap<1> m, StridedMap(out_shape, strides));
  m.contiguous[0] = false;
  cudaStream_t s = k.device->stream;
  switch (elem_size) {
    case 1:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, s>>>(m, n, static_cast<const uint8_t*>(in), base,
                                                       static_cast<uint8_t*>(out));
      break;
    case 2:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, s>>>(m, n, static_cast<const uint16_t*>(in), base,
                                                       static_cast<uint16_t*>(out));
      break;
    case 4:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, s>>>(m, n, static_cast<const uint32_t*>(in), base,
                                                       static_cast<uint32_t*>(out));
      break;
    default:
      StridedCopyKernel<<<Blocks(n), kThreads, 0, s>>>(m, n, static_cast<const uint64_t*>(in), base,
                                                       static_cast<uint64_t*>(out));
      break;
  }
  return Launched(k);
}

Status TransposeDevice(const KernelArgs& k, const void* in, const Shape& in_shape, const std::vector<int64_t>& perm,
                       size_t elem_size, void* out) {
  Shape in_strides = RowMajorStrides(in_shape), strides, out_shape;
  for (int64_t p : perm) {
    out_shape.push_back(in_shape[static_cast<size_t>(p)]);
    strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  return StridedCopy(k, in, 0, strides, out_shape, elem_size, out);
}

Status BroadcastCopy(const KernelArgs& k, const Tensor& in, const Shape& out_shape, void* out) {
  return StridedCopy(k, in.raw(), 0, BroadcastStrides(in.shape(), out_shape), out_shape, DTypeSize(in.dtype()), out);
}

namespace {

// Reads the values of a constant integer operand on the host.
StatusOr<std::vector<int64_t>> HostInts(const KernelArgs& k, int i) {
  std::vector<int64_t> v;
  if (!k.HasIn(i)) return v;
  const Tensor* t = k.HostIn(i);
  if (!t) return Unimplemented(k.node.Describe() + ": input " + std::to_string(i) + " must be a constant on cuda");
  for (int64_t j = 0; j < t->size(); ++j) v.push_back(t->ScalarAsInt(j));
  return v;
}

Status CopyAlias(const KernelArgs& k) {
  if (k.Out(0).raw() == k.In(0).raw() || k.In(0).bytes() == 0) return Status::Ok();
  return Check(
      cudaMemcpyAsync(k.Out(0).raw(), k.In(0).raw(), k.In(0).bytes(), cudaMemcpyDeviceToDevice, k.device->stream),
      "cudaMemcpyAsync");
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
  return TransposeDevice(k, in.raw(), in.shape(), perm, DTypeSize(in.dtype()), k.Out(0).raw());
}

Status Slice(const KernelArgs& k) {
  const Tensor& in = k.In(0);
  Tensor& out = k.Out(0);
  RANKD_ASSIGN_OR_RETURN(std::vector<int64_t> starts, HostInts(k, 1));
  RANKD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, HostInts(k, 3));
  RANKD_ASSIGN_OR_RETURN(std::vector<int64_t> steps, HostInts(k, 4));
  StridedView v = SliceView(in.shape(), out.shape(), starts, axes, steps);
  return StridedCopy(k, in.raw(), v.base, v.strides, out.shape(), DTypeSize(in.dtype()), out.raw());
}

namespace {

// Up to this many inputs go into one Concat launch (the parameters are passed by value).
constexpr int kConcatPieces = 32;

struct ConcatPieces {
  const void* src[kConcatPieces];
  int64_t units[kConcatPieces];   // copy units per outer row
  int64_t offset[kConcatPieces];  // where the piece starts in an output row, in units
};

// blockIdx.y picks the piece; the x blocks stride over its outer rows × units.
template <typename U>
__global__ void ConcatKernel(ConcatPieces p, int64_t outer, int64_t out_units, U* out) {
  const int piece = static_cast<int>(blockIdx.y);
  const U* src = static_cast<const U*>(p.src[piece]);
  const int64_t units = p.units[piece], offset = p.offset[piece], total = outer * units;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i / units;
    out[r * out_units + offset + (i - r * units)] = src[i];
  }
}

// The widest copy unit (16, 8, 4, 2 or 1 bytes) that divides every size and address.
size_t ConcatUnit(const std::vector<uint64_t>& values) {
  for (size_t unit : {16, 8, 4, 2}) {
    if (std::all_of(values.begin(), values.end(), [&](uint64_t v) { return v % unit == 0; })) return unit;
  }
  return 1;
}

}  // namespace

// One launch per 32 inputs (not one copy per input): each output row is the inputs' rows side by
// side, copied in the widest unit their sizes and addresses allow.
Status Concat(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  const AxisSplit split = SplitAt(out.shape(), k.node.GetInt("axis", 0));
  const int64_t axis = split.axis, outer = split.outer, inner = split.inner;
  const size_t elem = DTypeSize(out.dtype());
  const size_t out_row = static_cast<size_t>(out.dim(axis) * inner) * elem;
  if (outer == 0 || out_row == 0) return Status::Ok();
  struct Piece {
    const void* src;
    size_t bytes, offset;  // per outer row
  };
  std::vector<Piece> pieces;
  std::vector<uint64_t> sizes = {out_row, reinterpret_cast<uint64_t>(out.raw())};
  size_t pos = 0;
  for (const Tensor* t : k.in) {
    size_t chunk = static_cast<size_t>(t->dim(axis) * inner) * elem;
    if (chunk > 0) {
      pieces.push_back({t->raw(), chunk, pos});
      sizes.insert(sizes.end(), {chunk, pos, reinterpret_cast<uint64_t>(t->raw())});
    }
    pos += chunk;
  }
  const size_t unit = ConcatUnit(sizes);
  cudaStream_t s = k.device->stream;
  for (size_t first = 0; first < pieces.size(); first += kConcatPieces) {
    ConcatPieces p{};
    size_t n = std::min<size_t>(kConcatPieces, pieces.size() - first);
    int64_t widest = 0;
    for (size_t i = 0; i < n; ++i) {
      p.src[i] = pieces[first + i].src;
      p.units[i] = static_cast<int64_t>(pieces[first + i].bytes / unit);
      p.offset[i] = static_cast<int64_t>(pieces[first + i].offset / unit);
      widest = std::max(widest, p.units[i]);
    }
    dim3 grid(Blocks(outer * widest), static_cast<unsigned>(n));
    int64_t row = static_cast<int64_t>(out_row / unit);
    switch (unit) {
      case 16:
        ConcatKernel<<<grid, kThreads, 0, s>>>(p, outer, row, static_cast<uint4*>(out.raw()));
        break;
      case 8:
        ConcatKernel<<<grid, kThreads, 0, s>>>(p, outer, row, static_cast<uint64_t*>(out.raw()));
        break;
      case 4:
        ConcatKernel<<<grid, kThreads, 0, s>>>(p, outer, row, static_cast<uint32_t*>(out.raw()));
        break;
      case 2:
        ConcatKernel<<<grid, kThreads, 0, s>>>(p, outer, row, static_cast<uint16_t*>(out.raw()));
        break;
      default:
        ConcatKernel<<<grid, kThreads, 0, s>>>(p, outer, row, static_cast<uint8_t*>(out.raw()));
        break;
    }
    RANKD_RETURN_IF_ERROR(Launched(k));
  }
  return Status::Ok();
}

// A word of a cached row's slot, read past L1 (RowCacheView).
template <typename T>
__device__ T LoadPastL1(const T* p) {
  if constexpr (sizeof(T) == 8) {
    return static_cast<T>(__ldcg(reinterpret_cast<const unsigned long long*>(p)));
  } else {
    return __ldcg(p);
  }
}

// With `cache` (a Gather of rows, axis 0, from a table with a device cache), a cached row is read
// from its slot.
template <typename T, typename Idx>
__global__ void GatherKernel(int64_t total, int64_t n, int64_t inner, int64_t dim, const T* data, const Idx* idx,
                             T* out, int* error, int step, RowCacheView cache) {
  RANKD_GRID_LOOP(i, total) {
    int64_t e = i % inner, t = i / inner;
    int64_t o = t / n, j = t % n;
    int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0) v += dim;
    if (v < 0 || v >= dim) {
      ReportBadData(error, step);
      out[i] = T{};
      continue;
    }
    const int32_t slot = cache.slot_of_row ? __ldcg(cache.slot_of_row + v) : -1;
    if (slot >= 0) {
      out[i] = LoadPastL1(static_cast<const T*>(cache.slots) + slot * inner + e);
      continue;
    }
    out[i] = data[(o * dim + v) * inner + e];
  }
}

Status Gather(const KernelArgs& k) {
  const Tensor &data = k.In(0), &idx = k.In(1);
  Tensor& out = k.Out(0);
  const AxisSplit split = SplitAt(data.shape(), k.node.GetInt("axis", 0));
  const int64_t outer = split.outer, inner = split.inner, dim = split.dim, n = idx.size();
  int64_t total = outer * n * inner;
  if (total == 0) return Status::Ok();
  size_t elem = DTypeSize(data.dtype());
  // Rows of 4-byte words when they fit, else elements.
  int64_t words_inner = inner;
  size_t unit = elem;
  if ((inner * static_cast<int64_t>(elem)) % 4 == 0 && elem < 4) {
    words_inner = inner * static_cast<int64_t>(elem) / 4;
    unit = 4;
  }
  int64_t words_total = outer * n * words_inner;
  const int cached = outer == 1 && k.device->row_caches ? k.device->row_caches->Find(data.raw()) : -1;
  const RowCacheView cache = cached >= 0 ? k.device->row_caches->views[static_cast<size_t>(cached)] : RowCacheView{};
  auto launch = [&](auto word_tag, auto idx_tag) {
    using W = decltype(word_tag);
    using I = decltype(idx_tag);
    GatherKernel<<<Blocks(words_total), kThreads, 0, k.device->stream>>>(
        words_total, n, words_inner, dim, static_cast<const W*>(data.raw()), idx.data<I>(), static_cast<W*>(out.raw()),
        k.device->error, k.step, cache);
  };
  auto with_idx = [&](auto word_tag) {
    if (idx.dtype() == DType::kI32)
      launch(word_tag, int32_t{});
    else
      launch(word_tag, int64_t{});
  };
  switch (unit) {
    case 1:
      with_idx(uint8_t{});
      break;
    case 2:
      with_idx(uint16_t{});
      break;
    case 4:
      with_idx(uint32_t{});
      break;
    default:
      with_idx(uint64_t{});
      break;
  }
  return Launched(k);
}

Status Expand(const KernelArgs& k) { return BroadcastCopy(k, k.In(0), k.Out(0).shape(), k.Out(0).raw()); }

template <typename T>
__global__ void TileKernel(IndexMap<1> out_map, IndexMap<1> in_map, int64_t n, const T* in, T* out) {
  RANKD_GRID_LOOP(i, n) {
    int64_t rem = i, off = 0;
    for (int d = out_map.rank - 1; d >= 0; --d) {
      off += (rem % out_map.dims[d]) % in_map.dims[d] * in_map.strides[0][d];
      rem /= out_map.dims[d];
    }
    out[i] = in[off];
  }
}

Status Tile(const KernelArgs& k) {
  const Tensor& in = k.In(0);
  Tensor& out = k.Out(0);
  if (out.size() == 0) return Status::Ok();
  RANKD_ASSIGN_OR_RETURN(IndexMap<1> out_map, StridedMap(out.shape(), RowMajorStrides(out.shape())));
  RANKD_ASSIGN_OR_RETURN(IndexMap<1> in_map, StridedMap(in.shape(), RowMajorStrides(in.shape())));
  cudaStream_t s = k.device->stream;
  int64_t n = out.size();
  switch (DTypeSize(in.dtype())) {
    case 1:
      TileKernel<<<Blocks(n), kThreads, 0, s>>>(out_map, in_map, n, in.data<uint8_t>(), out.data<uint8_t>());
      break;
    case 2:
      TileKernel<<<Blocks(n), kThreads, 0, s>>>(out_map, in_map, n, in.data<uint16_t>(), out.data<uint16_t>());
      break;
    case 4:
      TileKernel<<<Blocks(n), kThreads, 0, s>>>(out_map, in_map, n, in.data<uint32_t>(), out.data<uint32_t>());
      break;
    default:
      TileKernel<<<Blocks(n), kThreads, 0, s>>>(out_map, in_map, n, in.data<uint64_t>(), out.data<uint64_t>());
      break;
  }
  return Launched(k);
}

// Up to 8 values of 8 bytes, passed by value to a fill kernel.
struct Values {
  uint64_t v[kMaxRank];
};

template <typename T>
__global__ void FillKernel(int64_t n, Values values, bool repeat_first, T* out) {
  RANKD_GRID_LOOP(i, n) {
    uint64_t bits = values.v[repeat_first ? 0 : i];
    T x;
    memcpy(&x, &bits, sizeof(T));
    out[i] = x;
  }
}

Status Fill(const KernelArgs& k, Tensor& out, const Values& values, bool repeat_first) {
  int64_t n = out.size();
  if (n == 0) return Status::Ok();
  cudaStream_t s = k.device->stream;
  switch (DTypeSize(out.dtype())) {
    case 1:
      FillKernel<<<Blocks(n), kThreads, 0, s>>>(n, values, repeat_first, out.data<uint8_t>());
      break;
    case 2:
      FillKernel<<<Blocks(n), kThreads, 0, s>>>(n, values, repeat_first, out.data<uint16_t>());
      break;
    case 4:
      FillKernel<<<Blocks(n), kThreads, 0, s>>>(n, values, repeat_first, out.data<uint32_t>());
      break;
    default:
      FillKernel<<<Blocks(n), kThreads, 0, s>>>(n, values, repeat_first, out.data<uint64_t>());
      break;
  }
  return Launched(k);
}

Status ShapeOp(const KernelArgs& k) {
  const Shape& s = k.In(0).shape();
  int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = std::clamp<int64_t>(
      k.node.GetInt("start", 0) < 0 ? k.node.GetInt("start", 0) + rank : k.node.GetInt("start", 0), 0, rank);
  Tensor& out = k.Out(0);
  if (out.size() > kMaxRank) return Unimplemented(k.node.Describe() + ": rank above 8 on cuda");
  Values v{};
  for (int64_t i = 0; i < out.size(); ++i) v.v[i] = static_cast<uint64_t>(s[static_cast<size_t>(start + i)]);
  return Fill(k, out, v, false);
}

template <typename T>
__global__ void RangeKernel(int64_t n, const T* start, const T* delta, T* out) {
  RANKD_GRID_LOOP(i, n) out[i] = static_cast<T>(*start + static_cast<T>(i) * *delta);
}

Status Range(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  if (out.size() == 0) return Status::Ok();
  return DispatchNumeric(out.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    RangeKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(out.size(), k.In(0).data<T>(), k.In(2).data<T>(),
                                                                       out.data<T>());
    return Launched(k);
  });
}

Status ConstantOfShape(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  Values v{};
  auto it = k.node.attrs.find("value");
  if (it != k.node.attrs.end()) std::memcpy(&v.v[0], std::get<Tensor>(it->second).raw(), DTypeSize(out.dtype()));
  return Fill(k, out, v, true);
}

}  // namespace

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

}  // namespace rankd::cuda

// Walking an output shape against broadcast inputs, one innermost row at a time.
//
// The layout collapses adjacent dims that every input walks the same way, so the innermost row is
// as long as possible; inside a row each input's stride is 1 (it varies) or 0 (it is broadcast).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "common/parallel.h"
#include "rankd/tensor.h"

namespace rankd::cpu {

// Held in Shapes (their dims inline): a layout is made every run of an op.
template <int N>
struct BroadcastLayout {
  Shape dims;                    // collapsed output dims (at least one)
  std::array<Shape, N> strides;  // per input, per collapsed dim
};

template <int N>
BroadcastLayout<N> MakeBroadcastLayout(const Shape& out, const std::array<const Shape*, N>& ins) {
  size_t rank = out.size();
  std::array<Shape, N> full;
  for (int k = 0; k < N; ++k) {
    const Shape& s = *ins[static_cast<size_t>(k)];
    full[k].assign(rank, 0);
    int64_t stride = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      size_t d = s.size() - 1 - i, o = rank - 1 - i;
      full[k][o] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  BroadcastLayout<N> l;
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;  // size-1 dims carry no iteration
    bool merge = !l.dims.empty();
    for (int k = 0; k < N && merge; ++k) {
      merge = l.strides[k].back() == full[k][i] * out[i];
    }
    if (merge) {
      l.dims.back() *= out[i];
      for (int k = 0; k < N; ++k) l.strides[k].back() = full[k][i];
    } else {
      l.dims.push_back(out[i]);
      for (int k = 0; k < N; ++k) l.strides[k].push_back(full[k][i]);
    }
  }
  if (l.dims.empty()) {
    l.dims.push_back(1);
    for (int k = 0; k < N; ++k) l.strides[k].push_back(0);
  }
  return l;
}

// Number of innermost rows: the product of every dim but the last.
template <int N>
int64_t NumRows(const BroadcastLayout<N>& l) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < l.dims.size(); ++i) rows *= l.dims[i];
  return rows;
}

// Each input's element offset at the start of innermost row r.
template <int N>
std::array<int64_t, N> RowOffsets(const BroadcastLayout<N>& l, int64_t r) {
  std::array<int64_t, N> off{};
  for (size_t i = l.dims.size() - 1; i-- > 0;) {
    int64_t idx = r % l.dims[i];
    r /= l.dims[i];
    for (int k = 0; k < N; ++k) off[k] += idx * l.strides[k][i];
  }
  return off;
}

// fn(out_offset, in_offsets[N], length, in_row_strides[N]) over the innermost rows, in parallel.
// Long rows are cut into pieces so that a tensor that collapses to a few rows still uses every thread.
template <int N, typename F>
void ForEachRow(const BroadcastLayout<N>& l, F&& fn) {
  int64_t row = l.dims.back();
  int64_t rows = NumRows(l);
  if (row == 0 || rows == 0) return;  // an empty output (a length-0 sequence, say)
  std::array<int64_t, N> row_stride;
  for (int k = 0; k < N; ++k) row_stride[k] = l.strides[k].back();
  constexpr int64_t kMinPiece = 16384;
  int64_t threads = omp_get_max_threads();
  int64_t pieces =
      rows >= threads * 4 ? 1 : std::max<int64_t>(1, std::min(row / kMinPiece, (threads * 4 + rows - 1) / rows));
  int64_t piece_len = (row + pieces - 1) / pieces;
  ParallelFor(rows * pieces, piece_len, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t r = item / pieces, start = (item % pieces) * piece_len;
      int64_t len = std::min(piece_len, row - start);
      if (len <= 0) continue;
      std::array<int64_t, N> off = RowOffsets(l, r);
      for (int k = 0; k < N; ++k) off[k] += start * row_stride[k];
      fn(r * row + start, off, len, row_stride);
    }
  });
}

}  // namespace rankd::cpu

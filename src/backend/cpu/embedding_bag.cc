// CPU kernels of EmbeddingBag (padded or ragged ids, negative = empty slot), ConcatEmbeddingBags
// (bags pooled straight into their columns of a concatenation) and RaggedToPadded.
#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels.h"
#include "common/parallel.h"
#include "model/ops/bag_combiner.h"

namespace rankd::cpu {
namespace {

template <typename Row>
inline void MaxRow(const Row* row, int64_t dim, bool first, float* acc) {
  for (int64_t d = 0; d < dim; ++d) {
    const auto v = static_cast<float>(ToDouble(row[d]));
    acc[d] = first ? v : std::max(acc[d], v);
  }
}

template <typename Row>
inline void AccumulateRow(const Row* row, int64_t dim, float* acc) {
  for (int64_t d = 0; d < dim; ++d) acc[d] += static_cast<float>(ToDouble(row[d]));
}
template <>
inline void AccumulateRow<float>(const float* row, int64_t dim, float* acc) {
  for (int64_t d = 0; d < dim; ++d) acc[d] += row[d];
}

template <typename Row>
inline void AccumulateWeightedRow(const Row* row, int64_t dim, float weight, float* acc) {
  for (int64_t d = 0; d < dim; ++d) acc[d] += weight * static_cast<float>(ToDouble(row[d]));
}
template <>
inline void AccumulateWeightedRow<float>(const float* row, int64_t dim, float weight, float* acc) {
  for (int64_t d = 0; d < dim; ++d) acc[d] += weight * row[d];
}

// Bag b reads ids[begin(b) .. end(b)) (with weights, each row times its id's weight) and writes
// out[b * out_stride, + dim). An empty bag gives `empty` (zeros but for a masked max's fill).
template <typename Row, typename Id, typename Bounds>
void Pool(const Row* table, int64_t dim, const Id* ids, const float* weights, int64_t bags, Bounds bounds, int combiner,
          float empty, float* out, int64_t out_stride) {
  ParallelFor(bags, dim * 8, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      float* acc = out + b * out_stride;
      std::memset(acc, 0, static_cast<size_t>(dim) * sizeof(float));
      auto [lo, hi] = bounds(b);
      int64_t count = 0;
      float weight_sum = 0.0f, weight_squares = 0.0f;
      for (int64_t j = lo; j < hi; ++j) {
        int64_t id = static_cast<int64_t>(ids[j]);
        if (id < 0) continue;
        if (weights) {
          AccumulateWeightedRow(table + id * dim, dim, weights[j], acc);
          weight_sum += weights[j];
          weight_squares += weights[j] * weights[j];
        } else if (combiner == kBagMax) {
          MaxRow(table + id * dim, dim, count == 0, acc);
        } else {
          AccumulateRow(table + id * dim, dim, acc);
        }
        ++count;
      }
      if (count == 0 && empty != 0.0f) std::fill(acc, acc + dim, empty);
      const float scale = weights ? WeightedBagScale(combiner, weight_sum, weight_squares) : BagScale(combiner, count);
      if (scale != 1.0f) {
        for (int64_t d = 0; d < dim; ++d) acc[d] *= scale;
      }
    }
  });
}

template <typename Id>
Status CheckIds(const Tensor& ids, int64_t count, int64_t rows, const Node& node) {
  const Id* p = ids.data<Id>();
  for (int64_t i = 0; i < count; ++i) {
    if (static_cast<int64_t>(p[i]) >= rows) {
      return InvalidArgument(node.Describe() + ": id " + std::to_string(p[i]) + " is out of range for a table of " +
                             std::to_string(rows) + " rows");
    }
  }
  return Status::Ok();
}

// Pools the bag whose inputs are in[first, first + count) (table, ids[, offsets[, weights]], as
// EmbeddingBag) into out[b * out_stride, + dim) for every bag b; an empty one gives `empty`.
Status PoolBags(const KernelArgs& k, int first, int count, int combiner, float* out, int64_t out_stride,
                float empty = 0.0f) {
  const Tensor& table = k.In(first);
  const Tensor& ids = k.In(first + 1);
  int64_t rows = table.dim(0), dim = table.dim(1);
  bool ragged = count >= 3;
  const float* weights = count == 4 ? k.In(first + 3).data<float>() : nullptr;
  int64_t bags = ragged ? k.In(first + 2).dim(0) - 1 : ids.dim(0);
  const int64_t* offsets = ragged ? k.In(first + 2).data<int64_t>() : nullptr;
  if (ragged) {
    // Ids past the last offset belong to no bag (a bucket's padding, docs/buckets.md), as on CUDA.
    if (offsets[0] != 0 || offsets[bags] > ids.size()) {
      return InvalidArgument(k.node.Describe() + ": offsets point outside the ids");
    }
    for (int64_t b = 0; b < bags; ++b) {
      if (offsets[b + 1] < offsets[b]) return InvalidArgument(k.node.Describe() + ": offsets decrease");
    }
    if (weights && offsets[bags] > k.In(first + 3).size()) {
      return InvalidArgument(k.node.Describe() + ": " + std::to_string(k.In(first + 3).size()) + " weights for " +
                             std::to_string(offsets[bags]) + " ids");
    }
  }
  int64_t width = ragged ? 0 : ids.dim(1);
  auto run = [&](auto id_tag) -> Status {
    using Id = decltype(id_tag);
    // Only the ids some bag reads, as on CUDA: those past the last offset belong to no bag.
    RANKD_RETURN_IF_ERROR(CheckIds<Id>(ids, ragged ? offsets[bags] : ids.size(), rows, k.node));
    auto bounds = [&](int64_t b) {
      return ragged ? std::pair<int64_t, int64_t>{offsets[b], offsets[b + 1]}
                    : std::pair<int64_t, int64_t>{b * width, (b + 1) * width};
    };
    return DispatchAny(table.dtype(), [&](auto row_tag) {
      using Row = decltype(row_tag);
      if constexpr (std::is_same_v<Row, float> || std::is_same_v<Row, Half> || std::is_same_v<Row, BFloat16>) {
        Pool(table.data<Row>(), dim, ids.data<Id>(), weights, bags, bounds, combiner, empty, out, out_stride);
      }
    });
  };
  return ids.dtype() == DType::kI32 ? run(int32_t{}) : run(int64_t{});
}

Status EmbeddingBag(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  const int combiner = BagCombinerFromName(k.node.GetString("mode", "sum")).value_or(kBagSum);
  return PoolBags(k, 0, static_cast<int>(k.in.size()), combiner, out.data<float>(), out.dim(1),
                  k.node.GetFloat("empty", 0.0f));
}

// out[b * out_stride, + dim) = table[max(ids[b, column], floor)] (Gather's rules: a negative id
// counts from the end, one out of range is an error).
Status LookUpColumn(const KernelArgs& k, int first, int64_t column, int64_t floor, float* out, int64_t out_stride) {
  const Tensor& table = k.In(first);
  const Tensor& ids = k.In(first + 1);
  int64_t rows = table.dim(0), dim = table.dim(1), bags = ids.dim(0), width = ids.dim(1);
  // Bag b's row: checked for every bag first, then read again where it is copied (no list of them).
  auto row_of = [&](int64_t b) {
    int64_t id =
        ids.dtype() == DType::kI32 ? ids.data<int32_t>()[b * width + column] : ids.data<int64_t>()[b * width + column];
    id = std::max(id, floor);
    return id < 0 ? id + rows : id;
  };
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t id = row_of(b);
    if (id < 0 || id >= rows) {
      return InvalidArgument(k.node.Describe() + ": id " + std::to_string(id < 0 ? id - rows : id) +
                             " is out of range for a table of " + std::to_string(rows) + " rows");
    }
  }
  return DispatchAny(table.dtype(), [&](auto row_tag) {
    using Row = decltype(row_tag);
    if constexpr (std::is_same_v<Row, float> || std::is_same_v<Row, Half> || std::is_same_v<Row, BFloat16>) {
      const Row* t = table.data<Row>();
      ParallelFor(bags, dim, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          float* dst = out + b * out_stride;
          const Row* row = t + row_of(b) * dim;
          if constexpr (std::is_same_v<Row, float>) {
            std::copy(row, row + dim, dst);  // bit for bit, as Gather
          } else {
            std::fill(dst, dst + dim, 0.0f);
            AccumulateRow(row, dim, dst);
          }
        }
      });
    }
  });
}

Status ConcatEmbeddingBags(const KernelArgs& k) {
  Tensor& out = k.Out(0);
  int64_t stride = out.dim(1);
  const std::span<const int64_t> parts = k.node.IntsView("parts"), modes = k.node.IntsView("modes"),
                                 columns = k.node.IntsView("columns"), floors = k.node.IntsView("floors");
  int first = 0;
  int64_t column = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    int count = static_cast<int>(parts[p]);
    float* dst = out.data<float>() + column;
    if (count == 1) {
      const Tensor& dense = k.In(first);
      int64_t w = dense.dim(1);
      const float* src = dense.data<float>();
      ParallelFor(dense.dim(0), w, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r)
          std::memcpy(dst + r * stride, src + r * w, static_cast<size_t>(w) * sizeof(float));
      });
      column += w;
    } else if (!columns.empty() && columns[p] >= 0) {
      const int64_t floor = floors.empty() ? std::numeric_limits<int64_t>::min() : floors[p];
      RANKD_RETURN_IF_ERROR(LookUpColumn(k, first, columns[p], floor, dst, stride));
      column += k.In(first).dim(1);
    } else {
      RANKD_RETURN_IF_ERROR(PoolBags(k, first, count, static_cast<int>(modes[p]), dst, stride));
      column += k.In(first).dim(1);
    }
    first += count;
  }
  return Status::Ok();
}

Status RaggedToPadded(const KernelArgs& k) {
  const Tensor &values = k.In(0), &offsets = k.In(1);
  Tensor& out = k.Out(0);
  int64_t bags = out.dim(0), width = out.dim(1);
  const int64_t* off = offsets.data<int64_t>();
  size_t elem = DTypeSize(values.dtype());
  for (int64_t b = 0; b < bags; ++b) {
    int64_t len = off[b + 1] - off[b];
    if (len < 0 || len > width || off[b + 1] > values.size()) {
      return InvalidArgument(k.node.Describe() + ": ragged row " + std::to_string(b) +
                             " does not fit the padded width " + std::to_string(width));
    }
    auto* dst = static_cast<uint8_t*>(out.raw()) + static_cast<size_t>(b * width) * elem;
    std::memcpy(dst, static_cast<const uint8_t*>(values.raw()) + static_cast<size_t>(off[b]) * elem,
                static_cast<size_t>(len) * elem);
    for (int64_t j = len; j < width; ++j) {
      if (elem == 8)
        reinterpret_cast<int64_t*>(dst)[j] = -1;
      else
        reinterpret_cast<int32_t*>(dst)[j] = -1;
    }
  }
  return Status::Ok();
}

}  // namespace

void AppendEmbeddingKernels(KernelTable& out) {
  out["EmbeddingBag"] = EmbeddingBag;
  out["ConcatEmbeddingBags"] = ConcatEmbeddingBags;
  out["RaggedToPadded"] = RaggedToPadded;
}

}  // namespace rankd::cpu

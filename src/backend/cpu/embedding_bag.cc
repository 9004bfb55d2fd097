// CPU kernels of EmbeddingBag (padded or ragged ids, negative = empty slot) and RaggedToPadded.
#include <cstring>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels.h"
#include "common/parallel.h"

namespace rankd::cpu {
namespace {

template <typename Row>
inline void AccumulateRow(const Row* row, int64_t dim, float* acc) {
  for (int64_t d = 0; d < dim; ++d) acc[d] += static_cast<float>(ToDouble(row[d]));
}
template <>
inline void AccumulateRow<float>(const float* row, int64_t dim, float* acc) {
  for (int64_t d = 0; d < dim; ++d) acc[d] += row[d];
}

// Bag b reads ids[begin(b) .. end(b)).
template <typename Row, typename Id, typename Bounds>
void Pool(const Row* table, int64_t dim, const Id* ids, int64_t bags, Bounds bounds, bool mean,
          float* out) {
  ParallelFor(bags, dim * 8, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      float* acc = out + b * dim;
      std::memset(acc, 0, static_cast<size_t>(dim) * sizeof(float));
      auto [lo, hi] = bounds(b);
      int64_t count = 0;
      for (int64_t j = lo; j < hi; ++j) {
        int64_t id = static_cast<int64_t>(ids[j]);
        if (id < 0) continue;
        AccumulateRow(table + id * dim, dim, acc);
        ++count;
      }
      if (mean && count > 1) {
        float inv = 1.0f / static_cast<float>(count);
        for (int64_t d = 0; d < dim; ++d) acc[d] *= inv;
      }
    }
  });
}

template <typename Id>
Status CheckIds(const Tensor& ids, int64_t rows, const Node& node) {
  const Id* p = ids.data<Id>();
  for (int64_t i = 0; i < ids.size(); ++i) {
    if (static_cast<int64_t>(p[i]) >= rows) {
      return InvalidArgument(node.Describe() + ": id " + std::to_string(p[i]) +
                             " is out of range for a table of " + std::to_string(rows) + " rows");
    }
  }
  return Status::Ok();
}

Status EmbeddingBag(const KernelArgs& k) {
  const Tensor& table = k.In(0);
  const Tensor& ids = k.In(1);
  Tensor& out = k.Out(0);
  int64_t rows = table.dim(0), dim = table.dim(1), bags = out.dim(0);
  bool mean = k.node.GetString("mode", "sum") == "mean";
  bool ragged = k.in.size() == 3;
  const int64_t* offsets = ragged ? k.In(2).data<int64_t>() : nullptr;
  if (ragged) {
    if (offsets[0] != 0 || offsets[bags] != ids.size()) {
      return InvalidArgument(k.node.Describe() + ": offsets do not cover the ids");
    }
    for (int64_t b = 0; b < bags; ++b) {
      if (offsets[b + 1] < offsets[b]) return InvalidArgument(k.node.Describe() + ": offsets decrease");
    }
  }
  int64_t width = ragged ? 0 : ids.dim(1);
  auto run = [&](auto id_tag) -> Status {
    using Id = decltype(id_tag);
    RETURN_IF_ERROR(CheckIds<Id>(ids, rows, k.node));
    auto bounds = [&](int64_t b) {
      return ragged ? std::pair<int64_t, int64_t>{offsets[b], offsets[b + 1]}
                    : std::pair<int64_t, int64_t>{b * width, (b + 1) * width};
    };
    Status s = DispatchAny(table.dtype(), [&](auto row_tag) {
      using Row = decltype(row_tag);
      if constexpr (std::is_same_v<Row, float> || std::is_same_v<Row, Half> || std::is_same_v<Row, BFloat16>) {
        Pool(table.data<Row>(), dim, ids.data<Id>(), bags, bounds, mean, out.data<float>());
      }
    });
    return s;
  };
  return ids.dtype() == DType::kI32 ? run(int32_t{}) : run(int64_t{});
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
      if (elem == 8) reinterpret_cast<int64_t*>(dst)[j] = -1;
      else reinterpret_cast<int32_t*>(dst)[j] = -1;
    }
  }
  return Status::Ok();
}

}  // namespace

void AppendEmbeddingKernels(std::map<std::string, KernelFn>& out) {
  out["EmbeddingBag"] = EmbeddingBag;
  out["RaggedToPadded"] = RaggedToPadded;
}

}  // namespace rankd::cpu

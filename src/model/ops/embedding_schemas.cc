// Shape functions of rankd's own ops (not in ONNX):
//   EmbeddingBag(table [R, D], ids [B, L])              -- padded ids, negative ids are empty slots
//   EmbeddingBag(table [R, D], values [T], offsets [B+1]) -- ragged ids: bag b is
//     values[offsets[b], offsets[b+1]); values past offsets[B] belong to no bag
//   EmbeddingBag(table [R, D], values [T], offsets [B+1], weights [T]) -- ragged ids with a FP32
//     weight each (PyTorch's per_sample_weights, TensorFlow's weighted categorical columns): every
//     row is multiplied by its id's weight; "sum" sums them, "mean" divides by the weights' sum,
//     "sqrtn" by the square root of their squares' sum (TensorFlow's weighted combiners; a divisor
//     of 0 gives zeros); no "max"
//     attribute mode: "sum" (default), "mean", "sqrtn" or "max"; output [B, D] FP32; an empty bag
//     gives zeros, or with mode "max" the attribute `empty` where given (a masked max's fill:
//     -inf, as PyTorch's `masked_fill(~mask, -inf).amax(1)` gives a bag of no ids).
//   ConcatEmbeddingBags(parts...) -> [B, sum of widths] FP32: a Concat along the last axis whose
//     parts are bags (2 or 3 inputs, as EmbeddingBag; 4, a weighted sum) or FP32 [B, w] values (1 input), pooled or
//     copied straight into their columns; attribute `parts` gives each part's input count,
//     `modes` each part's pooling (0 sum, 1 mean; 0 for a copied part); optional `columns`, per
//     part -1, or for a padded-ids part the one column c it reads: out = table[ids[:, c]], as
//     Gather(table, Gather(ids, c, axis=1)) (a negative id counts from the table's end); optional
//     `floors`, per part INT64_MIN, or for such a part the least id it reads: an id below it
//     reads as it, as Gather(table, Clip(ids, floor)) (before a negative one counts from the end).
//   RaggedToPadded(values [T], offsets [B+1]) -> [B, max length] padded with `pad_value` (-1);
//     attribute ragged_index: which ragged input of the plan gives the padded length.
//   KeyedRows(ids_0, index_0, ...) -> rows_0, ...: keyed tables' keys mapped to their rows
//     (model/ops/keyed_rows.h).
#include <algorithm>
#include <limits>

#include "model/ops/bag_combiner.h"
#include "model/ops/keyed_rows.h"
#include "model/ops/op_schema.h"

namespace rankd {
namespace {

bool IsIndex(DType t) { return t == DType::kI64 || t == DType::kI32; }

Status CheckEmbeddingBag(const Node& n) {
  std::string mode = n.GetString("mode", "sum");
  if (!BagCombinerFromName(mode)) {
    return Unimplemented(n.Describe() + ": mode '" + mode + "' (sum, mean, sqrtn and max are supported)");
  }
  if (n.Has("empty") && mode != "max") return InvalidArgument(n.Describe() + ": `empty` is a max bag's");
  return Status::Ok();
}

// Bag inputs [first, first + count) of a ConcatEmbeddingBags or an EmbeddingBag: how many bags.
StatusOr<int64_t> BagRows(const InferContext& c, int first, int count) {
  const TensorMeta& table = c.in(first);
  if (table.shape.size() != 2) return c.Error("table must be [rows, dim]");
  if (table.dtype != DType::kF32 && table.dtype != DType::kF16 && table.dtype != DType::kBF16) {
    return c.Error("table must be FP32, FP16 or BF16");
  }
  const TensorMeta& ids = c.in(first + 1);
  if (count == 2) {
    if (!IsIndex(ids.dtype) || ids.shape.size() != 2) return c.Error("ids must be INT64 [bags, length]");
    return ids.shape[0];
  }
  if (!IsIndex(ids.dtype) || ids.shape.size() != 1) return c.Error("values must be INT64 [total]");
  const TensorMeta& offsets = c.in(first + 2);
  if (offsets.dtype != DType::kI64 || offsets.shape.size() != 1 || offsets.shape[0] < 1) {
    return c.Error("offsets must be INT64 [bags + 1]");
  }
  return offsets.shape[0] - 1;
}

Status InferEmbeddingBag(InferContext& c) {
  const bool weighted = c.node.NumInputs() == 4;
  RANKD_ASSIGN_OR_RETURN(int64_t bags, BagRows(c, 0, weighted ? 3 : c.node.NumInputs()));
  if (weighted) {
    // One per value the bags read: checked when the bags run (a bucket pads each input apart).
    const TensorMeta& weights = c.in(3);
    if (c.node.GetString("mode", "sum") == "max") return c.Error("a max bag takes no weights");
    if (weights.dtype != DType::kF32 || weights.shape.size() != 1) return c.Error("weights must be FP32 [total]");
  }
  c.out(0) = {DType::kF32, {bags, c.in(0).shape[1]}, nullptr};
  return Status::Ok();
}

Status CheckConcatEmbeddingBags(const Node& n) {
  std::vector<int64_t> parts = n.GetInts("parts"), modes = n.GetInts("modes"), columns = n.GetInts("columns");
  if (parts.empty() || modes.size() != parts.size())
    return InvalidArgument(n.Describe() + ": needs `parts` and one mode per part");
  if (!columns.empty() && columns.size() != parts.size())
    return InvalidArgument(n.Describe() + ": needs one column per part");
  for (int64_t mode : modes) {
    if (mode < kBagSum || mode > kBagSqrtN) return InvalidArgument(n.Describe() + ": a mode is 0, 1 or 2");
  }
  for (size_t p = 0; p < columns.size(); ++p) {
    if (columns[p] < -1 || (columns[p] >= 0 && (parts[p] != 2 || modes[p] != 0))) {
      return InvalidArgument(n.Describe() + ": a column is read only by a part of padded ids");
    }
  }
  std::vector<int64_t> floors = n.GetInts("floors");
  if (!floors.empty() && floors.size() != parts.size())
    return InvalidArgument(n.Describe() + ": needs one floor per part");
  for (size_t p = 0; p < floors.size(); ++p) {
    if (floors[p] != std::numeric_limits<int64_t>::min() && (columns.empty() || columns[p] < 0)) {
      return InvalidArgument(n.Describe() + ": only a column part has a floor");
    }
  }
  int64_t inputs = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p] < 1 || parts[p] > 4) return InvalidArgument(n.Describe() + ": a part takes 1 to 4 inputs");
    if (parts[p] == 4 && (modes[p] != 0 || (!columns.empty() && columns[p] >= 0))) {
      return InvalidArgument(n.Describe() + ": a weighted part (4 inputs) is a sum of its bags");
    }
    if (modes[p] != 0 && (modes[p] != 1 || parts[p] == 1)) return InvalidArgument(n.Describe() + ": bad pooling mode");
    inputs += parts[p];
  }
  if (inputs != n.NumInputs()) return InvalidArgument(n.Describe() + ": `parts` does not account for every input");
  return Status::Ok();
}

Status InferConcatEmbeddingBags(InferContext& c) {
  int64_t rows = -1, width = 0;
  int first = 0;
  std::vector<int64_t> parts = c.node.GetInts("parts"), columns = c.node.GetInts("columns");
  for (size_t p = 0; p < parts.size(); ++p) {
    int64_t count = parts[p], part_rows = 0;
    if (count == 1) {
      const TensorMeta& dense = c.in(first);
      if (dense.dtype != DType::kF32 || dense.shape.size() != 2)
        return c.Error("a copied part must be FP32 [rows, width]");
      part_rows = dense.shape[0];
      width += dense.shape[1];
    } else {
      RANKD_ASSIGN_OR_RETURN(part_rows, BagRows(c, first, static_cast<int>(std::min<int64_t>(count, 3))));
      if (count == 4 && (c.in(first + 3).dtype != DType::kF32 || c.in(first + 3).shape.size() != 1)) {
        return c.Error("weights must be FP32 [total]");
      }
      // A column is read only from padded ids [rows, width] (CheckConcatEmbeddingBags).
      if (!columns.empty() && columns[p] >= 0 && columns[p] >= c.in(first + 1).shape[1]) {
        return c.Error("a column is past the ids' width");
      }
      width += c.in(first).shape[1];
    }
    if (rows >= 0 && part_rows != rows) return c.Error("parts have different row counts");
    rows = part_rows;
    first += static_cast<int>(count);
  }
  c.out(0) = {DType::kF32, {rows, width}, nullptr};
  return Status::Ok();
}

Status InferRaggedToPadded(InferContext& c) {
  if (!IsIndex(c.in(0).dtype) || c.in(0).shape.size() != 1) return c.Error("values must be INT64 [total]");
  if (c.in(1).dtype != DType::kI64 || c.in(1).shape.size() != 1) return c.Error("offsets must be INT64");
  int64_t index = c.node.GetInt("ragged_index", -1);
  const auto* lengths = c.ragged_max_lengths;
  if (!lengths || index < 0 || static_cast<size_t>(index) >= lengths->size()) {
    return Internal(c.node.Describe() + ": no padded length for ragged input " + std::to_string(index));
  }
  c.out(0) = {c.in(0).dtype, {c.in(1).shape[0] - 1, (*lengths)[static_cast<size_t>(index)]}, nullptr};
  return Status::Ok();
}

Status CheckKeyedRows(const Node& n) {
  const size_t parts = static_cast<size_t>(n.NumInputs() / 2);
  if (n.NumInputs() % 2 != 0 || n.outputs.size() != parts || n.GetInts("default_rows").size() != parts ||
      n.GetInts("bags").size() != parts || n.GetInts("counters").size() != parts ||
      keyed_rows::Parts(n).size() != parts) {
    return InvalidArgument(n.Describe() +
                           ": needs (ids, index) input pairs, an output, default row, bag flag, "
                           "counter and table per pair");
  }
  return Status::Ok();
}

Status InferKeyedRows(InferContext& c) {
  for (int p = 0; p < c.node.NumInputs() / 2; ++p) {
    if (!IsIndex(c.in(2 * p).dtype)) return c.Error("ids must be INT64 or INT32");
    const TensorMeta& index = c.in(2 * p + 1);
    if (index.dtype != DType::kI64 || index.shape.size() != 2 || index.shape[1] != 2 || index.shape[0] < 1 ||
        (index.shape[0] & (index.shape[0] - 1)) != 0) {
      return c.Error("an index must be INT64 [slots, 2], slots a power of two");
    }
    c.out(p) = {DType::kI64, c.in(2 * p).shape, nullptr};
  }
  return Status::Ok();
}

}  // namespace

void AppendEmbeddingSchemas(std::vector<OpSchema>& out) {
  out.push_back({"EmbeddingBag", 2, 4, CheckEmbeddingBag, InferEmbeddingBag});
  out.push_back({"ConcatEmbeddingBags", 1, 1 << 16, CheckConcatEmbeddingBags, InferConcatEmbeddingBags});
  out.push_back({"RaggedToPadded", 2, 2, nullptr, InferRaggedToPadded});
  out.push_back({"KeyedRows", 2, 1 << 16, CheckKeyedRows, InferKeyedRows});
}

}  // namespace rankd

// Shape functions of rankd's own ops (not in ONNX):
//   EmbeddingBag(table [R, D], ids [B, L])              -- padded ids, negative ids are empty slots
//   EmbeddingBag(table [R, D], values [T], offsets [B+1]) -- ragged ids
//     attribute mode: "sum" (default) or "mean"; output [B, D] FP32; an empty bag gives zeros.
//   RaggedToPadded(values [T], offsets [B+1]) -> [B, max length] padded with `pad_value` (-1);
//     attribute ragged_index: which ragged input of the plan gives the padded length.
#include "compile/ops/op_schema.h"

namespace rankd {
namespace {

bool IsIndex(DType t) { return t == DType::kI64 || t == DType::kI32; }

Status CheckEmbeddingBag(const Node& n) {
  std::string mode = n.GetString("mode", "sum");
  if (mode != "sum" && mode != "mean") {
    return Unimplemented(n.Describe() + ": mode '" + mode + "' (sum and mean are supported)");
  }
  return Status::Ok();
}

Status InferEmbeddingBag(InferContext& c) {
  const TensorMeta& table = c.in(0);
  if (table.shape.size() != 2) return c.Error("table must be [rows, dim]");
  if (table.dtype != DType::kF32 && table.dtype != DType::kF16 && table.dtype != DType::kBF16) {
    return c.Error("table must be FP32, FP16 or BF16");
  }
  int64_t bags;
  if (c.node.NumInputs() == 2) {
    if (!IsIndex(c.in(1).dtype) || c.in(1).shape.size() != 2) return c.Error("ids must be INT64 [bags, length]");
    bags = c.in(1).shape[0];
  } else {
    if (!IsIndex(c.in(1).dtype) || c.in(1).shape.size() != 1) return c.Error("values must be INT64 [total]");
    if (c.in(2).dtype != DType::kI64 || c.in(2).shape.size() != 1 || c.in(2).shape[0] < 1) {
      return c.Error("offsets must be INT64 [bags + 1]");
    }
    bags = c.in(2).shape[0] - 1;
  }
  c.out(0) = {DType::kF32, {bags, table.shape[1]}, nullptr};
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

}  // namespace

void AppendEmbeddingSchemas(std::vector<OpSchema>& out) {
  out.push_back({"EmbeddingBag", 2, 3, CheckEmbeddingBag, InferEmbeddingBag});
  out.push_back({"RaggedToPadded", 2, 2, nullptr, InferRaggedToPadded});
}

}  // namespace rankd

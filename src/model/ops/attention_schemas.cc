// Shape functions of rankd's attention ops: TargetAttention (model/ops/target_attention.h) and
// SoftmaxAttention (model/ops/softmax_attention.h).
#include "model/ops/op_schema.h"
#include "model/ops/softmax_attention.h"
#include "model/ops/target_attention.h"

namespace rankd {
namespace {

using target_attention::kFirstLayerInput;
using target_attention::kMaxLayers;
using target_attention::kMaxWidth;

Status CheckTargetAttention(const Node& n) {
  int layers = (n.NumInputs() - kFirstLayerInput) / 2;
  if (n.NumInputs() < kFirstLayerInput + 2 || (n.NumInputs() - kFirstLayerInput) % 2 != 0 || layers > kMaxLayers) {
    return InvalidArgument(n.Describe() + ": needs 7 inputs and 1 to " + std::to_string(kMaxLayers) +
                           " (weight, bias) pairs");
  }
  for (int i : {0, 2, 3, 4, 5}) {
    if (!n.HasInput(i)) return InvalidArgument(n.Describe() + ": input " + std::to_string(i) + " is required");
  }
  for (int i = kFirstLayerInput; i < n.NumInputs(); i += 2) {
    if (!n.HasInput(i)) return InvalidArgument(n.Describe() + ": layer weight " + std::to_string(i) + " is required");
  }
  return Status::Ok();
}

Status InferTargetAttention(InferContext& c) {
  for (int i = 0; i < c.node.NumInputs(); ++i) {
    if (i != 1 && c.in(i).present() && c.in(i).dtype != DType::kF32) {
      return c.Error("input " + std::to_string(i) + " must be FP32, got " + DTypeName(c.in(i).dtype));
    }
  }
  const Shape& keys = c.in(0).shape;
  if (keys.size() != 3) return c.Error("keys must be [users, length, dim]");
  const int64_t users = keys[0], length = keys[1], dim = keys[2];
  int64_t rows = users;
  if (c.in(1).present()) {
    if (c.in(1).dtype != DType::kI64 || c.in(1).shape.size() != 1)
      return c.Error("key_rows must be INT64 [candidates]");
    rows = c.in(1).shape[0];
  }
  const int64_t width = c.in(5).shape.size() == 2 ? c.in(5).shape[1] : -1;
  if (c.in(5).shape != Shape{dim, width}) return c.Error("cross must be [dim, width]");
  if (c.in(2).shape != Shape{rows, 1, dim}) return c.Error("query must be [candidates, 1, dim]");
  if (c.in(3).shape != Shape{users, length, width}) return c.Error("key_proj must be [users, length, width]");
  if (c.in(4).shape != Shape{rows, 1, width}) return c.Error("query_proj must be [candidates, 1, width]");
  if (c.in(6).present() && c.in(6).shape != Shape{users, length}) return c.Error("mask must be [users, length]");
  if (dim > kMaxWidth || width > kMaxWidth)
    return c.Error("dim and widths must be at most " + std::to_string(kMaxWidth));
  int64_t in_width = width;
  for (int i = kFirstLayerInput; i < c.node.NumInputs(); i += 2) {
    const Shape& w = c.in(i).shape;
    if (w.size() != 2 || w[0] != in_width || w[1] > kMaxWidth) {
      return c.Error("layer weight " + std::to_string(i) + " must be [" + std::to_string(in_width) + ", at most " +
                     std::to_string(kMaxWidth) + "]");
    }
    if (c.in(i + 1).present() && c.in(i + 1).shape != Shape{w[1]}) {
      return c.Error("layer bias " + std::to_string(i + 1) + " must be [" + std::to_string(w[1]) + "]");
    }
    in_width = w[1];
  }
  if (in_width != 1) return c.Error("the last layer must give one score per position");
  c.out(0) = {DType::kF32, {rows, dim}, nullptr};
  c.scratch_bytes = rows * target_attention::Tiles(length) * dim * 4;  // the device's partial sums per tile
  return Status::Ok();
}

Status CheckSoftmaxAttention(const Node& n) {
  using namespace softmax_attention;
  for (int i : {kQuery, kKeys, kValues}) {
    if (!n.HasInput(i)) return InvalidArgument(n.Describe() + ": input " + std::to_string(i) + " is required");
  }
  if (n.GetInt("heads", 1) < 1) return InvalidArgument(n.Describe() + ": heads must be at least 1");
  const int64_t keeps = n.GetInt("mask_keeps", 0);
  if (keeps != 0 && keeps != 1) return InvalidArgument(n.Describe() + ": mask_keeps must be 0 or 1");
  return Status::Ok();
}

Status InferSoftmaxAttention(InferContext& c) {
  using namespace softmax_attention;
  for (int i : {kQuery, kKeys, kValues}) {
    if (c.in(i).dtype != DType::kF32)
      return c.Error("input " + std::to_string(i) + " must be FP32, got " + DTypeName(c.in(i).dtype));
  }
  const int64_t heads = c.node.GetInt("heads", 1);
  const Shape &query = c.in(kQuery).shape, &keys = c.in(kKeys).shape, &values = c.in(kValues).shape;
  if (query.size() != 2 && query.size() != 3) return c.Error("query must be [rows, positions, width] or [rows, width]");
  if (keys.size() != 3 || values.size() != 3 || values[0] != keys[0] || values[1] != keys[1]) {
    return c.Error("keys and values must be [users, length, width] of the same users and length");
  }
  const int64_t width = query.back();
  if (keys[2] != width || width % heads != 0 || values[2] % heads != 0) {
    return c.Error("query and keys must have one width, and it and the values' a multiple of " + std::to_string(heads) +
                   " heads");
  }
  const int64_t users = keys[0], length = keys[1];
  int64_t rows = users;
  if (c.node.HasInput(kKeyRows)) {
    if (c.in(kKeyRows).dtype != DType::kI64 || c.in(kKeyRows).shape.size() != 1)
      return c.Error("key_rows must be INT64 [rows]");
    rows = c.in(kKeyRows).shape[0];
  }
  if (query[0] != rows) return c.Error("query must have " + std::to_string(rows) + " rows");
  if (c.node.HasInput(kMask)) {
    const Shape& m = c.in(kMask).shape;
    bool ok = c.in(kMask).dtype == DType::kBool && m.size() >= 2 && m.front() == users && m.back() == length;
    for (size_t i = 1; ok && i + 1 < m.size(); ++i) ok = m[i] == 1;
    if (!ok) return c.Error("mask must be BOOL [users, length] (or [users, 1, ..., 1, length])");
  }
  Shape out = query;
  out.back() = values[2];
  c.out(0) = {DType::kF32, out, nullptr};
  return Status::Ok();
}

}  // namespace

void AppendAttentionSchemas(std::vector<OpSchema>& out) {
  out.push_back({"SoftmaxAttention", softmax_attention::kValues + 1, softmax_attention::kInputs, CheckSoftmaxAttention,
                 InferSoftmaxAttention});
  // Inputs 1, 6 and the biases may be omitted (-1): CheckTargetAttention checks the rest.
  out.push_back({"TargetAttention", 1, kFirstLayerInput + 2 * kMaxLayers, CheckTargetAttention, InferTargetAttention});
}

}  // namespace rankd

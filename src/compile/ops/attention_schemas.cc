// Shape function of rankd's TargetAttention (compile/ops/target_attention.h).
#include "compile/ops/op_schema.h"
#include "compile/ops/target_attention.h"

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
    if (c.in(1).dtype != DType::kI64 || c.in(1).shape.size() != 1) return c.Error("key_rows must be INT64 [candidates]");
    rows = c.in(1).shape[0];
  }
  const int64_t width = c.in(5).shape.size() == 2 ? c.in(5).shape[1] : -1;
  if (c.in(5).shape != Shape{dim, width}) return c.Error("cross must be [dim, width]");
  if (c.in(2).shape != Shape{rows, 1, dim}) return c.Error("query must be [candidates, 1, dim]");
  if (c.in(3).shape != Shape{users, length, width}) return c.Error("key_proj must be [users, length, width]");
  if (c.in(4).shape != Shape{rows, 1, width}) return c.Error("query_proj must be [candidates, 1, width]");
  if (c.in(6).present() && c.in(6).shape != Shape{users, length}) return c.Error("mask must be [users, length]");
  if (dim > kMaxWidth || width > kMaxWidth) return c.Error("dim and widths must be at most " + std::to_string(kMaxWidth));
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

}  // namespace

void AppendAttentionSchemas(std::vector<OpSchema>& out) {
  // Inputs 1, 6 and the biases may be omitted (-1): CheckTargetAttention checks the rest.
  out.push_back({"TargetAttention", 1, kFirstLayerInput + 2 * kMaxLayers, CheckTargetAttention, InferTargetAttention});
}

}  // namespace rankd

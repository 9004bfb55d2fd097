// Shape functions of Gemm, MatMul, Einsum, Softmax, LayerNormalization, the reductions and
// rankd's DotInteraction (model/ops/dot_interaction.h).
#include <algorithm>

#include "model/ops/dot_interaction.h"
#include "model/ops/einsum_spec.h"
#include "model/ops/op_schema.h"

namespace rankd {
namespace {

Status NeedF32(InferContext& c, int i) {
  if (c.in(i).present() && c.in(i).dtype != DType::kF32) {
    return c.Error("input " + std::to_string(i) + " must be FP32, got " + DTypeName(c.in(i).dtype));
  }
  return Status::Ok();
}

// A fused product's activation (FuseGemmEpilogues).
Status CheckActivation(InferContext& c) {
  if (!c.node.Has("activation")) return Status::Ok();
  const std::string a = c.node.GetString("activation", "");
  if (a != "Relu" && a != "GeluTanh" && a != "Sigmoid")
    return c.Error("activation must be Relu, GeluTanh or Sigmoid, got " + a);
  return Status::Ok();
}

// A product's multiply-add epilogue (FuseProductMulAdds): inputs 3 and 4, both or neither, FP32
// of the product's shape; the result is input 3 * product + input 4.
Status CheckMulAddEpilogue(InferContext& c, const Shape& out) {
  if (!c.node.HasInput(3) && !c.node.HasInput(4)) return Status::Ok();
  if (!c.node.HasInput(3) || !c.node.HasInput(4)) return c.Error("a multiply-add epilogue needs inputs 3 and 4");
  for (int i : {3, 4}) {
    RANKD_RETURN_IF_ERROR(NeedF32(c, i));
    if (c.in(i).shape != out) {
      return c.Error("input " + std::to_string(i) + " " + ShapeToString(c.in(i).shape) +
                     " must have the product's shape " + ShapeToString(out));
    }
  }
  return Status::Ok();
}

Status InferGemm(InferContext& c) {
  RANKD_RETURN_IF_ERROR(CheckActivation(c));
  for (int i = 0; i < c.node.NumInputs(); ++i) RANKD_RETURN_IF_ERROR(NeedF32(c, i));
  const Shape &a = c.in(0).shape, &b = c.in(1).shape;
  if (a.size() != 2 || b.size() != 2) return c.Error("A and B must be matrices");
  bool ta = c.node.GetInt("transA", 0) != 0, tb = c.node.GetInt("transB", 0) != 0;
  int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) return c.Error("A " + ShapeToString(a) + " and B " + ShapeToString(b) + " do not multiply");
  if (c.node.HasInput(2)) {
    RANKD_ASSIGN_OR_RETURN(Shape s, BroadcastShapes({c.in(2).shape, {m, n}}, c.node));
    if (s != Shape{m, n}) return c.Error("C does not broadcast to the product's shape");
  }
  RANKD_RETURN_IF_ERROR(CheckMulAddEpilogue(c, {m, n}));
  c.out(0) = {DType::kF32, {m, n}, nullptr};
  return Status::Ok();
}

Status InferMatMul(InferContext& c) {
  RANKD_RETURN_IF_ERROR(CheckActivation(c));
  RANKD_RETURN_IF_ERROR(NeedF32(c, 0));
  RANKD_RETURN_IF_ERROR(NeedF32(c, 1));
  Shape a = c.in(0).shape, b = c.in(1).shape;
  if (a.empty() || b.empty()) return c.Error("MatMul of a scalar");
  bool va = a.size() == 1, vb = b.size() == 1;
  if (va) a.insert(a.begin(), 1);
  if (vb) b.push_back(1);
  if (a.back() != b[b.size() - 2]) {
    return c.Error("shapes " + ShapeToString(c.in(0).shape) + " and " + ShapeToString(c.in(1).shape) +
                   " do not multiply");
  }
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  RANKD_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({ba, bb}, c.node));
  if (!va) out.push_back(a[a.size() - 2]);
  if (!vb) out.push_back(b.back());
  if (c.node.HasInput(2)) {  // the fused bias (FuseGemmEpilogues): one weight matrix, a row per column
    RANKD_RETURN_IF_ERROR(NeedF32(c, 2));
    if (c.in(1).shape.size() != 2 || c.in(2).shape != Shape{b.back()}) {
      return c.Error("a bias needs a weight matrix and one value per output column");
    }
  }
  if (c.node.HasInput(3) && c.in(1).shape.size() != 2) return c.Error("a multiply-add epilogue needs a weight matrix");
  RANKD_RETURN_IF_ERROR(CheckMulAddEpilogue(c, out));
  c.out(0) = {DType::kF32, out, nullptr};
  return Status::Ok();
}

Status CheckEinsum(const Node& n) {
  return ParseEinsum(n.GetString("equation", ""), static_cast<size_t>(n.NumInputs()), n).status();
}

Status InferEinsum(InferContext& c) {
  for (int i = 0; i < c.node.NumInputs(); ++i) RANKD_RETURN_IF_ERROR(NeedF32(c, i));
  RANKD_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(c.node.GetString("equation", ""), c.inputs.size(), c.node));
  std::vector<Shape> shapes;
  for (const TensorMeta& m : c.inputs) shapes.push_back(m.shape);
  RANKD_ASSIGN_OR_RETURN(EinsumPlan plan, PlanEinsum(spec, shapes, c.node));
  c.out(0) = {DType::kF32, plan.output, nullptr};
  if (!plan.single) {
    int64_t floats = NumElements(plan.a_permuted) + NumElements(plan.b_permuted) + NumElements(plan.c_shape);
    c.scratch_bytes = floats * 4 + 3 * 64;
  }
  return Status::Ok();
}

Status InferSoftmax(InferContext& c) {
  RANKD_RETURN_IF_ERROR(NeedF32(c, 0));
  RANKD_RETURN_IF_ERROR(
      NormalizeAxis(c.node.GetInt("axis", -1), static_cast<int64_t>(c.in(0).shape.size()), c.node).status());
  c.out(0) = {DType::kF32, c.in(0).shape, nullptr};
  return Status::Ok();
}

Status InferLayerNorm(InferContext& c) {
  for (int i = 0; i < c.node.NumInputs(); ++i) RANKD_RETURN_IF_ERROR(NeedF32(c, i));
  const Shape& x = c.in(0).shape;
  RANKD_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(c.node.GetInt("axis", -1), static_cast<int64_t>(x.size()), c.node));
  Shape norm(x.begin() + axis, x.end());
  for (int i = 1; i < c.node.NumInputs(); ++i) {
    if (!c.in(i).present()) continue;
    RANKD_ASSIGN_OR_RETURN(Shape s, BroadcastShapes({c.in(i).shape, norm}, c.node));
    if (s != norm) return c.Error("scale and bias must broadcast to " + ShapeToString(norm));
  }
  c.out(0) = {DType::kF32, x, nullptr};
  Shape stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  for (size_t i = 1; i < c.outputs.size(); ++i) c.out(static_cast<int>(i)) = {DType::kF32, stats, nullptr};
  c.scratch_bytes = 2 * NumElements(norm) * 4 + 64;  // scale and bias over the normalised shape
  return Status::Ok();
}

Status InferReduce(InferContext& c) {
  DType t = c.in(0).dtype;
  if (t != DType::kF32 && t != DType::kF64 && t != DType::kI32 && t != DType::kI64) {
    return c.Error(std::string("needs a numeric input, got ") + DTypeName(t));
  }
  const Shape& in = c.in(0).shape;
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (c.node.HasInput(1)) {
    if (!c.in(1).value) return Unimplemented(c.node.Describe() + ": axes must be computable from shapes");
    axes = c.IntValues(1);
  } else {
    axes = c.node.GetInts("axes");
  }
  bool keep = c.node.GetInt("keepdims", 1) != 0;
  bool noop = axes.empty() && c.node.GetInt("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(in.size(), axes.empty() && !noop);
  for (int64_t a : axes) {
    RANKD_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(a, rank, c.node));
    reduced[static_cast<size_t>(n)] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(in[i]);
    } else if (keep) {
      out.push_back(1);
    }
    if (reduced[i] && in[i] == 0 && c.node.op == "ReduceMax") return c.Error("ReduceMax over an empty axis");
  }
  c.out(0) = {t, out, nullptr};
  c.scratch_bytes = NumElements(out) * 8;  // one 8-byte accumulator per output element
  return Status::Ok();
}

// DotInteraction: the pairs must be a constant known when the plan is built, each in range.
Status InferDotInteraction(InferContext& c) {
  using namespace dot_interaction;
  const bool has_dense = c.node.HasInput(kDense);
  RANKD_RETURN_IF_ERROR(NeedF32(c, kFeatures));
  if (has_dense) RANKD_RETURN_IF_ERROR(NeedF32(c, kDense));
  const Shape& features = c.in(kFeatures).shape;
  if (features.size() != 3) return c.Error("features must be [rows, fields, dim]");
  const TensorMeta& pairs = c.in(kPairs);
  if (pairs.dtype != DType::kI64 || pairs.shape.size() != 2 || pairs.shape[1] != 2 || !pairs.value) {
    return c.Error("pairs must be a constant INT64 [pairs, 2]");
  }
  const std::vector<int64_t> fields = c.IntValues(kPairs);
  for (size_t e = 0; e < fields.size(); ++e) {
    if (fields[e] < 0 || fields[e] >= features[1]) {
      return c.Error("pair " + std::to_string(e / 2) + " names field " + std::to_string(fields[e]) + " of " +
                     std::to_string(features[1]));
    }
  }
  int64_t width = 0;
  if (has_dense) {
    const Shape& dense = c.in(kDense).shape;
    if (dense.size() != 2 || dense[0] != features[0]) {
      return c.Error("dense must be [rows, width] with the features' " + std::to_string(features[0]) + " rows");
    }
    width = dense[1];
  }
  c.out(0) = {DType::kF32, {features[0], width + pairs.shape[0]}, nullptr};
  return Status::Ok();
}

}  // namespace

void AppendMathSchemas(std::vector<OpSchema>& out) {
  // Inputs 3 and 4 of both: rankd's multiply-add epilogue; input 2 of MatMul: its fused bias.
  out.push_back({"Gemm", 2, 5, nullptr, InferGemm});
  out.push_back({"MatMul", 2, 5, nullptr, InferMatMul});
  out.push_back({"Einsum", 1, 2, CheckEinsum, InferEinsum});
  out.push_back({"DotInteraction", 2, dot_interaction::kInputs, nullptr, InferDotInteraction});
  out.push_back({"Softmax", 1, 1, nullptr, InferSoftmax});
  out.push_back({"LayerNormalization", 2, 3, nullptr, InferLayerNorm});
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
    out.push_back({op, 1, 2, nullptr, InferReduce});
  }
}

}  // namespace rankd

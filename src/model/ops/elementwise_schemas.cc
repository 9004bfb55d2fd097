// Shape functions of element-wise ops: unary, binary with broadcasting, comparisons, logic,
// Where, Clip, Cast, and variadic Max/Min.
#include "model/ops/elementwise_program.h"
#include "model/ops/op_schema.h"

namespace rankd {
namespace {

bool IsNumeric(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kI32 || t == DType::kI64; }

Status InferUnaryFloat(InferContext& c) {
  DType t = c.in(0).dtype;
  if (t != DType::kF32 && t != DType::kF64) {
    return c.Error(std::string("needs FP32 or FP64 input, got ") + DTypeName(t));
  }
  c.out(0) = {t, c.in(0).shape, nullptr};
  return Status::Ok();
}

Status InferUnaryNumeric(InferContext& c) {
  DType t = c.in(0).dtype;
  if (!IsNumeric(t)) return c.Error(std::string("needs a numeric input, got ") + DTypeName(t));
  c.out(0) = {t, c.in(0).shape, nullptr};
  return Status::Ok();
}

Status InferNot(InferContext& c) {
  if (c.in(0).dtype != DType::kBool) return c.Error("needs a BOOL input");
  c.out(0) = {DType::kBool, c.in(0).shape, nullptr};
  return Status::Ok();
}

StatusOr<Shape> Broadcast(InferContext& c) {
  std::vector<Shape> shapes;
  for (const TensorMeta& m : c.inputs) {
    if (m.present()) shapes.push_back(m.shape);
  }
  return BroadcastShapes(shapes, c.node);
}

Status SameDType(InferContext& c, int first, int last) {
  for (int i = first + 1; i <= last; ++i) {
    if (c.in(i).present() && c.in(i).dtype != c.in(first).dtype) {
      return c.Error(std::string("inputs have different types ") + DTypeName(c.in(first).dtype) + " and " +
                     DTypeName(c.in(i).dtype));
    }
  }
  return Status::Ok();
}

Status InferArith(InferContext& c) {
  RANKD_RETURN_IF_ERROR(SameDType(c, 0, c.node.NumInputs() - 1));
  if (!IsNumeric(c.in(0).dtype)) {
    return c.Error(std::string("needs numeric inputs, got ") + DTypeName(c.in(0).dtype));
  }
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  c.out(0) = {c.in(0).dtype, s, nullptr};
  return Status::Ok();
}

// rankd's MulAdd(a, b, c) = a * b + c (FuseMulAdd), FP32, all three broadcasting.
Status InferMulAdd(InferContext& c) {
  for (int i = 0; i < 3; ++i) {
    if (c.in(i).dtype != DType::kF32) return c.Error("needs FP32 inputs");
  }
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  c.out(0) = {DType::kF32, s, nullptr};
  return Status::Ok();
}

// rankd's FusedElementwise(x0, ...) (FuseElementwiseChains): its "program" over FP32 inputs that
// broadcast to the output.
Status CheckFused(const Node& n) {
  auto program = ElementwiseProgram::Parse(n.GetString("program", ""), n.NumInputs());
  if (!program.ok()) return InvalidArgument(n.Describe() + ": " + program.status().message());
  return Status::Ok();
}

Status InferFused(InferContext& c) {
  for (int i = 0; i < c.node.NumInputs(); ++i) {
    if (c.in(i).dtype != DType::kF32) return c.Error("needs FP32 inputs");
  }
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  if (s.size() > static_cast<size_t>(kMaxFusedRank))
    return c.Error("output rank is above " + std::to_string(kMaxFusedRank));
  c.out(0) = {DType::kF32, s, nullptr};
  return Status::Ok();
}

Status InferPow(InferContext& c) {
  if (c.in(0).dtype != DType::kF32 && c.in(0).dtype != DType::kF64) {
    return c.Error("base must be FP32 or FP64");
  }
  if (!IsNumeric(c.in(1).dtype)) return c.Error("exponent must be numeric");
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  c.out(0) = {c.in(0).dtype, s, nullptr};
  return Status::Ok();
}

Status InferCompare(InferContext& c) {
  RANKD_RETURN_IF_ERROR(SameDType(c, 0, 1));
  if (!IsNumeric(c.in(0).dtype) && c.in(0).dtype != DType::kBool) return c.Error("needs numeric inputs");
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  c.out(0) = {DType::kBool, s, nullptr};
  return Status::Ok();
}

Status InferLogic(InferContext& c) {
  if (c.in(0).dtype != DType::kBool || c.in(1).dtype != DType::kBool) return c.Error("needs BOOL inputs");
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  c.out(0) = {DType::kBool, s, nullptr};
  return Status::Ok();
}

Status InferWhere(InferContext& c) {
  if (c.in(0).dtype != DType::kBool) return c.Error("condition must be BOOL");
  RANKD_RETURN_IF_ERROR(SameDType(c, 1, 2));
  RANKD_ASSIGN_OR_RETURN(Shape s, Broadcast(c));
  c.out(0) = {c.in(1).dtype, s, nullptr};
  return Status::Ok();
}

Status InferClip(InferContext& c) {
  if (!IsNumeric(c.in(0).dtype)) return c.Error("needs a numeric input");
  for (int i = 1; i < c.node.NumInputs(); ++i) {
    if (!c.in(i).present()) continue;
    if (c.in(i).dtype != c.in(0).dtype) return c.Error("min and max must have the input's type");
    if (NumElements(c.in(i).shape) != 1) return c.Error("min and max must be scalars");
  }
  c.out(0) = {c.in(0).dtype, c.in(0).shape, nullptr};
  return Status::Ok();
}

// ONNX's Mod: fmod 0 (the default) gives a remainder with the divisor's sign (Python's %), fmod 1
// the dividend's (C's fmod); floating-point inputs need fmod 1.
Status CheckMod(const Node& n) {
  const int64_t fmod = n.GetInt("fmod", 0);
  if (fmod != 0 && fmod != 1)
    return InvalidArgument(n.Describe() + ": fmod must be 0 or 1, got " + std::to_string(fmod));
  return Status::Ok();
}

Status InferMod(InferContext& c) {
  RANKD_RETURN_IF_ERROR(InferArith(c));
  const DType t = c.in(0).dtype;
  if ((t == DType::kF32 || t == DType::kF64) && c.node.GetInt("fmod", 0) != 1)
    return c.Error("Mod of floating-point inputs needs fmod = 1 (ONNX)");
  return Status::Ok();
}

Status CheckCast(const Node& n) {
  auto to = DTypeFromOnnx(static_cast<int>(n.GetInt("to", 0)));
  if (!to)
    return Unimplemented(n.Describe() + ": cast to ONNX type " + std::to_string(n.GetInt("to", 0)) +
                         " is not supported");
  return Status::Ok();
}

Status InferCast(InferContext& c) {
  c.out(0) = {*DTypeFromOnnx(static_cast<int>(c.node.GetInt("to", 0))), c.in(0).shape, nullptr};
  return Status::Ok();
}

bool CastsToItsOwnDType(const InferContext& c) { return c.outputs[0].dtype == c.in(0).dtype; }

}  // namespace

void AppendElementwiseSchemas(std::vector<OpSchema>& out) {
  for (const char* op : {"Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil"}) {
    out.push_back({op, 1, 1, nullptr, InferUnaryFloat});
  }
  for (const char* op : {"Neg", "Relu", "Abs"}) out.push_back({op, 1, 1, nullptr, InferUnaryNumeric});
  out.push_back({"Not", 1, 1, nullptr, InferNot});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) out.push_back({op, 2, 2, nullptr, InferArith});
  out.push_back({"Max", 1, 8, nullptr, InferArith});
  out.push_back({"Min", 1, 8, nullptr, InferArith});
  out.push_back({"Pow", 2, 2, nullptr, InferPow});
  out.push_back({"Mod", 2, 2, CheckMod, InferMod});
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    out.push_back({op, 2, 2, nullptr, InferCompare});
  }
  for (const char* op : {"And", "Or", "Xor"}) out.push_back({op, 2, 2, nullptr, InferLogic});
  out.push_back({"Where", 3, 3, nullptr, InferWhere});
  out.push_back({"MulAdd", 3, 3, nullptr, InferMulAdd});
  out.push_back({"FusedElementwise", 1, kMaxFusedInputs, CheckFused, InferFused});
  out.push_back({"Clip", 1, 3, nullptr, InferClip});
  out.push_back({"Cast", 1, 1, CheckCast, InferCast, false, CastsToItsOwnDType});
}

}  // namespace rankd

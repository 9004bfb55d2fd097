// Shape functions of data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Transpose, Slice, Concat, Gather, Expand, Tile, Shape, Range, ConstantOfShape.
#include <algorithm>
#include <cmath>

#include "model/ops/op_schema.h"

namespace rankd {
namespace {

Status NeedValue(InferContext& c, int i, const char* what) {
  if (!c.in(i).value) {
    return Unimplemented(c.node.Describe() + ": its " + what +
                         " input depends on request data; it must be computable from shapes");
  }
  return Status::Ok();
}

Status InferReshape(InferContext& c) {
  RANKD_RETURN_IF_ERROR(NeedValue(c, 1, "shape"));
  std::vector<int64_t> target = c.IntValues(1);
  const Shape& in = c.in(0).shape;
  bool allowzero = c.node.GetInt("allowzero", 0) != 0;
  int64_t known = 1, infer_at = -1;
  Shape out(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) return c.Error("shape copies dim " + std::to_string(i) + " the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return c.Error("shape has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) return c.Error("shape has a negative dim " + std::to_string(d));
    out[i] = d;
    known *= d;
  }
  int64_t total = NumElements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return c.Error("cannot reshape " + ShapeToString(in) + " to " + ShapeToString(target));
    }
    out[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return c.Error("cannot reshape " + ShapeToString(in) + " to " + ShapeToString(out));
  }
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferFlatten(InferContext& c) {
  const Shape& in = c.in(0).shape;
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = c.node.GetInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return c.Error("axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= in[static_cast<size_t>(i)];
  c.out(0) = {c.in(0).dtype, {a, b}, nullptr};
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> AxesFromInputOrAttr(InferContext& c, int input) {
  if (c.node.HasInput(input)) {
    RANKD_RETURN_IF_ERROR(NeedValue(c, input, "axes"));
    return c.IntValues(input);
  }
  return c.node.GetInts("axes");
}

Status InferSqueeze(InferContext& c) {
  const Shape& in = c.in(0).shape;
  int64_t rank = static_cast<int64_t>(in.size());
  RANKD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesFromInputOrAttr(c, 1));
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  for (int64_t a : axes) {
    RANKD_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(a, rank, c.node));
    if (in[static_cast<size_t>(n)] != 1)
      return c.Error("cannot squeeze dim " + std::to_string(a) + " of " + ShapeToString(in));
    drop[static_cast<size_t>(n)] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferUnsqueeze(InferContext& c) {
  const Shape& in = c.in(0).shape;
  RANKD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesFromInputOrAttr(c, 1));
  int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    RANKD_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(a, rank, c.node));
    if (inserted[static_cast<size_t>(n)]) return c.Error("repeated axis");
    inserted[static_cast<size_t>(n)] = true;
  }
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(inserted[static_cast<size_t>(i)] ? 1 : in[k++]);
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferIdentity(InferContext& c) {
  c.out(0) = {c.in(0).dtype, c.in(0).shape, nullptr};
  return Status::Ok();
}

Status InferTranspose(InferContext& c) {
  const Shape& in = c.in(0).shape;
  std::vector<int64_t> perm = c.node.GetInts("perm");
  if (perm.empty()) {
    for (int64_t i = static_cast<int64_t>(in.size()) - 1; i >= 0; --i) perm.push_back(i);
  }
  if (perm.size() != in.size()) return c.Error("perm has the wrong length for " + ShapeToString(in));
  Shape out;
  std::vector<bool> seen(in.size(), false);
  for (int64_t p : perm) {
    RANKD_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(p, static_cast<int64_t>(in.size()), c.node));
    if (seen[static_cast<size_t>(a)]) return c.Error("perm repeats an axis");
    seen[static_cast<size_t>(a)] = true;
    out.push_back(in[static_cast<size_t>(a)]);
  }
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferSlice(InferContext& c) {
  const Shape& in = c.in(0).shape;
  int64_t rank = static_cast<int64_t>(in.size());
  for (int i = 1; i < c.node.NumInputs(); ++i) {
    if (c.node.HasInput(i)) RANKD_RETURN_IF_ERROR(NeedValue(c, i, "starts/ends/axes/steps"));
  }
  std::vector<int64_t> starts = c.IntValues(1), ends = c.IntValues(2), axes, steps;
  if (c.node.HasInput(3)) axes = c.IntValues(3);
  if (c.node.HasInput(4)) steps = c.IntValues(4);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Error("starts, ends, axes and steps differ in length");
  }
  Shape out = in;
  for (size_t i = 0; i < starts.size(); ++i) {
    RANKD_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axes[i], rank, c.node));
    int64_t dim = in[static_cast<size_t>(a)], step = steps[i];
    if (step == 0) return c.Error("step 0");
    // A step longer than the axis takes one element at most (as in SliceView): shortened, it
    // cannot overflow the arithmetic below.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[static_cast<size_t>(a)] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[static_cast<size_t>(a)] = s > e ? (s - e - step - 1) / (-step) : 0;
    }
  }
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

// The dims of size other than 1 keep their order: the elements do too.
bool TransposesOnlyUnitDims(const InferContext& c) {
  const Shape& in = c.in(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> perm = c.node.GetInts("perm");
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  int64_t last = -1;
  for (int64_t p : perm) {
    const int64_t axis = p < 0 ? p + rank : p;  // in range: InferTranspose checked it
    if (in[static_cast<size_t>(axis)] == 1) continue;
    if (axis < last) return false;
    last = axis;
  }
  return true;
}

// An Expand or a Tile whose output has its input's shape repeats nothing.
bool KeepsItsShape(const InferContext& c) { return c.outputs[0].shape == c.in(0).shape; }

bool ConcatenatesOnePart(const InferContext& c) { return c.inputs.size() == 1; }

Status InferConcat(InferContext& c) {
  const Shape& first = c.in(0).shape;
  RANKD_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(c.node.GetInt("axis", 0), static_cast<int64_t>(first.size()), c.node));
  Shape out = first;
  out[static_cast<size_t>(axis)] = 0;
  for (const TensorMeta& m : c.inputs) {
    if (m.dtype != c.in(0).dtype) return c.Error("inputs have different types");
    if (m.shape.size() != first.size()) return c.Error("inputs have different ranks");
    for (size_t d = 0; d < first.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && m.shape[d] != first[d]) {
        return c.Error("inputs " + ShapeToString(first) + " and " + ShapeToString(m.shape) +
                       " differ outside the concat axis");
      }
    }
    out[static_cast<size_t>(axis)] += m.shape[static_cast<size_t>(axis)];
  }
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferGather(InferContext& c) {
  const Shape& data = c.in(0).shape;
  if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32) return c.Error("indices must be INT32 or INT64");
  RANKD_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(c.node.GetInt("axis", 0), static_cast<int64_t>(data.size()), c.node));
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), c.in(1).shape.begin(), c.in(1).shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferExpand(InferContext& c) {
  RANKD_RETURN_IF_ERROR(NeedValue(c, 1, "shape"));
  Shape target = c.IntValues(1);
  RANKD_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({c.in(0).shape, target}, c.node));
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferTile(InferContext& c) {
  RANKD_RETURN_IF_ERROR(NeedValue(c, 1, "repeats"));
  std::vector<int64_t> reps = c.IntValues(1);
  const Shape& in = c.in(0).shape;
  if (reps.size() != in.size()) return c.Error("repeats must have one entry per dim");
  Shape out = in;
  for (size_t i = 0; i < in.size(); ++i) {
    if (reps[i] < 0) return c.Error("negative repeat");
    out[i] *= reps[i];
  }
  c.out(0) = {c.in(0).dtype, out, nullptr};
  return Status::Ok();
}

Status InferShape(InferContext& c) {
  int64_t rank = static_cast<int64_t>(c.in(0).shape.size());
  int64_t start = c.node.GetInt("start", 0), end = c.node.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  c.out(0) = {DType::kI64, {end - start}, nullptr};
  return Status::Ok();
}

Status InferRange(InferContext& c) {
  for (int i = 0; i < 3; ++i) RANKD_RETURN_IF_ERROR(NeedValue(c, i, "start/limit/delta"));
  double start = c.in(0).value->ScalarAsDouble(0), limit = c.in(1).value->ScalarAsDouble(0),
         delta = c.in(2).value->ScalarAsDouble(0);
  if (delta == 0) return c.Error("delta is 0");
  double n = std::ceil((limit - start) / delta);
  c.out(0) = {c.in(0).dtype, {std::max<int64_t>(0, static_cast<int64_t>(n))}, nullptr};
  return Status::Ok();
}

Status InferConstantOfShape(InferContext& c) {
  RANKD_RETURN_IF_ERROR(NeedValue(c, 0, "shape"));
  Shape s = c.IntValues(0);
  for (int64_t d : s) {
    if (d < 0) return c.Error("negative dim");
  }
  DType t = DType::kF32;
  auto it = c.node.attrs.find("value");
  if (it != c.node.attrs.end()) t = std::get<Tensor>(it->second).dtype();
  c.out(0) = {t, s, nullptr};
  return Status::Ok();
}

Status CheckConstantOfShape(const Node& n) {
  auto it = n.attrs.find("value");
  if (it == n.attrs.end()) return Status::Ok();
  const Tensor* t = std::get_if<Tensor>(&it->second);
  if (!t || t->size() != 1) return InvalidArgument(n.Describe() + ": value must be a one-element tensor");
  return Status::Ok();
}

}  // namespace

void AppendTensorSchemas(std::vector<OpSchema>& out) {
  out.push_back({"Reshape", 2, 2, nullptr, InferReshape, true});
  out.push_back({"Flatten", 1, 1, nullptr, InferFlatten, true});
  out.push_back({"Squeeze", 1, 2, nullptr, InferSqueeze, true});
  out.push_back({"Unsqueeze", 1, 2, nullptr, InferUnsqueeze, true});
  out.push_back({"Identity", 1, 1, nullptr, InferIdentity, true});
  out.push_back({"Transpose", 1, 1, nullptr, InferTranspose, false, TransposesOnlyUnitDims});
  out.push_back({"Slice", 3, 5, nullptr, InferSlice});
  out.push_back({"Concat", 1, 1024, nullptr, InferConcat, false, ConcatenatesOnePart});
  out.push_back({"Gather", 2, 2, nullptr, InferGather});
  out.push_back({"Expand", 2, 2, nullptr, InferExpand, false, KeepsItsShape});
  out.push_back({"Tile", 2, 2, nullptr, InferTile, false, KeepsItsShape});
  out.push_back({"Shape", 1, 1, nullptr, InferShape});
  out.push_back({"Range", 3, 3, nullptr, InferRange});
  out.push_back({"ConstantOfShape", 1, 1, CheckConstantOfShape, InferConstantOfShape});
}

}  // namespace rankd

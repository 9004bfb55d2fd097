#include "model/ops/op_schema.h"

#include <algorithm>
#include <map>

namespace rankd {

std::vector<int64_t> InferContext::IntValues(int i) const {
  const Tensor& t = *in(i).value;
  std::vector<int64_t> v(static_cast<size_t>(t.size()));
  for (int64_t k = 0; k < t.size(); ++k) v[static_cast<size_t>(k)] = t.ScalarAsInt(k);
  return v;
}

namespace {

const std::map<std::string, OpSchema>& Registry() {
  static const std::map<std::string, OpSchema> registry = [] {
    std::vector<OpSchema> all;
    AppendElementwiseSchemas(all);
    AppendTensorSchemas(all);
    AppendMathSchemas(all);
    AppendEmbeddingSchemas(all);
    AppendAttentionSchemas(all);
    AppendStringSchemas(all);
    std::map<std::string, OpSchema> m;
    for (const OpSchema& s : all) {
      RANKD_CHECK_MSG(m.emplace(s.name, s).second, std::string("duplicate schema ") + s.name);
    }
    return m;
  }();
  return registry;
}

}  // namespace

const OpSchema* FindOpSchema(const std::string& op) {
  const auto& r = Registry();
  auto it = r.find(op);
  return it == r.end() ? nullptr : &it->second;
}

Status CheckArity(const OpSchema& schema, const Node& node) {
  if (node.NumInputs() < schema.min_inputs || node.NumInputs() > schema.max_inputs) {
    return InvalidArgument(node.Describe() + " has " + std::to_string(node.NumInputs()) + " inputs; it takes " +
                           std::to_string(schema.min_inputs) + " to " + std::to_string(schema.max_inputs));
  }
  for (int i = 0; i < schema.min_inputs; ++i) {
    if (!node.HasInput(i))
      return InvalidArgument(node.Describe() + ": required input " + std::to_string(i) + " is missing");
  }
  if (node.outputs.empty() || node.outputs[0] < 0) return InvalidArgument(node.Describe() + " has no output");
  return Status::Ok();
}

std::vector<std::string> KnownOps() {
  std::vector<std::string> names;
  for (const auto& [name, schema] : Registry()) names.push_back(name);
  return names;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const Node& node) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return InvalidArgument(node.Describe() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                           std::to_string(rank));
  }
  return a;
}

StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes, const Node& node) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const Shape& t : shapes) all += ShapeToString(t) + " ";
      return InvalidArgument(node.Describe() + ": shapes " + all + "cannot be broadcast together");
    }
  }
  return out;
}

}  // namespace rankd

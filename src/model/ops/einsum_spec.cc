#include "model/ops/einsum_spec.h"

#include <algorithm>
#include <map>

namespace rankd {

StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, size_t num_inputs, const Node& node) {
  std::string eq;
  for (char ch : equation) {
    if (ch != ' ') eq += ch;
  }
  if (eq.find("...") != std::string::npos) {
    return Unimplemented(node.Describe() + ": Einsum with an ellipsis is not supported");
  }
  EinsumSpec spec;
  size_t arrow = eq.find("->");
  std::string lhs = arrow == std::string::npos ? eq : eq.substr(0, arrow);
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    spec.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::map<char, int> count;
  for (const std::string& op : spec.inputs) {
    for (char ch : op) {
      if (!std::isalpha(static_cast<unsigned char>(ch))) {
        return InvalidArgument(node.Describe() + ": bad Einsum equation '" + equation + "'");
      }
      if (std::count(op.begin(), op.end(), ch) > 1) {
        return Unimplemented(node.Describe() + ": Einsum with a repeated letter in one operand ('" + equation + "')");
      }
      ++count[ch];
    }
  }
  if (arrow == std::string::npos) {
    for (auto [ch, n] : count) {
      if (n == 1) spec.output += ch;
    }
  } else {
    spec.output = eq.substr(arrow + 2);
  }
  if (spec.inputs.size() != num_inputs) {
    return InvalidArgument(node.Describe() + ": equation '" + equation + "' names " +
                           std::to_string(spec.inputs.size()) + " operands, the node has " +
                           std::to_string(num_inputs));
  }
  if (num_inputs < 1 || num_inputs > 2) {
    return Unimplemented(node.Describe() + ": Einsum over " + std::to_string(num_inputs) + " operands");
  }
  for (char ch : spec.output) {
    if (!count.count(ch))
      return InvalidArgument(node.Describe() + ": output letter '" + std::string(1, ch) + "' is in no input");
  }
  for (auto [ch, n] : count) {
    bool in_out = spec.output.find(ch) != std::string::npos;
    if (!in_out && n == 1) {
      return Unimplemented(node.Describe() + ": Einsum summing letter '" + std::string(1, ch) +
                           "' out of a single operand ('" + equation + "')");
    }
  }
  return spec;
}

StatusOr<EinsumPlan> PlanEinsum(const EinsumSpec& spec, const std::vector<Shape>& shapes, const Node& node) {
  std::map<char, int64_t> dims;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (shapes[i].size() != spec.inputs[i].size()) {
      return InvalidArgument(node.Describe() + ": operand " + std::to_string(i) + " has shape " +
                             ShapeToString(shapes[i]) + ", the equation expects rank " +
                             std::to_string(spec.inputs[i].size()));
    }
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      char ch = spec.inputs[i][d];
      auto [it, fresh] = dims.emplace(ch, shapes[i][d]);
      if (!fresh && it->second != shapes[i][d]) {
        return InvalidArgument(node.Describe() + ": letter '" + std::string(1, ch) + "' has sizes " +
                               std::to_string(it->second) + " and " + std::to_string(shapes[i][d]));
      }
    }
  }
  EinsumPlan p;
  for (char ch : spec.output) p.output.push_back(dims[ch]);
  auto pos = [](const std::string& s, char ch) { return static_cast<int64_t>(s.find(ch)); };
  if (spec.inputs.size() == 1) {
    p.single = true;
    for (char ch : spec.output) p.perm_a.push_back(pos(spec.inputs[0], ch));
    return p;
  }
  const std::string &a = spec.inputs[0], &b = spec.inputs[1], &o = spec.output;
  std::string batch, rows, cols, inner;
  for (char ch : o) {
    bool in_a = a.find(ch) != std::string::npos, in_b = b.find(ch) != std::string::npos;
    (in_a && in_b ? batch : in_a ? rows : cols) += ch;
  }
  for (char ch : a) {
    if (o.find(ch) == std::string::npos) inner += ch;
  }
  for (char ch : batch) {
    p.perm_a.push_back(pos(a, ch));
    p.perm_b.push_back(pos(b, ch));
    p.batch *= dims[ch];
  }
  for (char ch : rows) {
    p.perm_a.push_back(pos(a, ch));
    p.rows *= dims[ch];
  }
  for (char ch : inner) {
    p.perm_a.push_back(pos(a, ch));
    p.perm_b.push_back(pos(b, ch));
    p.inner *= dims[ch];
  }
  for (char ch : cols) {
    p.perm_b.push_back(pos(b, ch));
    p.cols *= dims[ch];
  }
  std::string c = batch + rows + cols;
  for (char ch : o) p.perm_out.push_back(pos(c, ch));
  for (int64_t i : p.perm_a) p.a_permuted.push_back(shapes[0][static_cast<size_t>(i)]);
  for (int64_t i : p.perm_b) p.b_permuted.push_back(shapes[1][static_cast<size_t>(i)]);
  for (char ch : c) p.c_shape.push_back(dims[ch]);
  return p;
}

}  // namespace rankd

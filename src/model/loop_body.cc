#include "model/loop_body.h"

namespace rankd {
namespace {

std::optional<std::vector<int64_t>> IntElements(const Tensor* t) {
  if (!t || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->size(); ++i) v.push_back(t->ScalarAsInt(i));
  return v;
}

std::optional<std::vector<double>> Elements(const Tensor* t) {
  if (!t) return std::nullopt;
  std::vector<double> v;
  for (int64_t i = 0; i < t->size(); ++i) v.push_back(t->ScalarAsDouble(i));
  return v;
}

}  // namespace

const std::string& InputOf(const onnx::NodeProto& n, int k) {
  static const std::string kNone;
  return k < n.input_size() ? n.input(k) : kNone;
}

int InputOf(const Node& n, size_t k) { return k < n.inputs.size() ? n.inputs[k] : -1; }

const onnx::GraphProto* SubgraphOf(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name && a.type() == onnx::AttributeProto::GRAPH) return &a.g();
  }
  return nullptr;
}

std::optional<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  }
  return std::nullopt;
}

int64_t IntAttr(const onnx::NodeProto& n, const char* name, int64_t absent) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.i();
  }
  return absent;
}

LoopScope::LoopScope(const onnx::GraphProto& body, const Graph& outer, TensorFromProto tensor_of)
    : outer_(outer), producers_(outer.Producers()), tensor_of_(std::move(tensor_of)) {
  Add(body);
}

void LoopScope::Add(const onnx::GraphProto& g) {
  for (const onnx::TensorProto& t : g.initializer()) initializers_[t.name()] = &t;
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& out : n.output()) producer_[out] = &n;
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) Add(a.g());
    }
  }
}

const onnx::NodeProto* LoopScope::Op(const std::string& value, const char* op) const {
  auto it = producer_.find(value);
  return it != producer_.end() && it->second->op_type() == op ? it->second : nullptr;
}

const Node* LoopScope::OuterOp(const std::string& value, const char* op) const {
  return OuterOp(outer_.FindValue(value), op);
}

const Node* LoopScope::OuterOp(int value, const char* op) const {
  if (value < 0) return nullptr;
  const int p = producers_[static_cast<size_t>(value)];
  const Node* n = p >= 0 ? &outer_.nodes[static_cast<size_t>(p)] : nullptr;
  return n && n->op == op ? n : nullptr;
}

bool LoopScope::Plus(const std::string& value, const std::string& base, double k) const {
  const onnx::NodeProto* add = Op(value, "Add");
  return add && InputOf(*add, 0) == base && Is(InputOf(*add, 1), k);
}

std::optional<LoopScope::CarriedRows> LoopScope::CarriesRows(const onnx::GraphProto& body) const {
  if (body.input_size() != 4 || body.output_size() != 3) return std::nullopt;
  const onnx::NodeProto* first = Op(body.output(1).name(), "SequenceInsert");
  CarriedRows c;
  c.sequence_at = first && InputOf(*first, 0) == body.input(2).name() ? 2 : 3;
  c.index_at = 5 - c.sequence_at;
  c.index = body.input(c.index_at).name();
  c.sequence = body.input(c.sequence_at).name();
  const std::string& next = body.output(c.index_at - 1).name();
  c.insert = Op(body.output(c.sequence_at - 1).name(), "SequenceInsert");
  const onnx::NodeProto* more = Op(body.output(0).name(), "Less");
  if (!c.insert || InputOf(*c.insert, 0) != c.sequence || c.insert->input_size() != 2 || !Plus(next, c.index, 1) ||
      !more || InputOf(*more, 0) != next) {
    return std::nullopt;
  }
  c.count = InputOf(*more, 1);
  return c;
}

bool LoopScope::StartsEmptyAtZero(const onnx::NodeProto& loop, const std::string& count, int index_at,
                                  int sequence_at) const {
  const Node* first = OuterOp(InputOf(loop, 1), "Less");
  return first && InputOf(loop, 0).empty() && first->Input(1) >= 0 &&
         outer_.values[static_cast<size_t>(first->Input(1))].name == count &&
         outer_.ScalarConstant(first->inputs[0]) == 0.0 &&
         outer_.ScalarConstant(outer_.FindValue(InputOf(loop, index_at))) == 0.0 &&
         OuterOp(InputOf(loop, sequence_at), "SequenceEmpty") != nullptr;
}

std::optional<Tensor> LoopScope::BodyTensor(const std::string& value,
                                            std::optional<std::vector<double>>* scalars) const {
  const onnx::TensorProto* proto = nullptr;
  if (const onnx::NodeProto* c = Op(value, "Constant")) {
    for (const auto& a : c->attribute()) {
      if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) proto = &a.t();
      if (a.name() == "value_int") *scalars = std::vector<double>{static_cast<double>(a.i())};
      if (a.name() == "value_ints") *scalars = std::vector<double>(a.ints().begin(), a.ints().end());
      if (a.name() == "value_float") *scalars = std::vector<double>{a.f()};
    }
  } else if (auto it = initializers_.find(value); it != initializers_.end()) {
    proto = it->second;
  }
  if (!proto) return std::nullopt;
  StatusOr<Tensor> t = tensor_of_(*proto);
  return t.ok() ? std::optional<Tensor>(std::move(*t)) : std::nullopt;
}

std::optional<std::vector<int64_t>> LoopScope::Ints(const std::string& value) const {
  if (const onnx::NodeProto* c = Op(value, "Constant")) {
    for (const auto& a : c->attribute()) {
      if (a.name() == "value_int") return std::vector<int64_t>{a.i()};
      if (a.name() == "value_ints") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    }
  }
  std::optional<std::vector<double>> scalars;
  if (std::optional<Tensor> t = BodyTensor(value, &scalars)) return IntElements(&*t);
  if (Op(value, "Constant") || initializers_.count(value)) return std::nullopt;
  const int id = outer_.FindValue(value);
  return IntElements(id >= 0 ? outer_.FindConstant(id) : nullptr);
}

std::optional<std::vector<double>> LoopScope::Constant(const std::string& value) const {
  std::optional<std::vector<double>> scalars;
  if (std::optional<Tensor> t = BodyTensor(value, &scalars)) return Elements(&*t);
  if (scalars) return scalars;
  if (Op(value, "Constant") || initializers_.count(value)) return std::nullopt;
  const int id = outer_.FindValue(value);
  return Elements(id >= 0 ? outer_.FindConstant(id) : nullptr);
}

bool LoopScope::Is(const std::string& value, double want) const {
  if (const onnx::NodeProto* like = Op(value, "CastLike")) return Is(InputOf(*like, 0), want);
  return Constant(value) == std::vector<double>{want};
}

bool LoopScope::Zeros(const std::string& value) const {
  if (const onnx::NodeProto* e = Op(value, "Expand")) return Zeros(InputOf(*e, 0));
  auto v = Constant(value);
  if (!v || v->empty()) return false;
  for (double x : *v) {
    if (x != 0.0) return false;
  }
  return true;
}

std::string LoopScope::BranchOutput(const onnx::NodeProto& n, const char* name) const {
  const onnx::GraphProto* g = SubgraphOf(n, name);
  return g && g->output_size() == 1 ? g->output(0).name() : std::string();
}

}  // namespace rankd

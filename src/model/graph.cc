#include "model/graph.h"

namespace rankd {

int64_t Node::GetInt(const std::string& attr, int64_t fallback) const {
  auto it = attrs.find(attr);
  if (it == attrs.end()) return fallback;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  return fallback;
}

float Node::GetFloat(const std::string& attr, float fallback) const {
  auto it = attrs.find(attr);
  if (it == attrs.end()) return fallback;
  if (auto* v = std::get_if<float>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return static_cast<float>(*v);
  return fallback;
}

std::string Node::GetString(const std::string& attr, const std::string& fallback) const {
  auto it = attrs.find(attr);
  if (it == attrs.end()) return fallback;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  return fallback;
}

std::vector<int64_t> Node::GetInts(const std::string& attr) const {
  const std::span<const int64_t> ints = IntsView(attr);
  return {ints.begin(), ints.end()};
}

std::span<const int64_t> Node::IntsView(const std::string& attr) const {
  auto it = attrs.find(attr);
  if (it == attrs.end()) return {};
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return {v, 1};
  return {};
}

std::string Node::Describe() const { return op + " '" + name + "'"; }

int Graph::AddValue(Value v) {
  int id = static_cast<int>(values.size());
  if (!v.name.empty()) by_name_[v.name] = id;
  values.push_back(std::move(v));
  return id;
}

int Graph::AddConstant(const std::string& name, Tensor t) {
  Value v;
  v.name = name;
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.rank_known = true;
  int id = AddValue(std::move(v));
  constants[id] = std::move(t);
  return id;
}

void Graph::EraseNodes(const std::vector<bool>& removed) {
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (n >= removed.size() || !removed[n]) kept.push_back(std::move(nodes[n]));
  }
  nodes = std::move(kept);
}

int Graph::FindValue(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void Graph::RenameValue(int id, const std::string& name) {
  Value& v = values[static_cast<size_t>(id)];
  auto it = by_name_.find(v.name);
  if (it != by_name_.end() && it->second == id) by_name_.erase(it);
  v.name = name;
  if (!name.empty()) by_name_[name] = id;
}

const Tensor* Graph::FindConstant(int value) const {
  auto it = constants.find(value);
  return it == constants.end() ? nullptr : &it->second;
}

std::optional<double> Graph::ScalarConstant(int value) const {
  const Tensor* t = FindConstant(value);
  if (!t || t->size() != 1) return std::nullopt;
  return t->ScalarAsDouble(0);
}

std::vector<int> Graph::Producers() const {
  std::vector<int> producer(values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int out : nodes[n].outputs) {
      if (out >= 0) producer[static_cast<size_t>(out)] = static_cast<int>(n);
    }
  }
  return producer;
}

std::vector<int> Graph::UseCounts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& node : nodes) {
    for (int in : node.inputs) {
      if (in >= 0) ++uses[static_cast<size_t>(in)];
    }
  }
  for (int out : outputs) ++uses[static_cast<size_t>(out)];
  return uses;
}

std::map<std::string, int> Graph::OpCounts() const {
  std::map<std::string, int> counts;
  for (const Node& node : nodes) ++counts[node.op];
  return counts;
}

int64_t Graph::ConstantBytes() const {
  int64_t total = 0;
  for (const auto& [id, t] : constants) total += static_cast<int64_t>(t.bytes());
  return total;
}

std::shared_ptr<const MappedFile> Graph::FileHolding(const Tensor& t) const {
  const auto* at = static_cast<const uint8_t*>(t.raw());
  for (const auto& f : mapped_files) {
    if (at >= f->data() && at + t.bytes() <= f->data() + f->size()) return f;
  }
  return nullptr;
}

std::shared_ptr<const void> Graph::StorageOwner(const Tensor& t) const {
  if (std::shared_ptr<const MappedFile> file = FileHolding(t)) return file;
  return t.keeper();
}

}  // namespace rankd

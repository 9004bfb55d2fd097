#include "frontend/json_tree.h"

#include <bit>
#include <charconv>
#include <cstdio>

namespace rankd {

JsonValue::Kind JsonValue::kind() const { return tree_ ? tree_->nodes_[index_].kind : kMissing; }

bool JsonValue::boolean() const { return kind() == kBool && tree_->nodes_[index_].bits != 0; }

int64_t JsonValue::int64() const { return is_number_integer() ? static_cast<int64_t>(tree_->nodes_[index_].bits) : 0; }

uint64_t JsonValue::uint64() const { return is_number_integer() ? tree_->nodes_[index_].bits : 0; }

double JsonValue::number() const {
  switch (kind()) {
    case kInt:
      return static_cast<double>(static_cast<int64_t>(tree_->nodes_[index_].bits));
    case kUnsigned:
      return static_cast<double>(tree_->nodes_[index_].bits);
    case kFloat:
      return std::bit_cast<double>(tree_->nodes_[index_].bits);
    default:
      return 0;
  }
}

std::string_view JsonValue::string() const {
  if (!is_string()) return {};
  const JsonTree::Node& n = tree_->nodes_[index_];
  return std::string_view(tree_->text_).substr(n.bits, n.text_length);
}

std::string_view JsonValue::key() const {
  if (!tree_) return {};
  const JsonTree::Node& n = tree_->nodes_[index_];
  return std::string_view(tree_->text_).substr(n.key_offset, n.key_length);
}

JsonValue JsonValue::operator[](std::string_view key) const {
  JsonValue found;
  if (!is_object()) return found;
  for (JsonValue member : *this) {
    if (member.key() == key) found = member;
  }
  return found;
}

JsonValue::Iterator& JsonValue::Iterator::operator++() {
  index_ = tree_->EndOf(index_);
  return *this;
}

JsonValue::Iterator JsonValue::begin() const {
  const bool container = is_array() || is_object();
  return Iterator(tree_, container ? index_ + 1 : 0);
}

JsonValue::Iterator JsonValue::end() const {
  const bool container = is_array() || is_object();
  return Iterator(tree_, container ? tree_->EndOf(index_) : 0);
}

size_t JsonValue::size() const {
  size_t n = 0;
  for (auto it = begin(); it != end(); ++it) ++n;
  return n;
}

uint32_t JsonTree::EndOf(uint32_t index) const {
  const uint32_t end = nodes_[index].end;
  return end == kOpen ? static_cast<uint32_t>(nodes_.size()) : end;
}

uint32_t JsonTree::Append(Kind kind, uint64_t bits, std::string_view key) {
  Node n;
  n.kind = kind;
  n.bits = bits;
  n.key_offset = static_cast<uint32_t>(text_.size());
  n.key_length = static_cast<uint32_t>(key.size());
  text_.append(key);
  const auto index = static_cast<uint32_t>(nodes_.size());
  n.end = index + 1;
  nodes_.push_back(n);
  return index;
}

uint32_t JsonTree::Open(Kind container, std::string_view key) {
  const uint32_t index = Append(container, 0, key);
  nodes_[index].end = kOpen;
  return index;
}

void JsonTree::Close(uint32_t container) { nodes_[container].end = static_cast<uint32_t>(nodes_.size()); }

void JsonTree::Add(Kind scalar, uint64_t bits, std::string_view key) { Append(scalar, bits, key); }

void JsonTree::AddString(std::string_view text, std::string_view key) {
  const uint32_t index = Append(Kind::kString, 0, key);
  nodes_[index].bits = text_.size();  // after the key
  nodes_[index].text_length = static_cast<uint32_t>(text.size());
  text_.append(text);
}

struct JsonTree::Storage {
  std::vector<Node> nodes;
  std::string text;
};

JsonTree::Storage& JsonTree::KeptStorage() {
  thread_local Storage kept;
  return kept;
}

void JsonTree::Reserve(size_t nodes, size_t text_bytes) {
  Storage& kept = KeptStorage();
  if (nodes_.capacity() == 0 && kept.nodes.capacity() != 0) {
    nodes_.swap(kept.nodes);
    text_.swap(kept.text);
  }
  nodes_.reserve(nodes);
  text_.reserve(text_bytes);
}

JsonTree::~JsonTree() {
  constexpr size_t kKeptNodes = 4096, kKeptText = size_t{64} << 10;  // a large header's, not a JSON body's
  if (nodes_.capacity() == 0 || nodes_.capacity() > kKeptNodes || text_.capacity() > kKeptText) return;
  Storage& kept = KeptStorage();
  if (kept.nodes.capacity() >= nodes_.capacity()) return;
  nodes_.clear();
  text_.clear();
  kept.nodes.swap(nodes_);
  kept.text.swap(text_);
}

namespace {

void DumpString(std::string_view s, std::string& out) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

void JsonTree::DumpValue(uint32_t index, std::string& out) const {
  const JsonValue v(this, index);
  char buf[32];
  switch (v.kind()) {
    case Kind::kMissing:
      return;
    case Kind::kNull:
      out += "null";
      return;
    case Kind::kBool:
      out += v.boolean() ? "true" : "false";
      return;
    case Kind::kInt:
      out.append(buf, std::to_chars(buf, buf + sizeof(buf), v.int64()).ptr);
      return;
    case Kind::kUnsigned:
      out.append(buf, std::to_chars(buf, buf + sizeof(buf), v.uint64()).ptr);
      return;
    case Kind::kFloat:
      out.append(buf, std::to_chars(buf, buf + sizeof(buf), v.number()).ptr);
      return;
    case Kind::kString:
      DumpString(v.string(), out);
      return;
    case Kind::kArray:
    case Kind::kObject: {
      const bool object = v.is_object();
      out += object ? '{' : '[';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ',';
        first = false;
        if (object) {
          DumpString((*it).key(), out);
          out += ':';
        }
        DumpValue((*it).index_, out);
      }
      out += object ? '}' : ']';
      return;
    }
  }
}

std::string JsonTree::Dump() const {
  std::string out;
  if (!nodes_.empty()) DumpValue(0, out);
  return out;
}

}  // namespace rankd

// JsonTree: a small JSON document held flat, for the part of a request body that is not tensor
// data (names, datatypes, shapes, parameters, outputs: a few hundred bytes).
//
// Every value is one 32-byte node in one vector, in document order (a container's children follow
// it, each subtree contiguous), and every string and key is a range of one text buffer, so a W1
// request header of 53 inputs costs a few heap blocks where a document of maps and strings took
// hundreds (docs/log/benchmarks.md, "HTTP binary's parse with the lengths as tensors: the heap").
//
// A thread keeps the storage of the last small tree it destroyed and hands it to the next tree it
// reserves for, so a server thread parses header after header without a heap block for the tree.
//
// Built front to back by a reader (json_request_reader.h): Open a container, Add its values, Close
// it. Read through JsonValue, a borrowed view whose accessors mirror the JSON types: a member or
// element that is not there reads as a missing value, which is none of the types. Numbers keep the
// distinction a client's bytes make: a non-negative integer is unsigned, a negative one signed,
// anything else (a fraction, an exponent, an integer past 64 bits) a double. Where an object repeats
// a key, the last value is the one read.
//
// Thread safety: none; a tree is read only while it is not being built.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rankd {

class JsonTree;

class JsonValue {
 public:
  enum Kind : uint8_t { kMissing, kNull, kBool, kInt, kUnsigned, kFloat, kString, kArray, kObject };

  JsonValue() = default;

  Kind kind() const;
  bool exists() const { return kind() != kMissing; }
  bool is_null() const { return kind() == kNull; }
  bool is_boolean() const { return kind() == kBool; }
  bool is_number_integer() const { return kind() == kInt || kind() == kUnsigned; }
  bool is_number_unsigned() const { return kind() == kUnsigned; }
  bool is_string() const { return kind() == kString; }
  bool is_array() const { return kind() == kArray; }
  bool is_object() const { return kind() == kObject; }

  // REQUIRES: the matching is_*() (a missing or other value reads as false, 0 or empty).
  bool boolean() const;
  int64_t int64() const;  // an integer's value; an unsigned one past INT64_MAX wraps
  uint64_t uint64() const;
  double number() const;  // any number as a double
  std::string_view string() const;

  // An object's member named `key` (the last one where it repeats), or a missing value.
  JsonValue operator[](std::string_view key) const;
  bool contains(std::string_view key) const { return (*this)[key].exists(); }

  // A container's children in order (an object's values, whose keys key() gives); size() counts them.
  class Iterator {
   public:
    JsonValue operator*() const { return JsonValue(tree_, index_); }
    Iterator& operator++();
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }

   private:
    friend class JsonValue;
    Iterator(const JsonTree* tree, uint32_t index) : tree_(tree), index_(index) {}
    const JsonTree* tree_;
    uint32_t index_;
  };
  Iterator begin() const;
  Iterator end() const;
  size_t size() const;
  bool empty() const { return size() == 0; }
  std::string_view key() const;  // a member's key; empty for an element of a list

 private:
  friend class JsonTree;
  JsonValue(const JsonTree* tree, uint32_t index) : tree_(tree), index_(index) {}
  const JsonTree* tree_ = nullptr;
  uint32_t index_ = 0;
};

class JsonTree {
 public:
  using Kind = JsonValue::Kind;

  JsonTree() = default;
  JsonTree(JsonTree&&) = default;
  JsonTree& operator=(JsonTree&&) = default;
  ~JsonTree();  // keeps small storage for the thread's next tree

  // The root value: missing while nothing was added.
  JsonValue root() const { return nodes_.empty() ? JsonValue() : JsonValue(this, 0); }

  // Building, front to back. `key` names a member of the open object and is empty in a list.
  // Open returns the container's index for Close, which ends it after its last child.
  uint32_t Open(Kind container, std::string_view key);
  void Close(uint32_t container);
  void Add(Kind scalar, uint64_t bits, std::string_view key);  // kNull, kBool, kInt, kUnsigned, kFloat
  void AddString(std::string_view text, std::string_view key);
  // The value at `index` (a container still open included).
  JsonValue at(uint32_t index) const { return JsonValue(this, index); }
  // Room for this many nodes and bytes of keys and strings, from the thread's kept storage where
  // there is some. REQUIRES: nothing added yet.
  void Reserve(size_t nodes, size_t text_bytes);

  // Compact JSON text of the tree, keys in document order (tests compare trees by it).
  std::string Dump() const;

 private:
  friend class JsonValue;
  static constexpr uint32_t kOpen = UINT32_MAX;
  struct Node {
    uint64_t bits = 0;  // a number's or bool's bits; a string's offset in text_
    uint32_t end = 0;   // the index after this node's subtree (kOpen while a container is open)
    uint32_t key_offset = 0;
    uint32_t key_length = 0;
    uint32_t text_length = 0;  // a string's bytes
    Kind kind = Kind::kMissing;
  };
  struct Storage;
  static Storage& KeptStorage();  // the calling thread's
  uint32_t Append(Kind kind, uint64_t bits, std::string_view key);
  uint32_t EndOf(uint32_t index) const;
  void DumpValue(uint32_t index, std::string& out) const;

  std::vector<Node> nodes_;
  std::string text_;
};

}  // namespace rankd

// Graph IR: what an imported model becomes, and what compile/ passes rewrite.
//
// Values are numbered; a node reads and writes values by id. A value is a graph input, a constant
// (its Tensor lives in Graph::constants) or the output of exactly one node. Nodes are kept in
// topological order. Shapes here are symbolic (-1 = unknown dim); concrete shapes exist only in a
// plan (compile/plan.h). Not thread-safe; a loaded graph is read-only and shared by plans.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "model/mapped_file.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

using AttributeValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                                    std::vector<std::string>, Tensor>;

struct Value {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;              // symbolic; -1 marks an unknown dim
  bool rank_known = false;  // false: shape is meaningless
};

struct Node {
  std::string op;            // ONNX op type, or a rankd op ("EmbeddingBag", "RaggedToPadded")
  std::string name;          // the ONNX node name (or a generated one), for messages
  std::vector<int> inputs;   // value ids; -1 for an omitted optional input
  std::vector<int> outputs;  // value ids
  std::map<std::string, AttributeValue> attrs;

  bool Has(const std::string& attr) const { return attrs.count(attr) > 0; }
  int64_t GetInt(const std::string& attr, int64_t fallback) const;
  float GetFloat(const std::string& attr, float fallback) const;
  std::string GetString(const std::string& attr, const std::string& fallback) const;
  std::vector<int64_t> GetInts(const std::string& attr) const;  // empty when absent
  // The same without a copy (for what a kernel reads every run): a view of the list, or of its one
  // integer; empty when absent. Valid while the node is.
  std::span<const int64_t> IntsView(const std::string& attr) const;
  int NumInputs() const { return static_cast<int>(inputs.size()); }
  // True if input i exists and is not omitted.
  bool HasInput(int i) const { return i < NumInputs() && inputs[i] >= 0; }
  // Input i, or -1 where it is absent: the fusion passes that run before a graph is checked read
  // malformed nodes through this.
  int Input(int i) const { return HasInput(i) ? inputs[static_cast<size_t>(i)] : -1; }
  // "Op 'name'" for error messages.
  std::string Describe() const;
};

class Graph {
 public:
  int AddValue(Value v);
  int AddConstant(const std::string& name, Tensor t);
  // Returns -1 when no value has that name.
  int FindValue(const std::string& name) const;
  // Gives value `id` a new name (FindValue follows).
  void RenameValue(int id, const std::string& name);
  // Removes the nodes whose entry in `removed` (indexed like `nodes`) is true, keeping the order.
  void EraseNodes(const std::vector<bool>& removed);

  std::vector<Value> values;
  std::vector<Node> nodes;
  std::unordered_map<int, Tensor> constants;  // value id -> data
  std::vector<int> inputs;                    // graph inputs in signature order
  std::vector<int> outputs;                   // graph outputs in signature order
  int64_t opset = 0;
  // The memory-mapped external-data files that constants view without owning.
  std::vector<std::shared_ptr<const MappedFile>> mapped_files;

  bool IsConstant(int value) const { return constants.count(value) > 0; }
  // The constant behind `value`, or nullptr when it is computed, an input, or omitted (-1).
  const Tensor* FindConstant(int value) const;
  // The element of a one-element constant, as a double; nullopt for anything else.
  std::optional<double> ScalarConstant(int value) const;
  // value id -> index of the producing node, or -1 (inputs, constants).
  std::vector<int> Producers() const;
  // value id -> number of node inputs plus graph outputs reading it.
  std::vector<int> UseCounts() const;
  // Op type -> count, for `rankd inspect`.
  std::map<std::string, int> OpCounts() const;
  // Bytes held by constants (weights and tables).
  int64_t ConstantBytes() const;
  // The external-data file of mapped_files whose bytes constant `t` views, or null.
  std::shared_ptr<const MappedFile> FileHolding(const Tensor& t) const;
  // What keeps constant `t`'s bytes alive: the file it views (FileHolding), else the storage it owns
  // or shares (Tensor::keeper); null for a view of memory whose lifetime no one here knows.
  std::shared_ptr<const void> StorageOwner(const Tensor& t) const;

 private:
  std::unordered_map<std::string, int> by_name_;
};

}  // namespace rankd

// LoopScope: what the importers of exported Loops (bag_loop_import.h, dynamo_bag_import.h) read a
// Loop's body by. The body's nodes (and those of the If branches inside it) by the value each
// writes, the nodes of the graph imported before the Loop by value, and the constants of either.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/bag_loop_import.h"
#include "model/graph.h"

namespace rankd {

// A node's k-th input, or "" / -1 where it has fewer (patterns read nodes before checking them).
const std::string& InputOf(const onnx::NodeProto& n, int k);
int InputOf(const Node& n, size_t k);

// A node's graph attribute `name` (a Loop's body, an If's branch), or nullptr.
const onnx::GraphProto* SubgraphOf(const onnx::NodeProto& n, const char* name);
// A node's integer-list attribute, or nullopt; an integer attribute, or `absent`.
std::optional<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& n, const char* name);
int64_t IntAttr(const onnx::NodeProto& n, const char* name, int64_t absent);

class LoopScope {
 public:
  // `body` and `outer` are borrowed and outlive the scope.
  LoopScope(const onnx::GraphProto& body, const Graph& outer, TensorFromProto tensor_of);

  // The body's node writing `value` if it is `op`, else nullptr.
  const onnx::NodeProto* Op(const std::string& value, const char* op) const;
  // The outer graph's node writing `value` (a name, or a value id) if it is `op`, else nullptr.
  const Node* OuterOp(const std::string& value, const char* op) const;
  const Node* OuterOp(int value, const char* op) const;

  // The elements of a constant `value`: a Constant node or initializer of the body, or a constant
  // of the outer graph. Ints: exactly, where it is an integer constant; Constant: any dtype.
  std::optional<std::vector<int64_t>> Ints(const std::string& value) const;
  std::optional<std::vector<double>> Constant(const std::string& value) const;
  // Whether `value` is the constant `want` (one element), or CastLike of one.
  bool Is(const std::string& value, double want) const;
  // Whether `value` is Add(base, k) (k a constant or its CastLike).
  bool Plus(const std::string& value, const std::string& base, double k) const;
  // Whether `value` is all zeros (a constant, or Expand of one).
  bool Zeros(const std::string& value) const;
  // Whether `loop` (the Loop whose body this is) starts with an empty sequence and index 0 under
  // the condition 0 < `count` (the value its body compares the next index with): its carried
  // inputs `index_at` and `sequence_at` are a constant 0 and SequenceEmpty, and it has no trip count.
  bool StartsEmptyAtZero(const onnx::NodeProto& loop, const std::string& count, int index_at, int sequence_at) const;
  // The output of `n`'s branch `name` (one output), or "".
  std::string BranchOutput(const onnx::NodeProto& n, const char* name) const;

  // A dynamo-exported bag Loop's carried values, read from its body: the bag index i and a
  // sequence of rows, in either order (the exporter writes both), each iteration inserting one row
  // (`insert`), carrying i + 1 and running on while i + 1 < `count` (a value of the outer graph).
  // `index_at` and `sequence_at` are their positions among the body's inputs (2 and 3, or 3 and
  // 2), which are the Loop's inputs' too; the Loop's outputs hold them at those positions less 2.
  struct CarriedRows {
    std::string index, sequence, count;
    const onnx::NodeProto* insert = nullptr;
    int index_at = 0, sequence_at = 0;
  };
  // The body's carried rows, or nullopt where it carries anything else.
  std::optional<CarriedRows> CarriesRows(const onnx::GraphProto& body) const;

 private:
  void Add(const onnx::GraphProto& g);
  // The body's constant `value` as a tensor (a Constant node's `value` or an initializer), or
  // nullopt; `scalars` gets a Constant's value_int / value_ints / value_float instead.
  std::optional<Tensor> BodyTensor(const std::string& value, std::optional<std::vector<double>>* scalars) const;

  const Graph& outer_;
  const std::vector<int> producers_;
  const TensorFromProto tensor_of_;
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::map<std::string, const onnx::TensorProto*> initializers_;  // the body's and its branches'
};

}  // namespace rankd

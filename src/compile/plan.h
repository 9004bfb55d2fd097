// Plan: a graph specialised to concrete input shapes for one backend.
//
// Building a plan infers every shape, folds everything computable from shapes and constants
// (Shape/Gather/Concat chains feeding Reshape, say), drops steps whose results are unused, and
// assigns every intermediate an offset in one workspace, reusing memory once a value's last reader
// has run. Reshape-like ops become aliases: no step, no copy. A plan is immutable once built and is
// shared by the executors that run it; it keeps a reference to the graph, which must outlive it.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/graph.h"
#include "model/ops/op_schema.h"
#include "rankd/status.h"

namespace rankd {

struct PlanOptions {
  const Backend* backend = &CpuBackend();
  // Padded length of each ragged input (for RaggedToPadded), in the graph's ragged order.
  std::vector<int64_t> ragged_max_lengths;
  // A plan whose workspace would exceed this is refused (ResourceExhausted), not allocated.
  int64_t max_workspace_bytes = int64_t{16} << 30;
};

enum class PlanStorage { kInput, kConstant, kWorkspace, kAlias, kUnused };

struct PlanValue {
  DType dtype = DType::kInvalid;
  Shape shape;
  PlanStorage storage = PlanStorage::kUnused;
  int input_index = -1;              // kInput: index into the graph's inputs
  const Tensor* constant = nullptr;  // kConstant
  int64_t offset = -1;               // kWorkspace: byte offset
  int alias_of = -1;                 // kAlias: the value (never itself an alias) whose bytes it reuses
};

struct PlanStep {
  int node = -1;
  KernelFn kernel = nullptr;
  std::shared_ptr<const KernelState> state;  // the kernel's prepared state, when it has a prepare
  std::vector<int> inputs;                   // value ids, -1 for omitted
  std::vector<int> outputs;                  // value ids, -1 for omitted
  int64_t scratch_offset = -1;
  int64_t scratch_bytes = 0;
};

class Plan {
 public:
  // `inputs` gives the dtype and shape of each graph input, in graph order.
  static StatusOr<std::shared_ptr<const Plan>> Build(const Graph& graph, const std::vector<TensorMeta>& inputs,
                                                     const PlanOptions& options = {});

  const Graph& graph() const { return *graph_; }
  const std::vector<PlanStep>& steps() const { return steps_; }
  const std::vector<PlanValue>& values() const { return values_; }
  // The value whose bytes value `id` reads: its alias's root, or itself.
  int RootOf(int id) const {
    const PlanValue& v = values_[static_cast<size_t>(id)];
    return v.storage == PlanStorage::kAlias ? v.alias_of : id;
  }
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // Whether every value has room of its own, no room reused (Backend::SeparateRoomBytes).
  bool separate_rooms() const { return separate_rooms_; }
  // A process-unique id (executors cache per-plan bindings by it).
  uint64_t id() const { return id_; }
  // Steps folded away at plan time, for `rankd inspect --plan`.
  int folded_nodes() const { return folded_nodes_; }

 private:
  Plan() = default;
  Status AssignMemory(int64_t max_workspace_bytes, int64_t separate_room_bytes);

  const Graph* graph_ = nullptr;
  std::vector<PlanStep> steps_;
  std::vector<PlanValue> values_;
  std::deque<Tensor> folded_;  // values computed at plan time (stable addresses)
  int64_t workspace_bytes_ = 0;
  bool separate_rooms_ = false;
  uint64_t id_ = 0;
  int folded_nodes_ = 0;
};

}  // namespace rankd

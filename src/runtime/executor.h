// Executor: runs plans on the CPU with its own workspace.
//
// One executor runs one plan at a time (not thread-safe); a model keeps a pool of them so
// concurrent requests run in parallel. The workspace grows to the largest plan seen and is then
// reused: a steady state allocates nothing but the returned outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "rankd/status.h"
#include "rankd/tensor.h"
#include "compile/plan.h"

namespace rankd {

class Executor {
 public:
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs `plan` on `inputs` (one per graph input, with the dtypes and shapes the plan was built
  // for) and returns the graph outputs in order, as tensors the caller owns.
  StatusOr<std::vector<Tensor>> Run(const Plan& plan, std::span<const Tensor> inputs);

 private:
  // Tensor views of every value of one plan over this executor's workspace.
  struct Binding {
    std::vector<Tensor> views;
    std::vector<std::vector<const Tensor*>> step_inputs;
    std::vector<std::vector<Tensor*>> step_outputs;
    std::vector<std::pair<int, int>> input_rooted;  // (value id, graph input index) set per run
  };
  Binding& Bind(const Plan& plan);

  struct FreeDeleter { void operator()(void* p) const; };
  std::unique_ptr<uint8_t, FreeDeleter> workspace_;
  int64_t workspace_bytes_ = 0;
  std::unordered_map<uint64_t, Binding> bindings_;
};

}  // namespace rankd

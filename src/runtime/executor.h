// Executor: runs a model's plans on one backend (runtime/host_executor.h for the CPU,
// runtime/cuda/cuda_executor.h for a GPU); runtime/backends.h makes the right one for a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compile/plan.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// Runs plans of one model on one backend. Not thread-safe: a model keeps a pool of them, and
// each owns its workspace (and, on a device, its stream), so concurrent requests run in parallel.
class Executor {
 public:
  virtual ~Executor() = default;
  // Runs `plan` on `inputs` (host tensors, one per graph input, with the dtypes and shapes the
  // plan was built for, except as FillsRaggedTails allows) and returns the graph outputs in order,
  // as host tensors the caller owns.
  virtual StatusOr<std::vector<Tensor>> Run(const Plan& plan, std::span<const Tensor> inputs) = 0;
  // Whether Run takes a one-dimensional integer input (a ragged input's ids) shorter than the
  // plan's, reading the slots after it as -1: a request padded to a bucket then keeps its ids
  // where they are instead of copying them into a padded tensor (PadToBucket).
  virtual bool FillsRaggedTails() const { return false; }
  // Records `plan` as one replayable launch (a CUDA graph: the input copy, every step and the
  // output copy), so later Runs of it issue one launch instead of one per step. Returns the device
  // bytes the capture took. Unimplemented on backends without such a thing (the CPU).
  virtual StatusOr<int64_t> Capture(const Plan& plan) {
    (void)plan;
    return Unimplemented("this backend does not capture plans");
  }
  // Whether Run(plan) replays a capture.
  virtual bool Captured(const Plan& plan) const {
    (void)plan;
    return false;
  }
  // What one Run of `plan` puts on the device, counted from a capture of it that is then thrown
  // away (Run's behaviour does not change): kernels, copies (a kernel that only moves the inputs
  // in or the outputs out counts as one) and memsets, and the most kernels on one path of the captured graph's
  // dependencies (fewer than all where steps run side by side).
  // Unimplemented on the CPU.
  struct Launches {
    int kernels = 0, copies = 0, memsets = 0, other = 0;
    int kernels_in_a_row = 0;
  };
  virtual StatusOr<Launches> CountLaunches(const Plan& plan) {
    (void)plan;
    return Unimplemented("this backend launches no device work");
  }
};

}  // namespace rankd

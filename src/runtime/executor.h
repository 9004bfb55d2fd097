// Executor: runs a model's plans on one backend (runtime/host_executor.h for the CPU,
// runtime/cuda/cuda_executor.h for a GPU); runtime/backends.h makes the right one for a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/deferred_merge.h"
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
  // plan was built for, except as FillsRaggedTails allows) and writes the graph's outputs into
  // `outputs`: one per graph output, in host memory the caller provides (CheckOutputs), with the
  // plan's dtypes and shapes or fewer rows (the first dimension), which then get the first rows.
  // A request padded to a bucket so receives its own rows only, straight into the memory that
  // answers it. On an error the outputs' contents are unspecified.
  virtual Status RunInto(const Plan& plan, std::span<const Tensor> inputs, std::span<Tensor> outputs) = 0;
  // RunInto for a merged batch some of whose inputs `deferred` still holds as their requests'
  // parts (common/deferred_merge.h). An executor that reads parts where they lie takes those it
  // can; this one has them all written first.
  virtual Status RunMergedInto(const Plan& plan, std::span<const Tensor> inputs, DeferredMerge& deferred,
                               std::span<Tensor> outputs) {
    deferred.WriteRest();
    return RunInto(plan, inputs, outputs);
  }
  // The same into host tensors of the plan's output shapes it allocates (request tensors, where a
  // RequestTensorScope is alive), returned in order.
  StatusOr<std::vector<Tensor>> Run(const Plan& plan, std::span<const Tensor> inputs);
  // Uninitialised host tensors of `plan`'s output dtypes and shapes, with `rows` rows where an
  // output's first dimension is `plan_rows` (-1: the plan's rows everywhere).
  static std::vector<Tensor> OutputsFor(const Plan& plan, int64_t plan_rows = -1, int64_t rows = -1);
  // InvalidArgument unless `outputs` can take `plan`'s outputs as RunInto says: as many as the
  // graph has, each of the output's dtype, rank and trailing dimensions, at most its rows, and in
  // memory the host reaches.
  static Status CheckOutputs(const Plan& plan, std::span<const Tensor> outputs);
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

// CudaExecutor: runs plans on one GPU with its own stream, workspace and cuBLASLt state.
//
// A run packs the host inputs into one pinned buffer and copies them to the device in one
// transfer, launches every step on the executor's stream, copies the outputs back and waits for
// the stream. Bad data met on the device (an id out of range) is reported through one device word
// read back with the outputs, and fails only this run. Weights live in the model's
// CudaModelResources, shared by its executors; values folded at plan time are uploaded per plan.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"

namespace rankd::cuda {

// Device copies of a graph's constants, in one allocation.
class CudaModelResources final : public ModelResources {
 public:
  static StatusOr<std::shared_ptr<CudaModelResources>> Upload(const Graph& graph, int device, Precision precision);
  // The device copy of a graph constant, or nullptr for any other tensor.
  void* Find(const Tensor* constant) const;
  int device() const { return device_; }
  Precision precision() const { return precision_; }

 private:
  int device_ = 0;
  Precision precision_ = Precision::kFp32;
  DeviceBuffer arena_;
  std::unordered_map<const Tensor*, void*> copies_;
};

class CudaExecutor final : public Executor {
 public:
  static StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<CudaModelResources> resources);
  ~CudaExecutor() override;

  StatusOr<std::vector<Tensor>> Run(const Plan& plan, std::span<const Tensor> inputs) override;

 private:
  explicit CudaExecutor(std::shared_ptr<CudaModelResources> resources) : resources_(std::move(resources)) {}

  struct Binding {
    std::vector<Tensor> views;       // device views of every value
    std::vector<Tensor> host_views;  // host views of constants (and aliases of them)
    std::vector<std::vector<const Tensor*>> step_inputs, step_host_inputs;
    std::vector<std::vector<Tensor*>> step_outputs;
    std::vector<std::pair<int, int>> input_rooted;  // (value id, graph input index)
    std::unique_ptr<DeviceBuffer> folded;           // device copies of plan-folded values
  };
  StatusOr<Binding*> Bind(const Plan& plan);
  Status Launch(const Plan& plan, Binding& b);

  std::shared_ptr<CudaModelResources> resources_;
  DeviceContext ctx_;
  GemmCache gemm_;
  DeviceBuffer workspace_, lt_workspace_, inputs_, error_;
  PinnedBuffer staged_inputs_, staged_outputs_;
  std::unordered_map<uint64_t, Binding> bindings_;
};

}  // namespace rankd::cuda

// HostModelResources: what the CPU keeps per model and its executors share: the kernels' counters
// and, with bf16 precision where the CPU multiplies bf16, the products' bf16 weights.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/bf16_matmuls.h"

namespace rankd::cpu {

class HostModelResources final : public ModelResources {
 public:
  HostModelResources(int counters, std::unique_ptr<Bf16Matmuls> bf16)
      : count_(counters),
        counters_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(counters))),
        bf16_(std::move(bf16)) {}
  void* kernel_counters() const override { return count_ > 0 ? counters_.get() : nullptr; }
  std::vector<int64_t> ReadCounters() const override {
    std::vector<int64_t> values;
    for (int c = 0; c < count_; ++c) values.push_back(counters_[static_cast<size_t>(c)].load());
    return values;
  }
  // The products' bf16 weights, or null (fp32 precision, or a CPU without bf16 products).
  const Bf16Matmuls* bf16_matmuls() const { return bf16_.get(); }

  // Those of a kernel's model, or null (a run outside a model, or another backend's resources).
  static const Bf16Matmuls* Bf16Of(const KernelArgs& k) {
    const auto* host = dynamic_cast<const HostModelResources*>(k.resources);
    return host ? host->bf16_matmuls() : nullptr;
  }

 private:
  int count_;
  std::unique_ptr<std::atomic<int64_t>[]> counters_;
  std::unique_ptr<Bf16Matmuls> bf16_;
};

}  // namespace rankd::cpu

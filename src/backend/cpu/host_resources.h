// HostModelResources: what the CPU keeps per model and its executors share: the kernels' counters
// and the large weight matrices packed for oneDNN's matmul (in bf16 at bf16 precision where the
// CPU multiplies bf16).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/packed_matmuls.h"

namespace rankd::cpu {

class HostModelResources final : public ModelResources {
 public:
  HostModelResources(int counters, std::unique_ptr<PackedMatmuls> packed)
      : count_(counters),
        counters_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(counters))),
        packed_(std::move(packed)) {}
  void* kernel_counters() const override { return count_ > 0 ? counters_.get() : nullptr; }
  std::vector<int64_t> ReadCounters() const override {
    std::vector<int64_t> values;
    for (int c = 0; c < count_; ++c) values.push_back(counters_[static_cast<size_t>(c)].load());
    return values;
  }
  // The products by packed weights, or null (none qualifies, or OpenBLAS provides the sgemm).
  const PackedMatmuls* packed_matmuls() const { return packed_.get(); }

  // Those of a kernel's model, or null (a run outside a model, or another backend's resources).
  static const PackedMatmuls* PackedOf(const KernelArgs& k) {
    const auto* host = dynamic_cast<const HostModelResources*>(k.resources);
    return host ? host->packed_matmuls() : nullptr;
  }

 private:
  int count_;
  std::unique_ptr<std::atomic<int64_t>[]> counters_;
  std::unique_ptr<PackedMatmuls> packed_;
};

}  // namespace rankd::cpu

// A model's weights on one GPU: device copies of its graph's constants, made once at load and
// shared by the model's executors, with the bf16 copies of product weights a bf16 precision reads.
#pragma once

#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/row_cache.h"
#include "common/grace_period.h"

namespace rankd::cuda {

// Device copies of a graph's constants: in one allocation, but for the large ones, each shared
// with the other models that hold it (shared_device_copies.h).
class CudaModelResources final : public ModelResources {
 public:
  // The constants placed on the device are copied there; the tables `options` places in host
  // memory are page-locked where they lie (or, where that fails, copied once into page-locked
  // memory) and mapped, so kernels read them in place; the cached ones get their device caches,
  // empty until the cache's keeper fills them.
  static StatusOr<std::shared_ptr<CudaModelResources>> Upload(const Graph& graph, int device,
                                                              const PrepareOptions& options);
  ~CudaModelResources() override;
  // The device memory Upload takes on `device` for `graph` prepared with `options`: less the copies
  // of constants that models loaded there hold in the same host storage (shared_device_copies.h).
  static size_t DeviceBytes(const Graph& graph, const PrepareOptions& options, int device);
  // The address kernels read a graph constant at (device memory, or mapped host memory for a
  // table kept there), or nullptr for any other tensor.
  void* Find(const Tensor* constant) const;
  // Whether kernels read a table at `table` (as Find gives it) in host memory, in place.
  bool InHostMemory(const void* table) const { return host_table_views_.count(table) > 0; }
  // With bf16 precision: the bf16 copies of the weight matrices products read (keyed by the fp32
  // device copy); empty otherwise.
  const std::unordered_map<const void*, const void*>& bf16_weights() const { return bf16_weights_; }
  // With bf16 precision: the [K, N] weights (B not transposed) as bf16 [N, K], for products of a
  // few rows (small_rows_gemm.h); empty otherwise.
  const std::unordered_map<const void*, const void*>& bf16_weights_nk() const { return bf16_weights_nk_; }
  // With bf16 precision: weight matrices whose k is not a multiple of 8 in bf16, k padded with
  // zeros (device.h's PaddedK), for cuBLASLt's products of many rows; empty otherwise.
  const std::unordered_map<const void*, const void*>& bf16_weights_padded() const { return bf16_weights_padded_; }
  int device() const { return device_; }
  Precision precision() const { return precision_; }
  // The tables' device caches, as kernels find them (DeviceContext::row_caches).
  const RowCaches& row_caches() const { return row_caches_; }
  // The views of the GPU caches of tables on disk (PrepareOptions::staged_row_slots): the graph
  // input holding a table's staged rows, and its view's index in row_caches(). Kernels find them
  // by where an executor keeps that input (each its own), so row_caches().index_of has none.
  const std::vector<std::pair<size_t, int>>& staged_slot_views() const { return staged_slot_views_; }
  // The cache of view `index` of row_caches() (not one of staged_slot_views()).
  const CudaRowCache& row_cache(int index) const { return *cache_of_view_[static_cast<size_t>(index)]; }
  std::map<int, TableCache*> table_caches() const override;
  // The kernels' counters (backend.h's KernelCounters), zeroed at load, in device memory.
  void* kernel_counters() const override { return counter_count_ > 0 ? counters_.get() : nullptr; }
  std::vector<int64_t> ReadCounters() const override;
  // The grace period of the runs that may read the caches: executors enter it for each run while
  // the model has caches (CudaRowCache::Apply waits for it).
  GracePeriod* cache_readers() { return caches_.empty() ? nullptr : &cache_readers_; }

 private:
  Status UploadBf16Weights(const Graph& graph);
  Status MapHostTable(const Tensor& table);
  Status MakeCaches(const Graph& graph, const PrepareOptions& options);

  int device_ = 0;
  Precision precision_ = Precision::kFp32;
  DeviceBuffer arena_, bf16_arena_, counters_;
  // Large constants' copies, each shared with the models holding the same host storage.
  std::vector<std::shared_ptr<const DeviceBuffer>> shared_copies_;
  int counter_count_ = 0;
  std::unordered_map<const Tensor*, void*> copies_;
  std::vector<const void*> host_tables_;  // tables read in host memory (shared_tables.h), each mapped once here
  std::unordered_set<const void*> host_table_views_;                  // their addresses as kernels read them
  std::vector<std::pair<const void*, std::vector<int>>> gpu_tables_;  // tables on named GPUs (shared_tables.h)
  std::unordered_map<const void*, const void*> bf16_weights_, bf16_weights_nk_, bf16_weights_padded_;
  GracePeriod cache_readers_;
  std::map<int, std::shared_ptr<CudaRowCache>> caches_;  // by the table's value id; shared_row_caches.h
  RowCaches row_caches_;
  std::vector<const CudaRowCache*> cache_of_view_;  // row_caches_.views' caches, in their order (null: on disk)
  std::vector<std::pair<size_t, int>> staged_slot_views_;
  DeviceBuffer cache_views_;  // row_caches_.views on the device
};

}  // namespace rankd::cuda

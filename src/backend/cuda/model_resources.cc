#include "backend/cuda/model_resources.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "backend/cuda/device.h"
#include "backend/cuda/shared_device_copies.h"
#include "backend/cuda/shared_row_caches.h"
#include "backend/cuda/shared_tables.h"
#include "backend/cuda/small_rows_gemm.h"
#include "model/mapped_file.h"

namespace rankd::cuda {
namespace {

constexpr size_t kAlign = 256;

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// A bf16 copy of a product's weight that a bf16 precision reads (CudaModelResources).
struct Copy {
  const Tensor* w;
  enum Kind { kAsIs, kTransposed, kPaddedK } kind;
  bool k_by_n;  // kPaddedK: the matrix is [K, N] (else [N, K])
};

int64_t Elements(const Copy& c) {
  if (c.kind != Copy::kPaddedK) return c.w->size();
  return c.k_by_n ? PaddedK(c.w->dim(0)) * c.w->dim(1) : c.w->dim(0) * PaddedK(c.w->dim(1));
}

// The B operand and the bias of every Gemm and MatMul that are fp32 constants, rounded once at
// load rather than at every product (a product writing bf16 takes its bias's bf16 copy: gemm.h).
// A matrix B read as [K, N] also gets a transposed copy, which products of a few rows read, and
// one whose k is not a multiple of 8 a copy with k padded by zeros, which cuBLASLt reads.
std::vector<Copy> PlanBf16Copies(const Graph& graph) {
  std::vector<Copy> copies;
  std::vector<const Tensor*> unpadded;  // read as [K, N] by one product and [N, K] by another
  auto add = [&](const Tensor* w, Copy::Kind kind, bool k_by_n) {
    for (const Copy& c : copies) {
      if (c.w != w || c.kind != kind) continue;
      if (kind == Copy::kPaddedK && c.k_by_n != k_by_n) unpadded.push_back(w);
      return;
    }
    copies.push_back({w, kind, k_by_n});
  };
  for (const Node& n : graph.nodes) {
    if (n.op != "Gemm" && n.op != "MatMul") continue;
    for (int i : {1, 2}) {
      if (!n.HasInput(i) || !graph.IsConstant(n.inputs[static_cast<size_t>(i)])) continue;
      const Tensor* w = &graph.constants.at(n.inputs[static_cast<size_t>(i)]);
      if (w->dtype() != DType::kF32 || w->size() == 0) continue;
      if (i == 2 && (w->rank() == 0 || w->size() != w->dim(w->rank() - 1))) continue;  // a C broadcast whole
      add(w, Copy::kAsIs, false);
      if (i != 1 || w->rank() != 2) continue;
      const bool k_by_n = n.op == "MatMul" || n.GetInt("transB", 0) == 0;
      if (k_by_n && w->size() <= kSmallRowsMaxTransposed) add(w, Copy::kTransposed, true);
      const int64_t k = k_by_n ? w->dim(0) : w->dim(1);
      if (k != PaddedK(k)) add(w, Copy::kPaddedK, k_by_n);
    }
  }
  std::erase_if(copies, [&](const Copy& c) {
    return c.kind == Copy::kPaddedK && std::find(unpadded.begin(), unpadded.end(), c.w) != unpadded.end();
  });
  return copies;
}

size_t Bf16CopiesBytes(const std::vector<Copy>& copies) {
  size_t total = 0;
  for (const Copy& c : copies) total += Aligned(static_cast<size_t>(Elements(c)) * 2);
  return total;
}

// Whether constant `id` is copied to the model's own GPU: all but the tables placed in host memory
// or on a named GPU.
bool Resident(const TablePlacement& tables, int id) { return !tables.OnHost(id) && !tables.Gpus(id); }

// Whether constant `t` has a device copy of its own that later models holding the same host storage
// share (shared_device_copies.h), outside the model's allocation.
bool SharesDeviceCopy(const Graph& graph, const Tensor& t) {
  return t.bytes() >= kSharedDeviceCopyBytes && graph.StorageOwner(t) != nullptr;
}

// The constants in the model's own allocation on the device.
size_t ConstantsBytes(const Graph& graph, const TablePlacement& tables) {
  size_t total = 0;
  for (const auto& [id, t] : graph.constants) {
    if (Resident(tables, id) && !SharesDeviceCopy(graph, t)) total += Aligned(t.bytes());
  }
  return total;
}

// The constants with copies of their own that no model on `device` holds yet.
size_t UnsharedCopiesBytes(const Graph& graph, const TablePlacement& tables, int device) {
  size_t total = 0;
  for (const auto& [id, t] : graph.constants) {
    if (!Resident(tables, id) || !SharesDeviceCopy(graph, t)) continue;
    if (!FindDeviceCopy(device, t.raw(), t.bytes(), graph.StorageOwner(t))) total += Aligned(t.bytes());
  }
  return total;
}

// Where the cache of table `t` of `rows` cached rows is found if another version of the model made it.
RowCacheKey CacheKey(const PrepareOptions& options, int device, const Tensor& t, int64_t rows) {
  return {options.cache_group, device, t.raw(), t.bytes(), std::min(rows, t.dim(0))};
}

// The device caches of the cached tables that no version of the model on `device` holds yet:
// their indexes and slots.
size_t CachesBytes(const Graph& graph, const PrepareOptions& options, int device) {
  size_t total = 0;
  for (const auto& [id, rows] : options.tables.cached) {
    auto it = graph.constants.find(id);
    if (it == graph.constants.end() || it->second.rank() != 2 || it->second.dim(0) == 0) continue;
    const Tensor& t = it->second;
    if (FindRowCache(CacheKey(options, device, t, rows), graph.StorageOwner(t))) continue;
    total += CudaRowCache::DeviceBytes(t.dim(0), static_cast<int64_t>(t.bytes()) / t.dim(0), rows);
  }
  return total;
}

}  // namespace

size_t CudaModelResources::DeviceBytes(const Graph& graph, const PrepareOptions& options, int device) {
  return ConstantsBytes(graph, options.tables) + UnsharedCopiesBytes(graph, options.tables, device) +
         CachesBytes(graph, options, device) +
         (Bf16Products(options.precision) ? Bf16CopiesBytes(PlanBf16Copies(graph)) : 0);
}

StatusOr<std::shared_ptr<CudaModelResources>> CudaModelResources::Upload(const Graph& graph, int device,
                                                                         const PrepareOptions& options) {
  auto r = std::make_shared<CudaModelResources>();
  r->device_ = device;
  r->precision_ = options.precision;
  RANKD_CUDA_RETURN(cudaSetDevice(device));
  RANKD_RETURN_IF_ERROR(r->arena_.Reserve(ConstantsBytes(graph, options.tables)));
  auto* base = static_cast<uint8_t*>(r->arena_.get());
  size_t pos = 0;
  // Large constants: the copy a model holding the same host storage made, or a new one, allocated
  // here (an allocation takes its device's gate), filled below and offered once filled.
  std::unordered_map<const Tensor*, std::shared_ptr<DeviceBuffer>> fresh;
  for (const auto& [id, t] : graph.constants) {
    if (!Resident(options.tables, id) || !SharesDeviceCopy(graph, t)) continue;
    if (auto found = FindDeviceCopy(device, t.raw(), t.bytes(), graph.StorageOwner(t))) {
      r->copies_[&t] = found->get();
      r->shared_copies_.push_back(std::move(found));
      continue;
    }
    auto& copy = fresh[&t] = std::make_shared<DeviceBuffer>();
    RANKD_RETURN_IF_ERROR(copy->Reserve(t.bytes()));
  }
  {
    AllCaptureGates gates;  // synchronous copies, page-locking (every device's)
    for (const auto& [id, t] : graph.constants) {
      if (r->copies_.count(&t)) continue;  // another model's copy
      if (auto it = fresh.find(&t); it != fresh.end()) {
        RANKD_CUDA_RETURN(cudaMemcpy(it->second->get(), t.raw(), t.bytes(), cudaMemcpyHostToDevice));
        r->copies_[&t] = it->second->get();
        continue;
      }
      if (options.tables.OnHost(id) && t.bytes() > 0) {
        RANKD_RETURN_IF_ERROR(r->MapHostTable(t));
        continue;
      }
      if (const std::vector<int>* gpus = options.tables.Gpus(id); gpus && t.bytes() > 0) {
        RANKD_ASSIGN_OR_RETURN(r->copies_[&t], cuda::MapGpuTable(t.raw(), t.bytes(), *gpus, device));
        r->gpu_tables_.emplace_back(t.raw(), *gpus);
        continue;
      }
      if (t.bytes() > 0) RANKD_CUDA_RETURN(cudaMemcpy(base + pos, t.raw(), t.bytes(), cudaMemcpyHostToDevice));
      r->copies_[&t] = base + pos;
      pos += Aligned(t.bytes());
    }
  }
  for (auto& [t, copy] : fresh) {
    OfferDeviceCopy(device, t->raw(), t->bytes(), graph.StorageOwner(*t), copy);
    r->shared_copies_.push_back(std::move(copy));
  }
  RANKD_RETURN_IF_ERROR(r->MakeCaches(graph, options));
  r->counter_count_ = KernelCounters(graph);
  if (r->counter_count_ > 0) {
    const size_t bytes = static_cast<size_t>(r->counter_count_) * sizeof(unsigned long long);
    RANKD_RETURN_IF_ERROR(r->counters_.Reserve(bytes));
    RANKD_CUDA_RETURN(cudaMemset(r->counters_.get(), 0, bytes));
  }
  if (Bf16Products(options.precision)) RANKD_RETURN_IF_ERROR(r->UploadBf16Weights(graph));
  return r;
}

std::vector<int64_t> CudaModelResources::ReadCounters() const {
  std::vector<unsigned long long> values(static_cast<size_t>(counter_count_));
  std::unique_lock gate(CaptureGate(device_));  // a synchronous copy (device_buffer.h)
  if (values.empty() || cudaSetDevice(device_) != cudaSuccess ||
      cudaMemcpy(values.data(), counters_.get(), values.size() * sizeof(values[0]), cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
    return std::vector<int64_t>(values.size(), -1);  // unreadable (a failed device): -1, as metrics show it
  }
  return std::vector<int64_t>(values.begin(), values.end());
}

Status CudaModelResources::MakeCaches(const Graph& graph, const PrepareOptions& options) {
  for (const auto& [id, rows] : options.tables.cached) {
    auto it = graph.constants.find(id);
    if (it == graph.constants.end())
      return InvalidArgument("a cache for value " + std::to_string(id) + ", no constant");
    const Tensor& t = it->second;
    if (t.rank() != 2 || t.dim(0) == 0 || t.bytes() == 0)
      return InvalidArgument("a cache for a table of shape " + ShapeToString(t.shape()) + ": tables are [rows, width]");
    const void* at = copies_.at(&t);
    const RowCacheKey key = CacheKey(options, device_, t, rows);
    std::shared_ptr<CudaRowCache> cache = FindRowCache(key, graph.StorageOwner(t));
    if (!cache) {
      const void* host_at = MappedHostBytes(t.raw());
      RANKD_ASSIGN_OR_RETURN(cache, CudaRowCache::Create(device_, at, host_at ? host_at : t.raw(), t.dim(0),
                                                         static_cast<int64_t>(t.bytes()) / t.dim(0), key.capacity));
      OfferRowCache(key, graph.StorageOwner(t), cache);
    }
    cache->AddReaders(&cache_readers_);
    caches_[id] = cache;
    row_caches_.index_of[at] = static_cast<int>(row_caches_.views.size());
    row_caches_.views.push_back(caches_[id]->view());
    cache_of_view_.push_back(caches_[id].get());
  }
  for (const auto& [input, slots] : options.staged_row_slots) {
    staged_slot_views_.emplace_back(input, static_cast<int>(row_caches_.views.size()));
    row_caches_.views.push_back(RowCacheView{nullptr, nullptr, slots});
    cache_of_view_.push_back(nullptr);
  }
  if (row_caches_.views.empty()) return Status::Ok();
  const size_t bytes = row_caches_.views.size() * sizeof(RowCacheView);
  RANKD_RETURN_IF_ERROR(cache_views_.Reserve(bytes));
  {
    std::lock_guard<std::shared_mutex> gate(CaptureGate(device_));  // a synchronous copy
    RANKD_CUDA_RETURN(cudaMemcpy(cache_views_.get(), row_caches_.views.data(), bytes, cudaMemcpyHostToDevice));
  }
  row_caches_.device_views = static_cast<const RowCacheView*>(cache_views_.get());
  return Status::Ok();
}

std::map<int, TableCache*> CudaModelResources::table_caches() const {
  std::map<int, TableCache*> out;
  for (const auto& [id, cache] : caches_) out[id] = cache.get();
  return out;
}

// A table in host memory is read by the GPU in place (host_tables.h: mapped once for the process,
// shared with the model's other replicas). Called with every capture gate held.
Status CudaModelResources::MapHostTable(const Tensor& table) {
  const bool copy = MappedFile::Overlaps(table.raw(), table.bytes());
  RANKD_ASSIGN_OR_RETURN(void* device_at, cuda::MapHostTable(table.raw(), table.bytes(), copy));
  host_tables_.push_back(table.raw());
  host_table_views_.insert(device_at);
  copies_[&table] = device_at;
  return Status::Ok();
}

CudaModelResources::~CudaModelResources() {
  // A cache another version still reads stops waiting for this one's runs (there are none left).
  for (const auto& [id, cache] : caches_) cache->RemoveReaders(&cache_readers_);
  caches_.clear();  // before the host tables they read are unmapped
  if (host_tables_.empty() && gpu_tables_.empty()) return;
  AllCaptureGates gates;  // unpinning and freeing may synchronise every device
  for (const void* at : host_tables_) cuda::UnmapHostTable(at);
  for (const auto& [at, gpu] : gpu_tables_) cuda::UnmapGpuTable(at, gpu);
}

Status CudaModelResources::UploadBf16Weights(const Graph& graph) {
  std::vector<Copy> copies = PlanBf16Copies(graph);
  size_t total = Bf16CopiesBytes(copies);
  if (total == 0) return Status::Ok();
  RANKD_RETURN_IF_ERROR(bf16_arena_.Reserve(total));
  auto* base = static_cast<uint8_t*>(bf16_arena_.get());
  size_t pos = 0;
  std::vector<uint16_t> rounded;
  std::lock_guard<std::shared_mutex> gate(CaptureGate(device_));  // synchronous copies
  for (const Copy& c : copies) {
    rounded.assign(static_cast<size_t>(Elements(c)), 0);  // 0 is bf16's +0: the padding
    const float* v = c.w->data<float>();
    const int64_t rows = c.w->rank() == 2 ? c.w->dim(0) : 1, cols = c.w->size() / rows;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < cols; ++col) {
        size_t to = static_cast<size_t>(r * cols + col);                            // as is; [Kp, N] keeps it
        if (c.kind == Copy::kTransposed) to = static_cast<size_t>(col * rows + r);  // [K, N] as [N, K]
        if (c.kind == Copy::kPaddedK && !c.k_by_n) to = static_cast<size_t>(r * PaddedK(cols) + col);  // [N, Kp]
        rounded[to] = FloatToBF16(v[r * cols + col]);
      }
    }
    RANKD_CUDA_RETURN(cudaMemcpy(base + pos, rounded.data(), rounded.size() * 2, cudaMemcpyHostToDevice));
    auto& into = c.kind == Copy::kAsIs         ? bf16_weights_
                 : c.kind == Copy::kTransposed ? bf16_weights_nk_
                                               : bf16_weights_padded_;
    into[copies_.at(c.w)] = base + pos;
    pos += Aligned(rounded.size() * 2);
  }
  return Status::Ok();
}

void* CudaModelResources::Find(const Tensor* constant) const {
  auto it = copies_.find(constant);
  return it == copies_.end() ? nullptr : it->second;
}

}  // namespace rankd::cuda

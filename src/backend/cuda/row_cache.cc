#include "backend/cuda/row_cache.h"

#include <algorithm>
#include <mutex>
#include <string>

namespace rankd::cuda {
namespace {

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

size_t CudaRowCache::DeviceBytes(int64_t rows, int64_t row_bytes, int64_t capacity) {
  return Aligned(static_cast<size_t>(rows) * sizeof(int32_t)) + Aligned(static_cast<size_t>(capacity * row_bytes));
}

StatusOr<std::unique_ptr<CudaRowCache>> CudaRowCache::Create(int device, const void* table, const void* host_table,
                                                             int64_t rows, int64_t row_bytes, int64_t capacity) {
  if (capacity < 1 || capacity > rows || capacity > INT32_MAX || row_bytes <= 0)
    return InvalidArgument("a table cache of " + std::to_string(capacity) + " rows for a table of " +
                           std::to_string(rows));
  std::unique_ptr<CudaRowCache> c(new CudaRowCache());
  c->device_ = device;
  c->table_ = table;
  c->host_table_ = static_cast<const uint8_t*>(host_table);
  c->cached_rows_ = std::make_unique<RowBits>(rows);
  c->rows_ = rows;
  c->row_bytes_ = row_bytes;
  c->capacity_ = capacity;
  c->row_of_slot_.assign(static_cast<size_t>(capacity), -1);
  RANKD_CUDA_RETURN(cudaSetDevice(device));
  RANKD_RETURN_IF_ERROR(c->index_.Reserve(static_cast<size_t>(rows) * sizeof(int32_t)));
  RANKD_RETURN_IF_ERROR(c->slots_.Reserve(static_cast<size_t>(capacity * row_bytes)));
  RANKD_RETURN_IF_ERROR(c->staged_.Reserve(static_cast<size_t>(2 * kStagedFills) * sizeof(int64_t)));
  RANKD_CUDA_RETURN(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  RANKD_CUDA_RETURN(cudaMemsetAsync(c->index_.get(), 0xff, static_cast<size_t>(rows) * sizeof(int32_t), c->stream_));
  RANKD_CUDA_RETURN(cudaStreamSynchronize(c->stream_));  // every row unmapped (-1) before any lookup
  return c;
}

TableCache::Gathered CudaRowCache::gathered() const {
  Gathered g{gathered_staged_.load(std::memory_order_relaxed), gathered_unstaged_.load(std::memory_order_relaxed), {}};
  MutexLock lock(gather_mu_);
  g.seconds = gather_seconds_;
  return g;
}

void CudaRowCache::RecordGatherTime(double seconds) const {
  MutexLock lock(gather_mu_);
  gather_seconds_.Add(seconds);
}

CudaRowCache::~CudaRowCache() {
  if (!stream_) return;
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

RowCacheView CudaRowCache::view() const {
  return RowCacheView{static_cast<const int32_t*>(index_.get()), slots_.get()};
}

uint64_t CudaRowCache::Claim() {
  MutexLock lock(apply_mu_);
  return claims_.Claim();
}

void CudaRowCache::Release(uint64_t claim) {
  MutexLock lock(apply_mu_);
  claims_.Release(claim);
}

bool CudaRowCache::Claimed(uint64_t claim) const {
  MutexLock lock(apply_mu_);
  return claims_.Decides(claim);
}

void CudaRowCache::AddReaders(GracePeriod* readers) {
  MutexLock lock(apply_mu_);
  readers_.push_back(readers);
}

void CudaRowCache::RemoveReaders(GracePeriod* readers) {
  MutexLock lock(apply_mu_);
  std::erase(readers_, readers);
}

Status CudaRowCache::Apply(std::span<const Fill> fills, uint64_t claim) {
  MutexLock lock(apply_mu_);
  if (!claims_.Decides(claim)) return Status::Ok();  // a newer keeper decides
  for (const Fill& f : fills) {
    if (f.slot < 0 || f.slot >= capacity_ || f.row < 0 || f.row >= rows_)
      return InvalidArgument("a fill of row " + std::to_string(f.row) + " into slot " + std::to_string(f.slot) +
                             " of a cache of " + std::to_string(capacity_) + " rows over " + std::to_string(rows_));
  }
  const std::vector<Fill> last = LastFills(fills, row_of_slot_);
  for (size_t begin = 0; begin < last.size(); begin += kStagedFills) {
    const size_t n = std::min(last.size() - begin, static_cast<size_t>(kStagedFills));
    RANKD_RETURN_IF_ERROR(ApplyDistinct(std::span<const Fill>(last).subspan(begin, n)));
  }
  return Status::Ok();
}

Status CudaRowCache::ApplyDistinct(std::span<const Fill> fills) {
  if (fills.empty()) return Status::Ok();
  RANKD_CUDA_RETURN(cudaSetDevice(device_));
  auto* rows = static_cast<int64_t*>(staged_.get());
  int64_t* slots = rows + kStagedFills;
  const auto* device_rows = static_cast<const int64_t*>(staged_.device());
  const int64_t* device_slots = device_rows + kStagedFills;
  auto* index = static_cast<int32_t*>(index_.get());
  // 1 and 2: the leaving rows unmapped, then every run that may still read them waited for.
  int64_t leaving = 0;
  for (const Fill& f : fills) {
    const int64_t old = row_of_slot_[static_cast<size_t>(f.slot)];
    if (old >= 0) rows[leaving++] = old;
  }
  if (leaving > 0) {
    for (int64_t i = 0; i < leaving; ++i) cached_rows_->Set(rows[i], false);
    RANKD_RETURN_IF_ERROR(LaunchUnmapRows(stream_, index, device_rows, leaving));
    RANKD_CUDA_RETURN(cudaStreamSynchronize(stream_));
    for (GracePeriod* readers : readers_) readers->WaitForEarlierReaders();
    for (const Fill& f : fills) row_of_slot_[static_cast<size_t>(f.slot)] = -1;
  }
  // 3: the new rows copied into their slots, then mapped.
  const auto n = static_cast<int64_t>(fills.size());
  for (int64_t i = 0; i < n; ++i)
    rows[i] = fills[static_cast<size_t>(i)].row, slots[i] = fills[static_cast<size_t>(i)].slot;
  RANKD_RETURN_IF_ERROR(LaunchCopyRows(stream_, table_, row_bytes_, slots_.get(), device_rows, device_slots, n));
  RANKD_RETURN_IF_ERROR(LaunchMapRows(stream_, index, device_rows, device_slots, n));
  RANKD_CUDA_RETURN(cudaStreamSynchronize(stream_));  // the staged lists are free again
  for (const Fill& f : fills) {
    row_of_slot_[static_cast<size_t>(f.slot)] = f.row;
    cached_rows_->Set(f.row, true);
  }
  return Status::Ok();
}

}  // namespace rankd::cuda

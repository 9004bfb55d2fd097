#include "rankd/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "common/host_allocator.h"
#include "rankd/status.h"

namespace rankd {
namespace {

std::atomic<HostAllocator*> host_allocator{nullptr};
std::atomic<uint64_t> request_tensors_on_heap{0};
thread_local bool request_tensors = false;

// A tensor's storage and its shared_ptr's control block in one allocation: the control block lives
// in the block's last kControlBytes, placed there by this allocator, and the block goes back (to
// `pool`, else to the heap) when the control block is released, after the last owner and observer.
// The deleter does nothing. Two allocations a tensor were a served request's most frequent after
// the shapes (docs/log/benchmarks.md, "A tensor's owner in its block; where served W1's CPU goes by
// thread; scores in binary").
constexpr size_t kControlBytes = 64;

template <typename T>
struct InBlockAllocator {
  using value_type = T;
  void* base;
  HostAllocator* pool;  // nullptr: std::free
  size_t bytes;         // the whole block's, control bytes included

  InBlockAllocator(void* b, HostAllocator* p, size_t n) : base(b), pool(p), bytes(n) {}
  template <typename U>
  InBlockAllocator(const InBlockAllocator<U>& o) : base(o.base), pool(o.pool), bytes(o.bytes) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    static_assert(alignof(T) <= 64 && sizeof(T) <= kControlBytes, "the control block must fit its line");
    RANKD_CHECK(n == 1);
    return static_cast<T*>(static_cast<void*>(static_cast<char*>(base) + bytes - kControlBytes));
  }
  void deallocate(T*, size_t) noexcept {
    if (pool)
      pool->Free(base, bytes);
    else
      std::free(base);
  }
  template <typename U>
  bool operator==(const InBlockAllocator<U>& o) const {
    return base == o.base;
  }
};

struct KeepBlock {
  void operator()(void*) const noexcept {}  // the block goes with the control block (InBlockAllocator)
};

std::shared_ptr<void> ShareBlock(void* base, HostAllocator* pool, size_t bytes) {
  return std::shared_ptr<void>(base, KeepBlock{}, InBlockAllocator<char>(base, pool, bytes));
}

}  // namespace

RequestTensorScope::RequestTensorScope() : was_(request_tensors) { request_tensors = true; }

RequestTensorScope::~RequestTensorScope() { request_tensors = was_; }

void SetHostAllocator(HostAllocator* allocator) { host_allocator.store(allocator); }

HostAllocator* CurrentHostAllocator() { return host_allocator.load(); }

uint64_t RequestTensorsOnHeap() { return request_tensors_on_heap.load(std::memory_order_relaxed); }

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::Empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // 64-byte alignment for vector loads; at least one byte so data() is never null; a line of slack
  // past the data (Zeros clears it too), then a line for the owner's control block (ShareBlock).
  const size_t padded = (t.bytes() + 63) / 64 * 64 + 64, block = padded + kControlBytes;
  HostAllocator* allocator = request_tensors ? host_allocator.load() : nullptr;
  if (allocator) {
    if (void* p = allocator->Allocate(block)) {
      t.owner_ = ShareBlock(p, allocator, block);
      t.data_ = p;
      t.location_ = allocator->location();
      return t;
    }
    request_tensors_on_heap.fetch_add(1, std::memory_order_relaxed);
  }
  void* p = std::aligned_alloc(64, block);
  RANKD_CHECK_MSG(p != nullptr, "out of host memory");
  t.owner_ = ShareBlock(p, nullptr, block);
  t.data_ = p;
  return t;
}

Tensor Tensor::Zeros(DType dtype, Shape shape) {
  Tensor t = Empty(dtype, std::move(shape));
  std::memset(t.raw(), 0, (t.bytes() + 63) / 64 * 64 + 64);
  return t;
}

Tensor Tensor::View(DType dtype, Shape shape, void* data, MemoryLocation location) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.location_ = location;
  return t;
}

Tensor Tensor::View(DType dtype, Shape shape, void* data, MemoryLocation location, std::shared_ptr<const void> keep) {
  RANKD_CHECK(keep != nullptr);
  Tensor t = View(dtype, std::move(shape), data, location);
  t.owner_ = std::shared_ptr<void>(std::const_pointer_cast<void>(std::move(keep)), data);  // shares `keep`'s count
  return t;
}

std::string LocationToString(const MemoryLocation& location) {
  switch (location.kind) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kPinned:
      return "pinned";
    case MemoryKind::kSharedMemory:
      return "shared memory";
    case MemoryKind::kDevice:
      return "GPU " + std::to_string(location.device);
  }
  return "unknown";
}

Tensor Tensor::Rows(int64_t begin, int64_t count) const {
  RANKD_CHECK(rank() >= 1 && begin >= 0 && count >= 0 && begin + count <= dim(0));
  Tensor t = *this;
  t.shape_[0] = count;
  const size_t row_bytes = dim(0) == 0 ? 0 : bytes() / static_cast<size_t>(dim(0));
  t.data_ = static_cast<uint8_t*>(data_) + static_cast<size_t>(begin) * row_bytes;
  return t;
}

Tensor Tensor::ViewBytes(DType dtype, Shape shape, size_t byte_offset) const {
  Tensor t = View(dtype, std::move(shape), static_cast<uint8_t*>(data_) + byte_offset, location_);
  RANKD_CHECK(byte_offset + t.bytes() <= bytes());
  return t;
}

Tensor Tensor::Clone() const {
  RANKD_CHECK_MSG(location_.host_accessible(), "Clone of a tensor in device memory");
  Tensor t = Zeros(dtype_, shape_);
  if (bytes()) std::memcpy(t.data_, data_, bytes());
  return t;
}

double Tensor::ScalarAsDouble(int64_t i) const {
  switch (dtype_) {
    case DType::kF32:
      return data<float>()[i];
    case DType::kF64:
      return data<double>()[i];
    case DType::kF16:
      return HalfToFloat(data<uint16_t>()[i]);
    case DType::kBF16:
      return BF16ToFloat(data<uint16_t>()[i]);
    case DType::kI8:
      return data<int8_t>()[i];
    case DType::kU8:
    case DType::kBool:
      return data<uint8_t>()[i];
    case DType::kI32:
      return data<int32_t>()[i];
    case DType::kI64:
      return static_cast<double>(data<int64_t>()[i]);
    case DType::kInvalid:
      break;
  }
  RANKD_CHECK_MSG(false, "ScalarAsDouble on an invalid tensor");
  return 0;
}

int64_t Tensor::ScalarAsInt(int64_t i) const {
  if (dtype_ == DType::kI64) return data<int64_t>()[i];
  return static_cast<int64_t>(ScalarAsDouble(i));
}

}  // namespace rankd

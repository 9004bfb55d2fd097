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
  // 64-byte alignment for vector loads; at least one byte so data() is never null.
  size_t padded = (t.bytes() + 63) / 64 * 64 + 64;
  HostAllocator* allocator = request_tensors ? host_allocator.load() : nullptr;
  if (allocator) {
    if (void* p = allocator->Allocate(padded)) {
      t.owner_ = std::shared_ptr<void>(p, [allocator, padded](void* q) { allocator->Free(q, padded); });
      t.data_ = p;
      t.location_ = allocator->location();
      return t;
    }
    request_tensors_on_heap.fetch_add(1, std::memory_order_relaxed);
  }
  void* p = std::aligned_alloc(64, padded);
  RANKD_CHECK_MSG(p != nullptr, "out of host memory");
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
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

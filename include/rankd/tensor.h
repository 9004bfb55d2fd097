// Tensor: a dtype, a shape and a pointer to dense row-major data, and where that data lies.
//
// A Tensor either owns its buffer (shared, reference counted; copies share it) or views memory it
// does not own (Tensor::View), such as a slot of an executor's workspace. Its location says which
// memory the pointer is in (pageable host memory, page-locked host memory a GPU reads in place, a
// client's shared memory, or a GPU's memory, which the host must not dereference). Not thread-safe
// to mutate; concurrent reads are fine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rankd/dtype.h"
#include "rankd/shape.h"
#include "rankd/status.h"

namespace rankd {

// The kinds of memory a tensor's data can lie in.
enum class MemoryKind : uint8_t {
  kHost,          // pageable host memory: the heap, a mapped file, any memory not listed below
  kPinned,        // page-locked host memory a GPU reads and writes in place, at the same address
  kSharedMemory,  // a client's registered system shared memory (pageable host memory)
  kDevice,        // the memory of GPU `device`: not for the host to read or write
};

struct MemoryLocation {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the GPU's index for kDevice, else -1

  static MemoryLocation Host() { return {}; }
  static MemoryLocation Pinned() { return {MemoryKind::kPinned, -1}; }
  static MemoryLocation SharedMemory() { return {MemoryKind::kSharedMemory, -1}; }
  static MemoryLocation Device(int device) { return {MemoryKind::kDevice, device}; }
  // Whether the host may read and write the data through the pointer.
  bool host_accessible() const { return kind != MemoryKind::kDevice; }
  bool operator==(const MemoryLocation&) const = default;
};
// "host", "pinned", "shared memory", "GPU 1".
std::string LocationToString(const MemoryLocation& location);

// Inline: element loops often bound themselves by a tensor's size().
inline int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
std::string ShapeToString(const Shape& shape);  // "[2, 3]"

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled host storage for the shape (pinned where the process's allocator for
  // request tensors served it, else on the heap: location() says which).
  static Tensor Zeros(DType dtype, Shape shape);
  // Allocates host storage for the shape, left uninitialised (for outputs written in full).
  static Tensor Empty(DType dtype, Shape shape);
  // Views `data`, which lies in `location` and must outlive every use of the Tensor.
  static Tensor View(DType dtype, Shape shape, void* data, MemoryLocation location = MemoryLocation::Host());
  // Views `data`, which lies in `location` and stays valid while `keep` lives: the tensor (and
  // every copy and part of it) keeps `keep` alive, as an owning tensor keeps its buffer.
  // REQUIRES: keep is not null.
  static Tensor View(DType dtype, Shape shape, void* data, MemoryLocation location, std::shared_ptr<const void> keep);
  template <typename T>
  static Tensor FromVector(DType dtype, Shape shape, const std::vector<T>& values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return NumElements(shape_); }
  size_t bytes() const { return static_cast<size_t>(size()) * DTypeSize(dtype_); }
  bool defined() const { return dtype_ != DType::kInvalid; }
  const MemoryLocation& location() const { return location_; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }

  // Re-points a view at new memory of the same size (an executor's views of inputs bound per run);
  // the location stays the view's.
  void set_data(void* data) { data_ = data; }
  // A deep copy that owns host storage. REQUIRES: location().host_accessible().
  Tensor Clone() const;
  // Rows [begin, begin + count) of the first dimension, not copied: the part of an owning tensor
  // shares (and keeps alive) the whole buffer, the part of a view is a view; either lies where the
  // tensor does. Not 64-byte aligned in general. REQUIRES: rank >= 1 and the rows within dim(0).
  Tensor Rows(int64_t begin, int64_t count) const;
  // This tensor's bytes from `byte_offset` on, viewed as `dtype` and `shape`, lying where this
  // tensor does. The view does not keep them alive: their storage must outlive every use of it.
  // REQUIRES: the view's bytes within this tensor's.
  Tensor ViewBytes(DType dtype, Shape shape, size_t byte_offset = 0) const;
  // Whether the tensor owns (a share of) its storage or keeps alive what it views, rather than
  // viewing memory whose lifetime is the caller's to ensure.
  bool owns() const { return owner_ != nullptr; }
  // What keeps the storage alive (null for a view whose lifetime is the caller's): a view made
  // with it as `keep` shares the storage as a copy of this tensor would, and holding it (or a
  // std::weak_ptr to it) says whether the storage lives. Safe to call from any thread.
  std::shared_ptr<const void> keeper() const { return owner_; }
  // Element i converted to double / int64 (for small shape tensors and tests).
  double ScalarAsDouble(int64_t i) const;
  int64_t ScalarAsInt(int64_t i) const;

 private:
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  MemoryLocation location_;
};

template <typename T>
Tensor Tensor::FromVector(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Zeros(dtype, std::move(shape));
  RANKD_CHECK(static_cast<size_t>(t.size()) == values.size() && sizeof(T) == DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

}  // namespace rankd

// Tensor: a dtype, a shape and a pointer to dense row-major data.
//
// A Tensor either owns its buffer (shared, reference counted; copies share it) or views memory it
// does not own (Tensor::View), such as a slot of an executor's workspace. Not thread-safe to mutate;
// concurrent reads are fine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rankd/dtype.h"
#include "rankd/status.h"

namespace rankd {

using Shape = std::vector<int64_t>;

// Inline: element loops often bound themselves by a tensor's size().
inline int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
std::string ShapeToString(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage for the shape.
  static Tensor Zeros(DType dtype, Shape shape);
  // Allocates storage for the shape, left uninitialised (for outputs written in full).
  static Tensor Empty(DType dtype, Shape shape);
  // Views `data`, which must outlive every use of the Tensor.
  static Tensor View(DType dtype, Shape shape, void* data);
  template <typename T>
  static Tensor FromVector(DType dtype, Shape shape, const std::vector<T>& values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return NumElements(shape_); }
  size_t bytes() const { return static_cast<size_t>(size()) * DTypeSize(dtype_); }
  bool defined() const { return dtype_ != DType::kInvalid; }

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

  // Re-points a view at new memory of the same size (used for inputs bound per run).
  void set_data(void* data) { data_ = data; }
  // A deep copy that owns its storage.
  Tensor Clone() const;
  // Rows [begin, begin + count) of the first dimension, not copied: the part of an owning tensor
  // shares (and keeps alive) the whole buffer, the part of a view is a view. Not 64-byte aligned
  // in general. REQUIRES: rank >= 1 and the rows within dim(0).
  Tensor Rows(int64_t begin, int64_t count) const;
  // Whether the tensor owns (a share of) its storage, rather than viewing memory it does not own.
  bool owns() const { return owner_ != nullptr; }
  // Element i converted to double / int64 (for small shape tensors and tests).
  double ScalarAsDouble(int64_t i) const;
  int64_t ScalarAsInt(int64_t i) const;

 private:
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
};

template <typename T>
Tensor Tensor::FromVector(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Zeros(dtype, std::move(shape));
  RANKD_CHECK(static_cast<size_t>(t.size()) == values.size() && sizeof(T) == DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

}  // namespace rankd

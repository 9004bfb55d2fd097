#include "rankd/shape.h"

#include <stdexcept>
#include <string>

namespace rankd {

int64_t& Shape::at(size_t i) {
  if (i >= size_) {
    throw std::out_of_range("dimension " + std::to_string(i) + " of a shape of rank " + std::to_string(size_));
  }
  return data_[i];
}

Shape::iterator Shape::insert(const_iterator pos, size_t n, int64_t d) {
  const size_t at = static_cast<size_t>(pos - data_);
  Open(at, n);
  std::fill(data_ + at, data_ + at + n, d);
  return data_ + at;
}

void Shape::Grow(size_t n) {
  const size_t capacity = std::max(n, 2 * capacity_);
  auto* grown = new int64_t[capacity];
  std::copy(data_, data_ + size_, grown);
  if (on_heap()) delete[] data_;
  data_ = grown;
  capacity_ = capacity;
}

}  // namespace rankd

// Shape: a tensor's dimensions, held inline up to kInlineRank of them (every shape rankd serves),
// on the heap past that. A request's tensors, their views and the metas of a run each carry one:
// as a std::vector every one of them cost an allocation and a free: 46% of a served W1 request's
// heap allocations on the CPU backend (docs/log/benchmarks.md, "A tensor's shape held inline").
//
// The subset of std::vector<int64_t>'s interface rankd uses; iterators are pointers, so a Shape is a
// contiguous range (std::span<const int64_t> views it). Built implicitly from a std::vector<int64_t>
// or a span (dimensions read from a model file or an attribute). A value, as std::vector is: it owns
// its dimensions; concurrent reads are safe, a change needs the shape to itself.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace rankd {

class Shape {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  static constexpr size_t kInlineRank = 6;

  Shape() noexcept {}  // user-provided: a const Shape may be default-initialised
  explicit Shape(size_t n, int64_t value = 0) { assign(n, value); }
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(std::span<const int64_t> dims) { assign(dims.begin(), dims.end()); }          // NOLINT: implicit by design
  Shape(const std::vector<int64_t>& dims) : Shape(std::span<const int64_t>(dims)) {}  // NOLINT
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept { Take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      Free();
      Take(other);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }
  ~Shape() { Free(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  int64_t* data() { return data_; }
  const int64_t* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  int64_t& operator[](size_t i) { return data_[i]; }
  const int64_t& operator[](size_t i) const { return data_[i]; }
  int64_t& at(size_t i);
  const int64_t& at(size_t i) const { return const_cast<Shape*>(this)->at(i); }
  int64_t& front() { return data_[0]; }
  const int64_t& front() const { return data_[0]; }
  int64_t& back() { return data_[size_ - 1]; }
  const int64_t& back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n > capacity_) Grow(n);
  }
  void clear() { size_ = 0; }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    if (n > size_) std::fill(data_ + size_, data_ + n, value);
    size_ = n;
  }
  void assign(size_t n, int64_t value) {
    clear();
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::contiguous_iterator<It> && std::is_same_v<std::iter_value_t<It>, int64_t>) {
      const auto n = static_cast<size_t>(last - first);
      reserve(n);  // a range of this shape's own is within its capacity: no growth under it
      if (n) std::memmove(data_, std::to_address(first), n * sizeof(int64_t));
      size_ = n;
      return;
    }
    if constexpr (std::forward_iterator<It>) reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  void assign(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  void push_back(int64_t d) {
    if (size_ == capacity_) Grow(capacity_ * 2);
    data_[size_++] = d;
  }
  int64_t& emplace_back(int64_t d) {
    push_back(d);
    return back();
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator pos, int64_t d) { return insert(pos, &d, &d + 1); }
  iterator insert(const_iterator pos, size_t n, int64_t d);
  iterator insert(const_iterator pos, std::initializer_list<int64_t> dims) {
    return insert(pos, dims.begin(), dims.end());
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const Shape copy(first, last);  // the range may lie in this shape
    const size_t at = static_cast<size_t>(pos - data_), n = copy.size();
    Open(at, n);
    std::copy(copy.begin(), copy.end(), data_ + at);
    return data_ + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t at = static_cast<size_t>(first - data_), n = static_cast<size_t>(last - first);
    std::memmove(data_ + at, data_ + at + n, (size_ - at - n) * sizeof(int64_t));
    size_ -= n;
    return data_ + at;
  }

  // The dimensions as a std::vector (for code that keeps one, e.g. a config's dims).
  std::vector<int64_t> ToVector() const { return std::vector<int64_t>(begin(), end()); }
  operator std::span<const int64_t>() const { return {data_, size_}; }  // NOLINT: implicit by design

  friend bool operator==(const Shape& a, const Shape& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return data_ != inline_; }
  void Free() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInlineRank;
    size_ = 0;
  }
  // Moves `other`'s dimensions here (this holds none), leaving it empty.
  void Take(Shape& other) {
    size_ = other.size_;
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInlineRank;
    } else {
      std::copy(other.inline_, other.inline_ + size_, inline_);
    }
    other.size_ = 0;
  }
  void Grow(size_t n);
  // Makes room for `n` dimensions at `at`, moving the ones after it up.
  void Open(size_t at, size_t n) {
    reserve(size_ + n);
    std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(int64_t));
    size_ += n;
  }

  int64_t* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInlineRank;
  int64_t inline_[kInlineRank];
};

}  // namespace rankd

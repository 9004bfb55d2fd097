#include "common/parsed_request.h"

#include <algorithm>

namespace rankd {

namespace {

// Sums `rows` lengths into offsets (and copies them into `copy` as INT64 where it is not null),
// in one pass.
template <typename T>
LengthSums Sum(const T* lengths, int64_t rows, int64_t* copy) {
  LengthSums sums;
  sums.offsets = Tensor::Empty(DType::kI64, {rows + 1});
  int64_t* o = sums.offsets.data<int64_t>();
  // Summed without overflow on any lengths (a request's may be anything): a sum that wraps comes
  // only with a length out of any model's range, which the model refuses first.
  uint64_t total = 0;
  int64_t least = rows > 0 ? lengths[0] : 0, most = least;
  o[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = lengths[r];
    if (copy) copy[r] = len;
    least = std::min(least, len);
    most = std::max(most, len);
    total += static_cast<uint64_t>(len);
    o[r + 1] = static_cast<int64_t>(total);
  }
  sums.min_length = least;
  sums.max_length = most;
  return sums;
}

template <typename T>
LengthSums SumCopying(std::span<const T> lengths, std::vector<int64_t>& copy) {
  copy.resize(lengths.size());
  return Sum(lengths.data(), static_cast<int64_t>(lengths.size()), copy.data());
}

}  // namespace

LengthSums SumLengths(const std::vector<int64_t>& lengths) {
  return Sum(lengths.data(), static_cast<int64_t>(lengths.size()), nullptr);
}

LengthSums SumLengths(std::span<const int32_t> lengths, std::vector<int64_t>& copy) {
  return SumCopying(lengths, copy);
}

LengthSums SumLengths(std::span<const int64_t> lengths, std::vector<int64_t>& copy) {
  return SumCopying(lengths, copy);
}

}  // namespace rankd

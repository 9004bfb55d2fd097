#include "common/parsed_request.h"

#include <algorithm>

namespace rankd {

LengthSums SumLengths(const std::vector<int64_t>& lengths) {
  const auto rows = static_cast<int64_t>(lengths.size());
  LengthSums sums;
  sums.offsets = Tensor::Empty(DType::kI64, {rows + 1});
  int64_t* o = sums.offsets.data<int64_t>();
  // Summed without overflow on any lengths (a request's may be anything): a sum that wraps comes
  // only with a length out of any model's range, which the model refuses first.
  uint64_t total = 0;
  int64_t least = rows > 0 ? lengths[0] : 0, most = least;
  o[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = lengths[static_cast<size_t>(r)];
    least = std::min(least, len);
    most = std::max(most, len);
    total += static_cast<uint64_t>(len);
    o[r + 1] = static_cast<int64_t>(total);
  }
  sums.min_length = least;
  sums.max_length = most;
  return sums;
}

}  // namespace rankd

#include "rankd/request.h"

#include <algorithm>
#include <cstdint>

namespace rankd {

void SumLengths(InferInput& in) {
  const auto rows = static_cast<int64_t>(in.lengths.size());
  in.offsets = Tensor::Empty(DType::kI64, {rows + 1});
  int64_t* o = in.offsets.data<int64_t>();
  // Summed without overflow on any lengths (a request's may be anything): a sum that wraps
  // comes only with a length out of any model's range, which the model refuses first.
  uint64_t total = 0;
  int64_t least = rows > 0 ? in.lengths[0] : 0, most = least;
  o[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = in.lengths[static_cast<size_t>(r)];
    least = std::min(least, len);
    most = std::max(most, len);
    total += static_cast<uint64_t>(len);
    o[r + 1] = static_cast<int64_t>(total);
  }
  in.min_length = least;
  in.max_length = most;
}

}  // namespace rankd

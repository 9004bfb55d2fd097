// A request as a frontend parsed it: the public InferRequest, and what the parser learnt on the way
// that spares the model a pass of its own. A parser reads every ragged input's lengths anyway, so it
// sums them while they are in cache; the model then checks three numbers and takes the offsets as
// its graph input instead of passing over the lengths again (W1 at 512 pairs: 26 x 512 lengths,
// about 10 µs of the request's time on the H200's host).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rankd/request.h"
#include "rankd/tensor.h"

namespace rankd {

// One ragged input's lengths summed: INT64 offsets [lengths + 1] (offsets[r] = lengths[0] + ... +
// lengths[r - 1]), and the least and the largest length. `offsets` is undefined for an input sent
// without lengths. The offsets are a request tensor where a RequestTensorScope is alive (pinned
// where a GPU reads them: common/host_allocator.h).
struct LengthSums {
  Tensor offsets;
  int64_t min_length = 0, max_length = 0;
};

LengthSums SumLengths(const std::vector<int64_t>& lengths);
// The same over a NAME.lengths tensor's INT32 or INT64 elements, copied into `copy` (as INT64,
// replacing what it held) in the same pass.
LengthSums SumLengths(std::span<const int32_t> lengths, std::vector<int64_t>& copy);
LengthSums SumLengths(std::span<const int64_t> lengths, std::vector<int64_t>& copy);

struct ParsedRequest {
  InferRequest request;
  // Per input of `request`, in its order (or empty): its lengths summed, as they are now.
  std::vector<LengthSums> length_sums;
};

}  // namespace rankd

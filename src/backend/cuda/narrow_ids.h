// Ids sent to the device in 32 bits. An INT64 graph input that serves only as the ids of
// embedding bags (EmbeddingBag, ConcatEmbeddingBags) over tables of at most INT32_MAX rows is
// narrowed to INT32 as it is packed into pinned memory: half the bytes packed and copied (W1 at
// 32,768 pairs sends 56 MB of ids). The bag kernels read INT32 ids as they read INT64 ones. An id
// outside INT32's range becomes INT32's max or min, which the kernels treat as they would have
// treated the original: out of range (reported), or negative (an empty slot, or counted from the
// table's end and still out of range).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rankd {
class Plan;
}

namespace rankd::cuda {

// Per graph input of `plan`: whether it is sent narrowed.
std::vector<bool> NarrowableIdInputs(const Plan& plan);

// to[i] = from[i] clamped to INT32's range, for i < n.
void NarrowIds(const int64_t* from, int32_t* to, size_t n);

}  // namespace rankd::cuda

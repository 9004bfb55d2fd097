// Ids in 32 bits. An INT64 graph input that serves only as the ids of embedding bags
// (EmbeddingBag, ConcatEmbeddingBags) over tables of at most INT32_MAX rows may be held as INT32,
// each id clamped (common/narrow_ids.h), by the CUDA executor as it packs or gathers the request's
// 64-bit ids into its input area (W1 at 32,768 pairs sends 56 MB of ids as 28). Requests, their
// parsers and the public API see INT64 only. The bag kernels of both backends read INT32 ids as
// they read INT64 ones. A clamped id is treated as the original would have been:
// out of range (reported), or negative (an empty slot, or counted from the table's end and still
// out of range).
#pragma once

#include <vector>

namespace rankd {

class Plan;

// Per graph input of `plan`: whether it may be held in 32 bits.
std::vector<bool> NarrowableIdInputs(const Plan& plan);

}  // namespace rankd

// How an embedding bag combines the rows of its ids (EmbeddingBag's `mode`, ConcatEmbeddingBags'
// `modes`): their sum, their mean, their sum over the square root of their count (TensorFlow's
// "sqrtn" combiner, SparseSegmentSqrtN), or their element-wise max (PyTorch's EmbeddingBag "max";
// EmbeddingBag only). A bag of one row is that row, and a bag of none zeros, under every combiner.
// With weights (EmbeddingBag's fourth input) the rows are weighted and the mean and sqrtn divide by
// the weights (WeightedBagScale).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "common/host_device.h"

namespace rankd {

enum BagCombiner : int { kBagSum = 0, kBagMean = 1, kBagSqrtN = 2, kBagMax = 3 };

inline std::optional<BagCombiner> BagCombinerFromName(const std::string& name) {
  if (name == "sum") return kBagSum;
  if (name == "mean") return kBagMean;
  if (name == "sqrtn") return kBagSqrtN;
  if (name == "max") return kBagMax;
  return std::nullopt;
}

inline const char* BagCombinerName(int combiner) {
  return combiner == kBagMean ? "mean" : combiner == kBagSqrtN ? "sqrtn" : combiner == kBagMax ? "max" : "sum";
}

// What the sum of `count` rows is multiplied by (1 for sum and max); the CUDA kernels call it too.
RANKD_HOST_DEVICE inline float BagScale(int combiner, int64_t count) {
  if (count <= 1) return 1.0f;
  if (combiner == kBagMean) return 1.0f / static_cast<float>(count);
  return combiner == kBagSqrtN ? 1.0f / sqrtf(static_cast<float>(count)) : 1.0f;
}

// What the weighted sum of a bag's rows is multiplied by, given its weights' sum and the sum of
// their squares: 1 for a sum, 1 / sum for a mean, 1 / sqrt(squares) for sqrtn, and 0 where that
// divisor is 0 (TensorFlow's weighted combiners divide with div_no_nan).
RANKD_HOST_DEVICE inline float WeightedBagScale(int combiner, float sum, float squares) {
  if (combiner == kBagMean) return sum != 0.0f ? 1.0f / sum : 0.0f;
  if (combiner == kBagSqrtN) return squares > 0.0f ? 1.0f / sqrtf(squares) : 0.0f;
  return 1.0f;
}

}  // namespace rankd

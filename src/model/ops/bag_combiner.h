// How an embedding bag combines the rows of its ids (EmbeddingBag's `mode`, ConcatEmbeddingBags'
// `modes`): their sum, their mean, or their sum over the square root of their count (TensorFlow's
// "sqrtn" combiner, SparseSegmentSqrtN). A bag of one row or none is its sum under every combiner.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "common/host_device.h"

namespace rankd {

enum BagCombiner : int { kBagSum = 0, kBagMean = 1, kBagSqrtN = 2 };

inline std::optional<BagCombiner> BagCombinerFromName(const std::string& name) {
  if (name == "sum") return kBagSum;
  if (name == "mean") return kBagMean;
  if (name == "sqrtn") return kBagSqrtN;
  return std::nullopt;
}

inline const char* BagCombinerName(int combiner) {
  return combiner == kBagMean ? "mean" : combiner == kBagSqrtN ? "sqrtn" : "sum";
}

// What the sum of `count` rows is multiplied by; the CUDA kernels call it too.
RANKD_HOST_DEVICE inline float BagScale(int combiner, int64_t count) {
  if (count <= 1 || combiner == kBagSum) return 1.0f;
  return combiner == kBagMean ? 1.0f / static_cast<float>(count) : 1.0f / sqrtf(static_cast<float>(count));
}

}  // namespace rankd

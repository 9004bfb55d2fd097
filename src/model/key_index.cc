#include "model/key_index.h"

#include <limits>
#include <string>

namespace rankd {

StatusOr<Tensor> BuildKeyIndex(std::span<const int64_t> keys) {
  if (keys.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() - 1)) {
    return InvalidArgument("a keyed table holds at most 2^31 - 2 keys, not " + std::to_string(keys.size()));
  }
  int64_t capacity = 2;
  while (capacity < 2 * static_cast<int64_t>(keys.size())) capacity *= 2;
  Tensor index = Tensor::Empty(DType::kI64, {capacity, 2});
  int64_t* slots = index.data<int64_t>();
  for (int64_t s = 0; s < capacity; ++s) slots[2 * s] = 0, slots[2 * s + 1] = -1;
  const uint64_t mask = static_cast<uint64_t>(capacity) - 1;
  for (size_t row = 0; row < keys.size(); ++row) {
    const int64_t key = keys[row];
    uint64_t s = MixKey(static_cast<uint64_t>(key)) & mask;
    while (slots[2 * s + 1] >= 0) {
      if (slots[2 * s] == key) {
        return InvalidArgument("key " + std::to_string(key) + " is given twice (rows " +
                               std::to_string(slots[2 * s + 1]) + " and " + std::to_string(row) + ")");
      }
      s = (s + 1) & mask;
    }
    slots[2 * s] = key;
    slots[2 * s + 1] = static_cast<int64_t>(row);
  }
  return index;
}

int64_t FindKey(const Tensor& index, int64_t key) {
  return RowOfKey(index.data<int64_t>(), static_cast<uint64_t>(index.dim(0)) - 1, key);
}

}  // namespace rankd

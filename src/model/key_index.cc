#include "model/key_index.h"

#include <limits>
#include <string>

namespace rankd {

StatusOr<KeyIndex> BuildKeyIndex(std::span<const int64_t> keys) {
  if (keys.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() - 1)) {
    return InvalidArgument("a keyed table holds at most 2^31 - 2 keys, not " + std::to_string(keys.size()));
  }
  int64_t capacity = 2;
  while (capacity < 2 * static_cast<int64_t>(keys.size())) capacity *= 2;
  KeyIndex index{Tensor::Zeros(DType::kI64, {capacity}), Tensor::Empty(DType::kI32, {capacity})};
  int64_t* slot_keys = index.keys.data<int64_t>();
  int32_t* slot_rows = index.rows.data<int32_t>();
  for (int64_t s = 0; s < capacity; ++s) slot_rows[s] = -1;
  const uint64_t mask = static_cast<uint64_t>(capacity) - 1;
  for (size_t row = 0; row < keys.size(); ++row) {
    const int64_t key = keys[row];
    uint64_t s = MixKey(static_cast<uint64_t>(key)) & mask;
    while (slot_rows[s] >= 0) {
      if (slot_keys[s] == key) {
        return InvalidArgument("key " + std::to_string(key) + " is given twice (rows " + std::to_string(slot_rows[s]) +
                               " and " + std::to_string(row) + ")");
      }
      s = (s + 1) & mask;
    }
    slot_keys[s] = key;
    slot_rows[s] = static_cast<int32_t>(row);
  }
  return index;
}

int64_t FindKey(const KeyIndex& index, int64_t key) {
  return RowOfKey(index.keys.data<int64_t>(), index.rows.data<int32_t>(), static_cast<uint64_t>(index.keys.size()) - 1,
                  key);
}

}  // namespace rankd

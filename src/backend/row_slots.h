// RowSlots: rows of a table held on a device at fixed places (slots), written by the host.
//
// The GPU cache of a table on disk (embedding/gpu_row_tier.h) keeps its rows so: kernels read slot
// s at device() + s * row_bytes while the host moves rows in and out between runs.
#pragma once

#include <cstdint>
#include <span>

#include "rankd/status.h"

namespace rankd {

class RowSlots {
 public:
  virtual ~RowSlots() = default;
  // Where kernels read slot 0; slot s lies row_bytes() * s further.
  virtual const void* device() const = 0;
  virtual int64_t slots() const = 0;
  virtual int64_t row_bytes() const = 0;
  // Writes `rows` (slots.size() rows of row_bytes() each, side by side) into `slots`, in order;
  // returns once the device holds them. Not thread-safe: one writer.
  virtual Status Write(std::span<const int64_t> slots, const uint8_t* rows) = 0;
};

}  // namespace rankd

// Device copies of constants shared by the models that hold the same host storage.
//
// A model version loaded beside the one it replaces holds its unchanged tables in the replaced
// one's host storage (compile/shared_constants.h); its device copies of them are then the same
// bytes too, so a GPU holds one copy of each, read by every model that has it and freed with the
// last: a hot swap of a model whose tables fill most of a GPU fits where two copies would not.
// A copy is found by (GPU, host address, bytes) while the host storage's owner (the external-data
// file or the tensor storage, Graph::StorageOwner) lives: an address freed and used again for
// other bytes finds nothing. Constants are read-only on the device as on the host. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>

#include "backend/cuda/device_buffer.h"

namespace rankd::cuda {

// Constants below this many bytes stay in their model's own allocation (the size below which the
// host shares none either: compile/shared_constants.h).
inline constexpr size_t kSharedDeviceCopyBytes = size_t{16} << 10;

// The copy on `device` of the `bytes` bytes at `host` that owner `owner` keeps alive, if a model
// made one and some model holds it; else null.
std::shared_ptr<const DeviceBuffer> FindDeviceCopy(int device, const void* host, size_t bytes,
                                                   const std::shared_ptr<const void>& owner);

// Offers `copy` (on `device`, already holding the `bytes` bytes at `host`) to later loads, held
// weakly.
void OfferDeviceCopy(int device, const void* host, size_t bytes, const std::shared_ptr<const void>& owner,
                     const std::shared_ptr<const DeviceBuffer>& copy);

}  // namespace rankd::cuda

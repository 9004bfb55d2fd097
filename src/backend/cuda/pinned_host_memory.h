// Host memory the process already has (a client's shared memory region), page-locked and mapped
// into every GPU's address space: the CUDA backend's Backend::PinHostMemory.
#pragma once

#include <cstddef>
#include <memory>

#include "backend/backend.h"

namespace rankd::cuda {

// Page-locks [data, data + bytes) with cudaHostRegister (portable, mapped) on `device`'s context,
// and checks that GPUs read it at `data` itself. Errors: the driver's refusal (a range already
// page-locked, memory it cannot lock), or a device address other than `data` (the range is then
// unlocked again).
StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(int device, void* data, size_t bytes);

}  // namespace rankd::cuda

// The host executor: runs plans on the CPU with its own workspace.
//
// The workspace grows to the largest plan seen and is then reused: a steady state allocates
// nothing but the returned outputs. The interface is runtime/executor.h.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "runtime/executor.h"

namespace rankd {

// An executor of the model whose per-model state (its kernels' counters) is `resources`, which may
// be null.
std::unique_ptr<Executor> NewHostExecutor(std::shared_ptr<ModelResources> resources = nullptr);

}  // namespace rankd

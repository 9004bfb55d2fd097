// The host executor: runs plans on the CPU with its own workspace.
//
// The workspace grows to the largest plan seen and is then reused: a steady state allocates
// nothing but the returned outputs. The interface (Executor) is in backend/backend.h.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace rankd {

std::unique_ptr<Executor> NewHostExecutor();

}  // namespace rankd

// The host executor: runs plans on the CPU with its own workspace.
//
// The workspace grows to the largest plan seen and is then reused: a steady state allocates
// nothing but the returned outputs. The interface is runtime/executor.h.
#pragma once

#include <memory>

#include "runtime/executor.h"

namespace rankd {

std::unique_ptr<Executor> NewHostExecutor();

}  // namespace rankd

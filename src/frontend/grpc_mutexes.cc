#include "frontend/grpc_mutexes.h"

#include <absl/synchronization/mutex.h>

namespace rankd {

void TurnOffMutexDeadlockDetection() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace rankd

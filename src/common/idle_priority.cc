#include "common/idle_priority.h"

#include <pthread.h>
#include <sched.h>

namespace rankd {

bool RunAtIdlePriority() {
#ifdef SCHED_IDLE
  sched_param param{};
  param.sched_priority = 0;
  return pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0;
#else
  return false;
#endif
}

}  // namespace rankd

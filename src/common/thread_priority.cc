#include "common/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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

bool RaiseNiceness(int steps) {
#ifdef SYS_gettid
  // On Linux a thread id given to setpriority names that thread alone (man 2 setpriority, "BUGS").
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return false;
  return setpriority(PRIO_PROCESS, tid, std::min(now + steps, 19)) == 0;
#else
  return false;
#endif
}

}  // namespace rankd

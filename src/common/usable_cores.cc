#include "common/usable_cores.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace rankd {

int UsableCores() {
  // A mask sized for many CPUs (CPU_ALLOC): hosts with more than CPU_SETSIZE (1,024) exist.
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int slots = std::max(machine, 1024);
  cpu_set_t* set = CPU_ALLOC(slots);
  if (set == nullptr) return machine;
  const size_t size = CPU_ALLOC_SIZE(slots);
  CPU_ZERO_S(size, set);
  int cores = machine;
  if (sched_getaffinity(0, size, set) == 0) cores = std::max(1, CPU_COUNT_S(size, set));
  CPU_FREE(set);
  return cores;
}

}  // namespace rankd

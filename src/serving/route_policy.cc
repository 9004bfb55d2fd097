#include "serving/route_policy.h"

#include <algorithm>

namespace rankd {

double DeviceFinishMicros(const RoutePolicy& policy, const RouteLoad& load, int64_t rows, int64_t sequence_elements) {
  const double own = CostMicros(policy.device, rows, sequence_elements);
  if (load.device_executors <= 0) return own;
  // Runs beyond the executors wait; this one waits for its share of those ahead of it.
  const int ahead = std::max(0, load.device_busy - load.device_executors + 1);
  return own * (1.0 + static_cast<double>(ahead) / load.device_executors);
}

Route ChooseRoute(const RoutePolicy& policy, const RouteLoad& load, int64_t rows, int64_t sequence_elements) {
  if (policy.mode == CpuRouting::kOff) return Route::kDevice;
  if (!load.device_healthy) return Route::kCpuFallback;
  const bool cpu_free = load.cpu_busy < load.cpu_runs;
  switch (policy.mode) {
    case CpuRouting::kRows:
      return cpu_free && rows <= policy.max_rows ? Route::kCpu : Route::kDevice;
    case CpuRouting::kCost:
      return cpu_free && CostMicros(policy.cpu, rows, sequence_elements) <
                             DeviceFinishMicros(policy, load, rows, sequence_elements)
                 ? Route::kCpu
                 : Route::kDevice;
    default:
      return Route::kDevice;
  }
}

}  // namespace rankd

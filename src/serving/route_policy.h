// Where one run of a model goes when the model holds plans on its device and on the CPU
// (docs/routing.md): the decision alone, from the costs fitted at warm-up and what each side is
// doing now. Plain functions, no state.
#pragma once

#include <cstdint>

#include "batching/cost_model.h"
#include "model/config.h"

namespace rankd {

struct RoutePolicy {
  CpuRouting mode = CpuRouting::kOff;
  int64_t max_rows = 0;  // kRows
  FittedCost device;     // kCost: microseconds of a run on each side (batching/cost_model.h)
  FittedCost cpu;
};

// What each side is doing when a run is routed.
struct RouteLoad {
  bool device_healthy = true;  // Backend::Health of some replica
  int device_busy = 0;         // runs on the device side now (those waiting for an executor included)
  int device_executors = 0;    // runs the device side takes at once; 0: no limit
  int cpu_busy = 0;            // runs on the CPU now
  int cpu_runs = 1;            // runs the CPU takes at once
};

enum class Route : uint8_t {
  kDevice,
  kCpu,          // a free CPU run was chosen
  kCpuFallback,  // the device cannot run work: the CPU, waiting for a free run if need be
};

// When a run of `rows` rows reading `sequence_elements` ragged ids would end on the device, in
// microseconds from now: its cost (CostMicros), after the runs ahead of it (those past the executors, each
// taken as costing what it does) have drained over the executors.
double DeviceFinishMicros(const RoutePolicy& policy, const RouteLoad& load, int64_t rows, int64_t sequence_elements);

// Where the run goes. The CPU is chosen only with a free run there (kCpuFallback aside): the CPU
// side never queues work the device could take.
Route ChooseRoute(const RoutePolicy& policy, const RouteLoad& load, int64_t rows, int64_t sequence_elements);

}  // namespace rankd

#include "backend/table_placement.h"

#include <algorithm>

#include "model/graph.h"

namespace rankd {

std::map<int, int64_t> NamedDeviceBytes(const Graph& graph, const TablePlacement& tables, int64_t grain) {
  std::map<int, int64_t> bytes;
  grain = std::max<int64_t>(grain, 1);
  for (const auto& [value, devices] : tables.gpus) {
    auto it = graph.constants.find(value);
    if (it == graph.constants.end() || devices.empty()) continue;
    const auto whole = static_cast<int64_t>(it->second.bytes());
    if (whole == 0) continue;
    const auto n = static_cast<int64_t>(devices.size());
    const int64_t part = (std::max<int64_t>((whole + n - 1) / n, 1) + grain - 1) / grain * grain;
    for (int device : devices) bytes[device] += part;
  }
  return bytes;
}

}  // namespace rankd

#include "model/ops/keyed_rows.h"

namespace rankd::keyed_rows {

std::vector<Part> Parts(const Node& node) {
  const std::vector<int64_t> defaults = node.GetInts("default_rows"), bags = node.GetInts("bags"),
                             counters = node.GetInts("counters");
  std::vector<std::string> tables;
  if (auto it = node.attrs.find("tables"); it != node.attrs.end()) {
    if (auto* names = std::get_if<std::vector<std::string>>(&it->second)) tables = *names;
  }
  std::vector<Part> parts;
  for (size_t p = 0; p < defaults.size() && p < bags.size() && p < counters.size() && p < tables.size(); ++p) {
    parts.push_back({defaults[p], bags[p] != 0, counters[p], tables[p]});
  }
  return parts;
}

void SetParts(Node& node, const std::vector<Part>& parts) {
  std::vector<int64_t> defaults, bags, counters;
  std::vector<std::string> tables;
  for (const Part& p : parts) {
    defaults.push_back(p.default_row);
    bags.push_back(p.bag ? 1 : 0);
    counters.push_back(p.counter);
    tables.push_back(p.table);
  }
  node.attrs["default_rows"] = defaults;
  node.attrs["bags"] = bags;
  node.attrs["counters"] = counters;
  node.attrs["tables"] = tables;
}

}  // namespace rankd::keyed_rows

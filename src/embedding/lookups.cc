#include "embedding/lookups.h"

namespace rankd {

std::vector<Lookup> NodeLookups(const Node& n) {
  if (n.op == "EmbeddingBag") return {Lookup{}};
  if (n.op == "Gather" && n.GetInt("axis", 0) == 0) {
    Lookup gather;
    gather.gather = true;
    return {gather};
  }
  if (n.op != "ConcatEmbeddingBags") return {};
  std::vector<Lookup> lookups;
  const std::vector<int64_t> parts = n.GetInts("parts"), columns = n.GetInts("columns"), floors = n.GetInts("floors");
  size_t first = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p] > 1) {  // a bag part (table, ids or values + offsets); 1: a dense part copied
      Lookup part;
      part.table_input = first;
      part.ids_input = first + 1;
      part.column = p < columns.size() ? columns[p] : -1;
      part.gather = part.column >= 0;
      if (part.gather && p < floors.size()) part.floor = floors[p];
      lookups.push_back(part);
    }
    first += static_cast<size_t>(parts[p]);
  }
  return lookups;
}

}  // namespace rankd

// rankd's KeyedRows op: keyed tables' keys mapped to their rows (compile/keyed_tables.cc makes it;
// the CPU and CUDA backends run it, one launch for every part).
//
//   KeyedRows(ids_0, index_0, ids_1, index_1, ...) -> rows_0, rows_1, ...
//
// Part p maps each id of ids_p (INT64 or INT32, any shape) to its row in a keyed table through
// the table's index (model/key_index.h, INT64 [slots, 2], a constant): rows_p (INT64, ids_p's
// shape). A key the index does not hold reads default_rows[p] and is counted in the model's
// counter counters[p] (backend.h, KernelCounters); with bags[p] = 1 (a bag reads the rows) a
// negative id is an empty slot and stays -1. tables[p] names the part's table (metrics,
// `rankd inspect`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/graph.h"

namespace rankd::keyed_rows {

struct Part {
  int64_t default_row = 0;
  bool bag = false;
  int64_t counter = 0;
  std::string table;
};

// The node's parts, from its attributes (as many as it has outputs; CheckKeyedRows has checked).
std::vector<Part> Parts(const Node& node);
// Sets the node's attributes to `parts`.
void SetParts(Node& node, const std::vector<Part>& parts);

}  // namespace rankd::keyed_rows

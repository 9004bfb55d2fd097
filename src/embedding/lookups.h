// The lookups a graph node makes: which of its inputs is a table whose rows it reads, which input
// gives the ids, and how it reads them. One place for the embedding layer (FindTables,
// AppendLookups) to recognise EmbeddingBag, a row Gather and ConcatEmbeddingBags' bag parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "model/graph.h"

namespace rankd {

struct Lookup {
  size_t table_input = 0;  // the node's input that is the table
  size_t ids_input = 1;    // the node's input that gives the ids (a ragged input's values)
  // A bag skips negative ids (empty slots). A row Gather, and a bag part that reads one column as a
  // Gather (ConcatEmbeddingBags' `columns`), clips ids to `floor` and counts negative ones from the
  // table's end.
  bool gather = false;
  int64_t column = -1;  // >= 0: only this column of [rows, length] ids
  int64_t floor = std::numeric_limits<int64_t>::min();
};

// The lookups `node` makes; empty for a node that reads no table's rows.
std::vector<Lookup> NodeLookups(const Node& node);

}  // namespace rankd

// Constants shared between the models of a process: a model version loaded while the previous one
// serves (a hot swap), or a second model built from the same tables, holds one copy of each
// constant the two have byte for byte (an embedding table the new version did not retrain), not
// two.
//
// Each constant of at least kSharedConstantBytes that owns its storage or views the graph's
// external-data files is offered to a process-wide list that holds it weakly: the constants of later graphs with the
// same dtype and shape are compared with it byte by byte (on every core, stopping at the first difference), and an
// equal one is replaced by a view sharing its storage (and the graph maps the file that storage lies in, if any), which
// then lives while any model holds it, whichever unloads first. Equal constants of one graph stay apart, and share with
// distinct ones: each is its own table to the passes and backends after (its own cache on a GPU). Constants are
// read-only once compiled, so sharing them is safe; a pass that rewrites a table's rows makes a new constant, which is
// compared as any other.
#pragma once

#include <cstddef>

#include "model/graph.h"

namespace rankd {

// Constants below this many bytes (four pages: a layer's bias, a shape) are left alone.
inline constexpr size_t kSharedConstantBytes = size_t{16} << 10;

// Replaces each constant of `graph` equal to one another graph of this process offered (and some
// model still holds) by a view of that one's storage, and offers the others. Returns the bytes
// now shared. Thread-safe.
size_t ShareEqualConstants(Graph& graph, size_t min_bytes = kSharedConstantBytes);

}  // namespace rankd

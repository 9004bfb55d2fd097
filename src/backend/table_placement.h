// Where a device backend keeps a model's embedding tables (docs/embedding.md).
//
// A table on the device is uploaded with the other weights. A table in host memory stays there,
// page-locked and mapped into the device's address space: the lookup kernels read its rows in place
// over the bus, so a model whose tables exceed the device's memory still serves, every id from the
// table itself. The embedding layer decides the placement (embedding/table_budget.h); backends
// without a device of their own ignore it.
#pragma once

#include <unordered_set>

namespace rankd {

struct TablePlacement {
  // Value ids (Graph::constants' keys) of the tables kept in host memory; every other constant
  // lives on the device.
  std::unordered_set<int> host;

  bool OnHost(int value) const { return host.count(value) > 0; }
};

}  // namespace rankd

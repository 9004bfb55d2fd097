// Where a device backend keeps a model's embedding tables (docs/embedding.md).
//
// A table on the device is uploaded with the other weights, or, placed on a named GPU, held once
// there for every replica of the model and read by the others over NVLink (peer access). A table in host memory stays
// there, page-locked and mapped into the device's address space: the lookup kernels read its rows in place over the
// bus, so a model whose tables exceed the device's memory still serves, every id from the table itself. A cached table
// lives in host memory too, with a cache of some of its rows on the device (table_cache.h): lookups read a cached row
// from the device and any other from the host. The embedding layer decides the placement (embedding/table_budget.h);
// backends without a device of their own ignore it.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

namespace rankd {

struct TablePlacement {
  // Value ids (Graph::constants' keys) of the tables kept in host memory with no device cache.
  std::unordered_set<int> host;
  // Tables kept in host memory with a device cache: value id -> the cache's rows (at least 1).
  std::unordered_map<int, int64_t> cached;
  // Tables kept whole on a named device, one copy for every replica of the model (the others
  // read it there: a GPU's peers over NVLink): value id -> the device's index.
  std::unordered_map<int, int> gpu;

  // Whether the table's rows live in host memory (cached or not); every other constant lives on
  // the device.
  bool OnHost(int value) const { return host.count(value) > 0 || cached.count(value) > 0; }
  // The device holding the table for every replica; -1 for each replica's own.
  int Gpu(int value) const {
    auto it = gpu.find(value);
    return it == gpu.end() ? -1 : it->second;
  }
  // The rows of the table's device cache; 0 when it has none.
  int64_t CacheRows(int value) const {
    auto it = cached.find(value);
    return it == cached.end() ? 0 : it->second;
  }
};

}  // namespace rankd

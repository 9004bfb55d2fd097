// Where a device backend keeps a model's embedding tables (docs/embedding.md).
//
// A table on the device is uploaded with the other weights, or, placed on named GPUs, held once
// there for every replica of the model (its rows split over them) and read by the others over
// NVLink. A table in host memory stays
// there, page-locked and mapped into the device's address space: the lookup kernels read its rows in place over the
// bus, so a model whose tables exceed the device's memory still serves, every id from the table itself. A cached table
// lives in host memory too, with a cache of some of its rows on the device (table_cache.h): lookups read a cached row
// from the device and any other from the host. The embedding layer decides the placement (embedding/table_budget.h);
// backends without a device of their own ignore it.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rankd {

class Graph;

struct TablePlacement {
  // Value ids (Graph::constants' keys) of the tables kept in host memory with no device cache.
  std::unordered_set<int> host;
  // Tables kept in host memory with a device cache: value id -> the cache's rows (at least 1).
  std::unordered_map<int, int64_t> cached;
  // Tables kept on named devices, one copy for every replica of the model, their rows split
  // evenly over the devices in order (the replicas elsewhere read them there: a GPU's peers over
  // NVLink): value id -> the devices' indices.
  std::unordered_map<int, std::vector<int>> gpus;

  // Whether the table's rows live in host memory (cached or not); every other constant lives on
  // the device.
  bool OnHost(int value) const { return host.count(value) > 0 || cached.count(value) > 0; }
  // The devices holding the table for every replica; null for each replica's own.
  const std::vector<int>* Gpus(int value) const {
    auto it = gpus.find(value);
    return it == gpus.end() ? nullptr : &it->second;
  }
  // The rows of the table's device cache; 0 when it has none.
  int64_t CacheRows(int value) const {
    auto it = cached.find(value);
    return it == cached.end() ? 0 : it->second;
  }
};

// The device memory the tables on named devices take on each of them: a table's equal parts, one
// per device it is split over, each rounded up to `grain` bytes (the mapping's granularity), as
// backend/cuda/shared_tables.h makes them. Device index -> bytes; tables absent from the graph
// count nothing.
std::map<int, int64_t> NamedDeviceBytes(const Graph& graph, const TablePlacement& tables, int64_t grain);

}  // namespace rankd

// TableCache: a device's cache of some rows of one table kept in host memory (docs/embedding.md).
//
// The cache has `capacity` slots, each holding one row of the table or none. Lookups read a cached
// row from its slot on the device and every other row from the table in host memory, so a row's
// value never depends on whether it is cached: the cache changes where a row is read, not what.
// Which rows it holds is decided above the backend (embedding/cache_keeper.h), off the request
// path, and handed down as fills.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/latency_histogram.h"
#include "rankd/status.h"

namespace rankd {

class TableCache {
 public:
  virtual ~TableCache() = default;

  // `row` of the table goes into `slot`, replacing whatever row the slot held.
  struct Fill {
    int64_t slot = 0;
    int64_t row = 0;
  };
  virtual int64_t capacity() const = 0;
  // A cache may be shared by the versions of a model that read the same table (one loaded beside
  // the one it replaces): the keeper that claimed it last decides its rows. Claim makes the caller
  // that keeper and returns its claim; Release gives a claim back (the one claimed before it
  // decides again, as when a version's load fails); Claimed says whether `claim` decides now.
  virtual uint64_t Claim() { return 0; }
  virtual void Release(uint64_t /*claim*/) {}
  virtual bool Claimed(uint64_t /*claim*/) const { return true; }
  // Applies `fills` in order (a slot filled twice holds the later row) when `claim` decides the
  // cache's rows; else changes nothing. Ordered against the lookups running meanwhile: none reads
  // a slot while its row changes. Blocks until the device has the new rows.
  virtual Status Apply(std::span<const Fill> fills, uint64_t claim) = 0;
  // The row each slot holds (-1: empty), as the device has it after the last Apply (read by the
  // keeper that claimed the cache, between its Applies).
  virtual std::span<const int64_t> rows_of_slots() const = 0;
  // Of the rows runs missed in the cache, since it was made: those the host gathered for the
  // lookups before their launch (`staged`), and those it left them to read from the table for want
  // of room (`unstaged`), and per run and input whose ids it placed, the host time that took
  // (finding the misses and gathering their rows, summed over the threads placing them:
  // `seconds`). Only runs of many ids are placed (runtime/cuda/placed_ids.h).
  struct Gathered {
    uint64_t staged = 0, unstaged = 0;
    LatencyHistogram seconds;
  };
  virtual Gathered gathered() const { return {}; }
};

// The fills of `fills` that change something, in the order their slots were first filled: the last
// row each slot is given, less those giving a slot the row `row_of_slot` says it holds already.
std::vector<TableCache::Fill> LastFills(std::span<const TableCache::Fill> fills, std::span<const int64_t> row_of_slot);

// The claims made on a shared cache (TableCache::Claim), in order; its owner's lock guards it.
class CacheClaims {
 public:
  uint64_t Claim() {
    claims_.push_back(next_);
    return next_++;
  }
  void Release(uint64_t claim) { std::erase(claims_, claim); }
  // Whether `claim` decides now: the last one made and not released (any claim, while none is held).
  bool Decides(uint64_t claim) const { return claims_.empty() || claims_.back() == claim; }

 private:
  std::vector<uint64_t> claims_;
  uint64_t next_ = 1;
};

}  // namespace rankd
